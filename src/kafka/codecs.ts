// The record batch codecs Kafka producers use, registered with kafkajs (which has only gzip):
// snappy through kafkajs-snappy (pure JS snappyjs, xerial framing as Java writes it), lz4 through
// lz4js's block decoder inside an LZ4 frame reader of our own, zstd through Node's own zlib.
// Nothing here is native or downloaded at install time.
import { promisify } from 'node:util';
import { zstdCompress, zstdDecompress } from 'node:zlib';
import kafkajs, { type CompressionTypes } from 'kafkajs';
import SnappyCodec from 'kafkajs-snappy';
import * as lz4js from 'lz4js';
import * as lz4xxh32 from 'lz4js/xxh32.js';

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

export class CodecError extends Error {}

const LZ4_MAGIC = 0x184d2204;
const LZ4_BLOCK_SIZES: Record<number, number> = {
  4: 64 << 10,
  5: 256 << 10,
  6: 1 << 20,
  7: 4 << 20,
};
const LZ4_UNCOMPRESSED = 0x80000000;

interface Lz4Frame {
  blockChecksum: boolean;
  contentChecksum: boolean;
  maxBlockSize: number;
  /** Offset of the first block header. */
  blocksAt: number;
}

function readLz4FrameHeader(src: Buffer, at: number): Lz4Frame {
  if (src.length < at + 7 || src.readUInt32LE(at) !== LZ4_MAGIC) {
    throw new CodecError(`lz4: no frame magic number at byte ${at}`);
  }
  const flags = src[at + 4]!;
  if ((flags & 0xc0) !== 0x40) throw new CodecError(`lz4: frame version ${flags >> 6} unsupported`);
  if (flags & 0x01) throw new CodecError('lz4: frames with a dictionary are unsupported');
  const maxBlockSize = LZ4_BLOCK_SIZES[(src[at + 5]! >> 4) & 0x07];
  if (maxBlockSize === undefined) throw new CodecError('lz4: invalid block maximum size');
  const contentSize = (flags & 0x08) !== 0;
  return {
    blockChecksum: (flags & 0x10) !== 0,
    contentChecksum: (flags & 0x04) !== 0,
    maxBlockSize,
    // magic, FLG, BD, the content size when present, and the header checksum
    blocksAt: at + 6 + (contentSize ? 8 : 0) + 1,
  };
}

/**
 * Decodes LZ4 frames (the format Kafka uses since message format v1), one after another as a
 * stream may hold them. lz4js decodes the blocks; the frame is read here, because lz4js's own
 * frame reader misplaces block checksums and mis-reads 64-bit content sizes. Checksums are
 * skipped, not verified: the record batch carries its own CRC.
 */
export function decompressLz4(src: Buffer): Buffer {
  // Size the output first: every block's header says how much it can hold at most.
  let bound = 0;
  const frames: Lz4Frame[] = [];
  let at = 0;
  while (at < src.length) {
    if (at + 8 > src.length) throw new CodecError(`lz4: ${src.length - at} stray bytes at the end`);
    const magic = src.readUInt32LE(at);
    if ((magic & 0xfffffff0) === 0x184d2a50) {
      at += 8 + src.readUInt32LE(at + 4); // a skippable frame
      continue;
    }
    const frame = readLz4FrameHeader(src, at);
    frames.push(frame);
    at = frame.blocksAt;
    for (;;) {
      if (at + 4 > src.length) throw new CodecError('lz4: frame ends inside a block header');
      const header = src.readUInt32LE(at);
      at += 4;
      if (header === 0) break;
      const size = header & ~LZ4_UNCOMPRESSED;
      bound += header & LZ4_UNCOMPRESSED ? size : frame.maxBlockSize;
      at += size + (frame.blockChecksum ? 4 : 0);
    }
    at += frame.contentChecksum ? 4 : 0;
  }
  const dst = Buffer.allocUnsafe(bound);
  let out = 0;
  for (const frame of frames) {
    at = frame.blocksAt;
    // Blocks of one frame may refer back to earlier ones: they are decoded into one buffer.
    for (;;) {
      const header = src.readUInt32LE(at);
      at += 4;
      if (header === 0) break;
      const size = header & ~LZ4_UNCOMPRESSED;
      if (header & LZ4_UNCOMPRESSED) {
        src.copy(dst, out, at, at + size);
        out += size;
      } else {
        out = lz4js.decompressBlock(src, dst, at, size, out);
      }
      at += size + (frame.blockChecksum ? 4 : 0);
    }
    at += frame.contentChecksum ? 4 : 0;
    // Skippable frames between frames were sized above; step over them again.
    while (at + 8 <= src.length && (src.readUInt32LE(at) & 0xfffffff0) === 0x184d2a50) {
      at += 8 + src.readUInt32LE(at + 4);
    }
  }
  if (out > bound) throw new CodecError('lz4: a block decoded past its frame maximum size');
  return dst.subarray(0, out);
}

const LZ4_WRITE_BLOCK = 64 << 10;
const lz4HashTable = new Uint32Array(1 << 16);
const lz4BlockBuffer = Buffer.alloc(LZ4_WRITE_BLOCK + (LZ4_WRITE_BLOCK >> 7) + 64);

/**
 * One LZ4 frame of independent 64 KiB blocks, as Kafka's Java client writes them: its reader
 * (which every broker runs to validate a batch) refuses dependent blocks, and lz4js's own frame
 * writer makes those. lz4js compresses each block, with the match table cleared in between.
 */
export function compressLz4(src: Buffer): Buffer {
  const header = Buffer.from([0x04, 0x22, 0x4d, 0x18, 0x60, 0x40, 0]); // FLG: v1, independent
  header[6] = (lz4xxh32.hash(0, header, 4, 2) >>> 8) & 0xff;
  const parts: Buffer[] = [header];
  for (let at = 0; at < src.length; at += LZ4_WRITE_BLOCK) {
    const size = Math.min(LZ4_WRITE_BLOCK, src.length - at);
    lz4HashTable.fill(0);
    const compressed = lz4js.compressBlock(src, lz4BlockBuffer, at, size, lz4HashTable);
    const blockHeader = Buffer.alloc(4);
    if (compressed > 0 && compressed < size) {
      blockHeader.writeUInt32LE(compressed);
      parts.push(blockHeader, Buffer.from(lz4BlockBuffer.subarray(0, compressed)));
    } else {
      blockHeader.writeUInt32LE((size | LZ4_UNCOMPRESSED) >>> 0);
      parts.push(blockHeader, src.subarray(at, at + size));
    }
  }
  parts.push(Buffer.alloc(4)); // the end mark
  return Buffer.concat(parts);
}

const lz4: KafkajsCodec = {
  compress: (encoder) => Promise.resolve(compressLz4(encoder.buffer)),
  decompress: (buffer) => {
    try {
      return Promise.resolve(decompressLz4(buffer));
    } catch (error) {
      return Promise.reject(error instanceof Error ? error : new CodecError(String(error)));
    }
  },
};

// Node's zstd runs on libuv's thread pool, off the event loop, like kafkajs's own gzip.
const zstdCompressAsync = promisify(zstdCompress);
const zstdDecompressAsync = promisify(zstdDecompress);
const zstd: KafkajsCodec = {
  compress: (encoder) => zstdCompressAsync(encoder.buffer),
  decompress: (buffer) => zstdDecompressAsync(buffer),
};

let registered = false;

/** Registers snappy, lz4 and zstd with kafkajs (once; gzip it has). */
export function registerCodecs(): void {
  if (registered) return;
  registered = true;
  // A CommonJS module whose lexer-visible exports miss these two: reached through its default.
  const { CompressionCodecs, CompressionTypes } = kafkajs;
  const codecs = CompressionCodecs as Record<number, () => KafkajsCodec>;
  codecs[CompressionTypes.Snappy] = SnappyCodec;
  codecs[CompressionTypes.LZ4] = () => lz4;
  codecs[CompressionTypes.ZSTD] = () => zstd;
}
