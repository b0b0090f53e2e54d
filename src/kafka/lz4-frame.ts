// LZ4 frames as Kafka record batches hold them (message format v1 and later): a reader for any
// frame a producer writes, and a writer of the frames Kafka's Java client writes and reads.
import * as lz4js from 'lz4js';
import * as lz4xxh32 from 'lz4js/xxh32.js';

export class CodecError extends Error {}

/** A compressed batch whose records decompress past the bound a reader sets: never allocated. */
export class DecompressedSizeError extends CodecError {
  constructor(message: string) {
    super(message);
    this.name = 'DecompressedSizeError';
  }
}

const blockTooLarge = (): CodecError =>
  new CodecError('lz4: a block decoded past its frame maximum size');

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
 * skipped, not verified: the record batch carries its own CRC. Output past `maxBytes` is refused
 * (DecompressedSizeError), and no more than that is ever allocated, whatever the blocks declare.
 */
export function decompressLz4(src: Buffer, maxBytes = Infinity): Buffer {
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
  // Declared maxima may add up to far more than a batch holds: allocate no more than the limit, and
  // refuse the frame once it decodes past it (lz4js writes nothing past the buffer's end).
  const capacity = Math.min(bound, maxBytes);
  const dst = Buffer.allocUnsafe(capacity);
  const tooLarge = (): DecompressedSizeError =>
    new DecompressedSizeError(`lz4: the frames decompress past ${maxBytes} bytes`);
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
        if (out + size > capacity) throw tooLarge();
        src.copy(dst, out, at, at + size);
        out += size;
      } else {
        out = lz4js.decompressBlock(src, dst, at, size, out);
        if (out > capacity) throw out > maxBytes ? tooLarge() : blockTooLarge();
      }
      at += size + (frame.blockChecksum ? 4 : 0);
    }
    at += frame.contentChecksum ? 4 : 0;
    // Skippable frames between frames were sized above; step over them again.
    while (at + 8 <= src.length && (src.readUInt32LE(at) & 0xfffffff0) === 0x184d2a50) {
      at += 8 + src.readUInt32LE(at + 4);
    }
  }
  return dst.subarray(0, out);
}

const LZ4_WRITE_BLOCK = 64 << 10;
const MIN_MATCH = 4;
/** The block format's end rules: the last match starts 12 bytes before the end at the latest, and
 * the last 5 bytes are literals. Java's decoder refuses blocks that break them. */
const MATCH_START_LIMIT = 12;
const LAST_LITERALS = 5;
const HASH_BITS = 14;
const matchTable = new Int32Array(1 << HASH_BITS);

function writeLength(dst: Buffer, at: number, length: number): number {
  let n = length;
  while (n >= 255) {
    dst[at++] = 255;
    n -= 255;
  }
  dst[at++] = n;
  return at;
}

/**
 * Compresses src[start, end) into one LZ4 block at dst[0...], referring to nothing before
 * `start` (an independent block); greedy, one candidate per hash, as LZ4's fast mode does.
 * Returns the block's size; dst must hold end - start + (end - start) / 255 + 16 bytes.
 */
export function compressLz4Block(src: Buffer, start: number, end: number, dst: Buffer): number {
  matchTable.fill(-1);
  let out = 0;
  let anchor = start;
  let i = start;
  const matchStartLimit = end - MATCH_START_LIMIT;
  const matchEndLimit = end - LAST_LITERALS;
  while (i < matchStartLimit) {
    const sequence = src.readUInt32LE(i);
    const hash = Math.imul(sequence, 2654435761) >>> (32 - HASH_BITS);
    const candidate = matchTable[hash]!;
    matchTable[hash] = i;
    if (candidate < start || i - candidate > 0xffff || src.readUInt32LE(candidate) !== sequence) {
      i++;
      continue;
    }
    let length = MIN_MATCH;
    while (i + length < matchEndLimit && src[i + length] === src[candidate + length]) length++;
    const literals = i - anchor;
    const matchCode = length - MIN_MATCH;
    dst[out++] = (Math.min(literals, 15) << 4) | Math.min(matchCode, 15);
    if (literals >= 15) out = writeLength(dst, out, literals - 15);
    out += src.copy(dst, out, anchor, i);
    dst.writeUInt16LE(i - candidate, out);
    out += 2;
    if (matchCode >= 15) out = writeLength(dst, out, matchCode - 15);
    i += length;
    anchor = i;
  }
  const literals = end - anchor;
  dst[out++] = Math.min(literals, 15) << 4;
  if (literals >= 15) out = writeLength(dst, out, literals - 15);
  out += src.copy(dst, out, anchor, end);
  return out;
}

const blockBuffer = Buffer.alloc(LZ4_WRITE_BLOCK + (LZ4_WRITE_BLOCK >> 7) + 64);

/**
 * One LZ4 frame of independent 64 KiB blocks, as Kafka's Java client writes them: its reader,
 * which every broker runs to validate a batch, refuses dependent blocks and blocks that break
 * the format's end rules, and lz4js's own writer makes both.
 */
export function compressLz4(src: Buffer): Buffer {
  const header = Buffer.from([0x04, 0x22, 0x4d, 0x18, 0x60, 0x40, 0]); // FLG: v1, independent
  header[6] = (lz4xxh32.hash(0, header, 4, 2) >>> 8) & 0xff;
  const parts: Buffer[] = [header];
  for (let at = 0; at < src.length; at += LZ4_WRITE_BLOCK) {
    const end = Math.min(at + LZ4_WRITE_BLOCK, src.length);
    const compressed = compressLz4Block(src, at, end, blockBuffer);
    const blockHeader = Buffer.alloc(4);
    if (compressed < end - at) {
      blockHeader.writeUInt32LE(compressed);
      parts.push(blockHeader, Buffer.from(blockBuffer.subarray(0, compressed)));
    } else {
      blockHeader.writeUInt32LE((end - at + LZ4_UNCOMPRESSED) >>> 0);
      parts.push(blockHeader, src.subarray(at, end));
    }
  }
  parts.push(Buffer.alloc(4)); // the end mark
  return Buffer.concat(parts);
}
