// The record batch codecs Kafka producers use, registered with kafkajs (which has only gzip):
// snappy through snappyjs (pure JS; the xerial framing Java writes read here, kafkajs-snappy
// writing it), lz4 through lz4-frame.ts (lz4js's block decoder), gzip and zstd through Node's zlib.
// Nothing here is native or downloaded at install time. Every decompression is bounded: a batch
// whose records decompress past the bound is refused (DecompressedSizeError) before its output is
// allocated, so a small crafted batch cannot run a reader out of memory.
import { createRequire } from 'node:module';
import { constants } from 'node:buffer';
import { promisify } from 'node:util';
import { gzip as gzipCompress, unzip, zstdCompress, zstdDecompress } from 'node:zlib';
import kafkajs, { type CompressionTypes } from 'kafkajs';
import SnappyCodec from 'kafkajs-snappy';
import { CodecError, DecompressedSizeError, compressLz4, decompressLz4 } from './lz4-frame.ts';

export { CodecError, DecompressedSizeError };

/**
 * The most bytes the records of one record batch may decompress to (and a partition's record set
 * in one fetch, beyond its first batch), unless the process sets another bound. Kafka batches are
 * at most `message.max.bytes` (1 MiB by default) compressed; 64 MiB leaves a compression ratio of
 * 64 to one full-size batch and stays far from a receiver's memory.
 */
export const defaultMaxDecompressedBytes = 64 * 2 ** 20;
let maxDecompressed = defaultMaxDecompressedBytes;

/** The bound of this process (the receiver's `--max-decompressed-mib`). */
export function setMaxDecompressedBytes(bytes: number): void {
  if (!(Number.isSafeInteger(bytes) && bytes > 0)) throw new RangeError(`bad bound ${bytes}`);
  maxDecompressed = bytes;
}

export const maxDecompressedBytes = (): number => maxDecompressed;

/** The codecs of Kafka record batches, by the names producers configure (`compression.type`). */
export const codecNames = ['none', 'gzip', 'snappy', 'lz4', 'zstd'] as const;
export type CodecName = (typeof codecNames)[number];

/** kafkajs's `compression` value for each codec, for producers that write them. */
export const kafkajsCompression: Record<CodecName, CompressionTypes> = {
  none: kafkajs.CompressionTypes.None,
  gzip: kafkajs.CompressionTypes.GZIP,
  snappy: kafkajs.CompressionTypes.Snappy,
  lz4: kafkajs.CompressionTypes.LZ4,
  zstd: kafkajs.CompressionTypes.ZSTD,
};

/** The codec shape kafkajs calls: `compress` gets its Encoder, of which only `buffer` is used. */
export interface KafkajsCodec {
  compress(encoder: { buffer: Buffer }): Promise<Buffer>;
  decompress(buffer: Buffer): Promise<Buffer>;
}

/** The codec ids of a record batch's attributes (low 3 bits). */
const codecIds = { gzip: 1, snappy: 2, lz4: 3, zstd: 4 } as const;

// zlib and zstd run on libuv's thread pool, off the event loop, and stop at maxOutputLength.
const gzipAsync = promisify(gzipCompress);
const unzipAsync = promisify(unzip);
const zstdCompressAsync = promisify(zstdCompress);
const zstdDecompressAsync = promisify(zstdDecompress);

/** zlib's refusal of output past maxOutputLength, told by its code, as ours. */
async function boundedZlib(name: string, run: Promise<Buffer>, maxBytes: number): Promise<Buffer> {
  try {
    return await run;
  } catch (error) {
    if ((error as { code?: unknown }).code === 'ERR_BUFFER_TOO_LARGE') {
      throw new DecompressedSizeError(`${name}: the records decompress past ${maxBytes} bytes`);
    }
    throw error;
  }
}

// snappyjs as kafkajs-snappy loads it: a dependency of that package, not of this one.
const snappyjs = createRequire(createRequire(import.meta.url).resolve('kafkajs-snappy'))(
  'snappyjs',
) as { uncompress: (compressed: Buffer) => Buffer };
const xerialHeader = Buffer.from([130, 83, 78, 65, 80, 80, 89, 0]);
/** Where a xerial stream's first chunk starts: magic, version and compatible version. */
const xerialChunksAt = 16;

/** A snappy block's preamble: its uncompressed length, a varint of up to 32 bits; -1 if invalid. */
function snappyLength(block: Buffer): number {
  let result = 0;
  for (let i = 0, shift = 0; i < block.length && shift < 35; i++, shift += 7) {
    const b = block[i]!;
    result += (b & 0x7f) * 2 ** shift;
    if (b < 0x80) return result;
  }
  return -1;
}

/**
 * Snappy as Kafka writes it: one raw block, or xerial framing (Java's client) of blocks each with
 * its length before it. Every block's declared length is summed against the bound before any is
 * decoded, and the blocks are joined once.
 */
function decompressSnappy(data: Buffer, maxBytes: number): Buffer {
  const blocks: Buffer[] = [];
  if (data.length >= 8 && data.subarray(0, 8).equals(xerialHeader)) {
    for (let at = xerialChunksAt; at + 4 <= data.length;) {
      const size = data.readUInt32BE(at);
      at += 4;
      if (at + size > data.length) throw new CodecError('snappy: a chunk runs past the data');
      blocks.push(data.subarray(at, at + size));
      at += size;
    }
  } else blocks.push(data);
  let total = 0;
  for (const block of blocks) {
    const length = snappyLength(block);
    if (length < 0) throw new CodecError('snappy: a block without a valid length');
    total += length;
    if (total > maxBytes) {
      throw new DecompressedSizeError(`snappy: the records decompress past ${maxBytes} bytes`);
    }
  }
  const decoded = blocks.map((b) => snappyjs.uncompress(b));
  return decoded.length === 1 ? decoded[0]! : Buffer.concat(decoded, total);
}

/**
 * The records of a batch compressed with codec `codec` (its attributes' low 3 bits), refused with
 * DecompressedSizeError when they come to more than `maxBytes`; never more is allocated.
 */
export async function decompressBatch(
  codec: number,
  data: Buffer,
  maxBytes: number,
): Promise<Buffer> {
  // zlib takes a bound from 1 byte to the largest Buffer; what it lets past ours is refused below.
  const maxOutputLength = Math.max(1, Math.min(Math.floor(maxBytes), constants.MAX_LENGTH));
  let out: Buffer;
  switch (codec) {
    case codecIds.gzip:
      // unzip, as kafkajs's gzip: gzip or zlib headers alike.
      out = await boundedZlib('gzip', unzipAsync(data, { maxOutputLength }), maxBytes);
      break;
    case codecIds.snappy:
      out = decompressSnappy(data, maxBytes);
      break;
    case codecIds.lz4:
      out = decompressLz4(data, maxBytes);
      break;
    case codecIds.zstd:
      out = await boundedZlib('zstd', zstdDecompressAsync(data, { maxOutputLength }), maxBytes);
      break;
    default:
      throw new CodecError(`no codec ${codec} for record batches`);
  }
  if (out.length > maxBytes) {
    throw new DecompressedSizeError(`the records decompress past ${maxBytes} bytes`);
  }
  return out;
}

/** A kafkajs codec decompressing within the process's bound (for the client's own decoder). */
const kafkajsCodec = (
  codec: number,
  compress: (buffer: Buffer) => Promise<Buffer>,
): KafkajsCodec => ({
  compress: (encoder) => compress(encoder.buffer),
  decompress: (buffer) => decompressBatch(codec, buffer, maxDecompressed),
});

const snappyCodec = SnappyCodec();
const gzip = kafkajsCodec(codecIds.gzip, (buffer) => gzipAsync(buffer));
const snappy = kafkajsCodec(codecIds.snappy, (buffer) => snappyCodec.compress({ buffer }));
const lz4 = kafkajsCodec(codecIds.lz4, (buffer) => Promise.resolve(compressLz4(buffer)));
const zstd = kafkajsCodec(codecIds.zstd, (buffer) => zstdCompressAsync(buffer));

let registered = false;

/**
 * Registers snappy, lz4 and zstd with kafkajs, and gzip again with its output bounded (once): the
 * client's own decoder (message sets of before Kafka 0.11) decompresses within the bound too.
 */
export function registerCodecs(): void {
  if (registered) return;
  registered = true;
  // A CommonJS module whose lexer-visible exports miss these two: reached through its default.
  const { CompressionCodecs, CompressionTypes } = kafkajs;
  const codecs = CompressionCodecs as Record<number, () => KafkajsCodec>;
  codecs[CompressionTypes.GZIP] = () => gzip;
  codecs[CompressionTypes.Snappy] = () => snappy;
  codecs[CompressionTypes.LZ4] = () => lz4;
  codecs[CompressionTypes.ZSTD] = () => zstd;
}
