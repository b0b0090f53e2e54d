// The record set of one partition in a fetch response (Kafka's RecordBatch v2, magic 2), decoded
// into offset and value columns with no object per record, and filtered as Kafka's own consumer
// filters it: records before the fetch offset, control batches and aborted transactions left out.
import { DecompressedSizeError } from './lz4-frame.ts';
import type { PackedValues } from './record-values.ts';

/** Offsets a record can have as a number without losing a digit. */
export const isExactOffset = (offset: number): boolean => Number.isSafeInteger(offset);

/** A record offset at or beyond 2^53, which a number cannot hold exactly. */
export class OffsetRangeError extends Error {
  constructor(offset: string) {
    super(`record offset ${offset} is beyond 2^53 - 1, which this receiver cannot track exactly`);
    this.name = 'OffsetRangeError';
  }
}

/** A record set the decoder refuses: a batch whose header contradicts its own length. */
export class RecordBatchError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RecordBatchError';
  }
}

/** One entry of a fetch response's aborted_transactions (READ_COMMITTED). */
export interface AbortedTransaction {
  producerId: bigint;
  firstOffset: number;
}

/**
 * Decompresses the records of a batch by its attributes (codec in the low 3 bits), refusing (a
 * rejected promise, DecompressedSizeError) output past `maxBytes` without allocating it.
 */
export type Decompress = (attributes: number, data: Buffer, maxBytes: number) => Promise<Buffer>;
/** Decompress within the bound of one batch. */
type DecompressWithin = (attributes: number, data: Buffer) => Promise<Buffer>;

/**
 * A data batch whose records decompress past the bound of one batch: none of them is read. Every
 * reader decides alike, from the batch's bytes alone; its offsets are consumed, its records (as
 * many as its header says) rejected.
 */
export interface OversizedBatch {
  baseOffset: number;
  lastOffset: number;
  /** Its record count, from its header. */
  records: number;
}

export interface DecodedRecordSet {
  /** Offsets of the records handed over (at or past the fetch offset, committed data), ascending. */
  offsets: Float64Array;
  /** values of the records at `offsets`, in that order. */
  values: PackedValues;
  /**
   * The Kafka timestamp bounding record i's: its batch's maxTimestamp (the append time on
   * LogAppendTime topics), −1 when the batch has none. Stored in the log, so every reader of an
   * offset reads the same.
   */
  timestamps: Float64Array;
  /**
   * The first and last offset at or past the fetch offset that the set covers, counting control
   * batches and aborted batches (their whole offset range) as well; null when it covers none.
   */
  firstOffset: number | null;
  lastOffset: number | null;
  /** The last record offset before the fetch offset, when the set holds any; else null. */
  lastOffsetBefore: number | null;
  /**
   * A batch too large to decompress, at or past the fetch offset. A set holding one holds nothing
   * else (a batch before it ends the set there): its first and last offsets are the batch's.
   */
  oversized?: OversizedBatch;
}

// The RecordBatch v2 header: field positions from the batch's start.
const lengthAt = 8;
const magicAt = 16;
const attributesAt = 21;
const lastOffsetDeltaAt = 23;
const maxTimestampAt = 35;
const producerIdAt = 43;
const recordCountAt = 57;
const recordsAt = 61;
/** baseOffset and batchLength, which batchLength does not count. */
const logOverhead = 12;

const compressionMask = 0x07;
const transactionalFlag = 0x10;
const controlFlag = 0x20;
/** A control record's key: version (int16), type (int16); type 0 is ABORT, 1 COMMIT. */
const abortMarker = 0;

/** The magic byte of the batches decoded here; older message sets go to the client's decoder. */
export const recordBatchMagic = 2;

/** Reads Kafka's zigzag varints from a buffer, moving `at`. */
class VarintReader {
  at = 0;
  readonly bytes: Buffer;
  constructor(bytes: Buffer) {
    this.bytes = bytes;
  }

  varint(): number {
    const bytes = this.bytes;
    let result = 0;
    let shift = 0;
    let b: number;
    do {
      b = bytes[this.at++]!;
      result |= (b & 0x7f) << shift;
      shift += 7;
    } while ((b & 0x80) !== 0 && shift < 35);
    return (result >>> 1) ^ -(result & 1);
  }

  skipVarlong(): void {
    while ((this.bytes[this.at++]! & 0x80) !== 0);
  }
}

interface BatchInSet {
  baseOffset: number;
  lastOffset: number;
  count: number;
  maxTimestamp: number;
  /** The records' bytes (decompressed when the batch was compressed), from `from` to `to`. */
  data: Buffer;
  from: number;
  to: number;
}

/**
 * Whether the set starts with a RecordBatch of magic 2, or is too short to tell (and to hold a
 * whole message of any format). Older formats (magic 0 and 1, from before Kafka 0.11) can only come from old
 * topics; the caller decodes those with the client's own decoder.
 */
export function isRecordBatchSet(set: Buffer): boolean {
  return set.length <= magicAt || set[magicAt] === recordBatchMagic;
}

/**
 * Decodes the batches of `set` that are whole (a fetch may end inside one, cut off by its size
 * limit), keeping what Kafka's Java consumer hands out: records at or past `fetchOffset`, not in a
 * control batch, not in a batch of an aborted transaction. A transaction is aborted from its
 * `firstOffset` in `aborted` up to its producer's ABORT marker (the consumer's READ_COMMITTED
 * rule; a READ_UNCOMMITTED fetch lists no aborted transactions).
 *
 * The records of one batch decompress to at most `maxDecompressed` bytes. A data batch past that
 * is `oversized`: the set ends before it when batches before it are covered, and is that batch
 * alone when it is the first, so its readers skip it whatever the cut of their fetches. The
 * batches of one set decompress to at most `maxDecompressed` together, beyond its first: a batch
 * that takes them past it ends the set before it, and the next fetch reads on from it. Either way
 * what a batch yields depends on its bytes only. A batch that cannot be decompressed otherwise
 * (corrupt) ends the set before it when batches before it are handed over, and refuses the set
 * (the decompressor's error) when it is the first: a reader stops exactly at it.
 */
export async function decodeRecordSet(
  set: Buffer,
  fetchOffset: number,
  aborted: readonly AbortedTransaction[],
  decompress: Decompress,
  maxDecompressed = Number.POSITIVE_INFINITY,
): Promise<DecodedRecordSet> {
  const bounded: DecompressWithin = (attributes, data) =>
    decompress(attributes, data, maxDecompressed);
  /** Bytes decompressed for the batches handed over. */
  let decompressed = 0;
  const pending = [...aborted].sort((a, b) => a.firstOffset - b.firstOffset);
  let nextAborted = 0;
  const abortedProducers = new Set<bigint>();
  const delivered: BatchInSet[] = [];
  let firstOffset: number | null = null;
  let lastOffset: number | null = null;
  let lastOffsetBefore: number | null = null;
  /** A batch's offsets at or past the fetch offset are the set's, records in them or not. */
  const covered = (from: number, to: number): void => {
    if (to < fetchOffset) return;
    firstOffset ??= Math.max(from, fetchOffset);
    lastOffset = to;
  };
  const skipped = (from: number, to: number): void => {
    if (to < fetchOffset) lastOffsetBefore = to;
    else covered(from, to);
  };

  /**
   * A batch's records, or undefined when they cannot be read but batches before it can be handed
   * over: the set ends before it, as one cut off does, and the next fetch, from it, fails on it
   * (or skips it, when it is too large).
   */
  const readOrEnd = async <T>(read: () => Promise<T>): Promise<T | undefined> => {
    try {
      return await read();
    } catch (error) {
      if (lastOffset !== null) return undefined;
      throw error;
    }
  };

  for (let at = 0; set.length - at >= recordsAt;) {
    const end = at + logOverhead + set.readInt32BE(at + lengthAt);
    if (end > set.length) break; // cut off by the fetch's size limit
    if (end < at + recordsAt) {
      throw new RecordBatchError(`a record batch at byte ${at} is shorter than its header`);
    }
    if (set[at + magicAt] !== recordBatchMagic) {
      throw new RecordBatchError(`a record batch at byte ${at} has magic ${set[at + magicAt]}`);
    }
    const base = set.readBigInt64BE(at);
    const last = base + BigInt(set.readInt32BE(at + lastOffsetDeltaAt));
    if (last > BigInt(Number.MAX_SAFE_INTEGER)) throw new OffsetRangeError(last.toString());
    const attributes = set.readInt16BE(at + attributesAt);
    const producerId = set.readBigInt64BE(at + producerIdAt);
    const count = set.readInt32BE(at + recordCountAt);
    const batch = { at, end, attributes };
    at = end;
    if (count <= 0) {
      // Emptied by compaction, kept for its producer state: its offsets hold nothing.
      covered(Number(base), Number(last));
      continue;
    }

    const baseOffset = Number(base);
    const lastOffsetOfBatch = Number(last);
    const control = (attributes & controlFlag) !== 0;
    let isAborted = false;
    if (producerId >= 0n) {
      while (
        nextAborted < pending.length &&
        pending[nextAborted]!.firstOffset <= lastOffsetOfBatch
      ) {
        abortedProducers.add(pending[nextAborted++]!.producerId);
      }
      if (control) {
        const type = await readOrEnd(() => controlTypeOf(set, batch, bounded));
        if (type === undefined) break;
        if (type === abortMarker) abortedProducers.delete(producerId);
      } else {
        isAborted = (attributes & transactionalFlag) !== 0 && abortedProducers.has(producerId);
      }
    }
    if (control || isAborted) {
      skipped(baseOffset, lastOffsetOfBatch);
      continue;
    }
    if (lastOffsetOfBatch < fetchOffset) {
      // Wholly before the fetch offset (a fetch from inside the batch before): nothing to read.
      skipped(baseOffset, lastOffsetOfBatch);
      continue;
    }
    let records: Awaited<ReturnType<typeof recordsOf>> | undefined;
    try {
      records = await readOrEnd(() => recordsOf(set, batch, bounded));
    } catch (error) {
      if (!(error instanceof DecompressedSizeError)) throw error;
      // The first batch of the set, too large: the set is it alone.
      covered(baseOffset, lastOffsetOfBatch);
      const oversized = { baseOffset, lastOffset: lastOffsetOfBatch, records: count };
      return {
        ...columnsOf([], fetchOffset),
        firstOffset,
        lastOffset,
        lastOffsetBefore,
        oversized,
      };
    }
    if (records === undefined) break;
    if (records.data !== set) {
      // Memory stays bounded whatever the cut: past it, the batch is read by the next fetch.
      if (lastOffset !== null && decompressed + records.data.length > maxDecompressed) break;
      decompressed += records.data.length;
    }
    const maxTimestamp = Number(set.readBigInt64BE(batch.at + maxTimestampAt));
    delivered.push({ baseOffset, lastOffset: lastOffsetOfBatch, count, maxTimestamp, ...records });
    // Its records at the end may be compacted away: the batch still ends at its last offset.
    covered(baseOffset, lastOffsetOfBatch);
  }

  return mergeBounds(columnsOf(delivered, fetchOffset), firstOffset, lastOffset, lastOffsetBefore);
}

function mergeBounds(
  decoded: DecodedRecordSet,
  skippedFirst: number | null,
  skippedLast: number | null,
  skippedBefore: number | null,
): DecodedRecordSet {
  const min = (a: number | null, b: number | null): number | null =>
    a === null ? b : b === null ? a : Math.min(a, b);
  const max = (a: number | null, b: number | null): number | null =>
    a === null ? b : b === null ? a : Math.max(a, b);
  return {
    ...decoded,
    firstOffset: min(decoded.firstOffset, skippedFirst),
    lastOffset: max(decoded.lastOffset, skippedLast),
    lastOffsetBefore: max(decoded.lastOffsetBefore, skippedBefore),
  };
}

async function recordsOf(
  set: Buffer,
  batch: { at: number; end: number; attributes: number },
  decompress: DecompressWithin,
): Promise<{ data: Buffer; from: number; to: number }> {
  const from = batch.at + recordsAt;
  if ((batch.attributes & compressionMask) === 0) return { data: set, from, to: batch.end };
  const data = await decompress(batch.attributes, set.subarray(from, batch.end));
  return { data, from: 0, to: data.length };
}

/** The type of the control record that makes up a control batch. */
async function controlTypeOf(
  set: Buffer,
  batch: { at: number; end: number; attributes: number },
  decompress: DecompressWithin,
): Promise<number> {
  const { data, from } = await recordsOf(set, batch, decompress);
  const reader = new VarintReader(data);
  reader.at = from;
  reader.varint(); // length
  reader.at += 1; // attributes
  reader.skipVarlong(); // timestamp delta
  reader.varint(); // offset delta
  const keyLength = reader.varint();
  if (keyLength < 4) throw new RecordBatchError('a control record without a key');
  return data.readInt16BE(reader.at + 2);
}

/**
 * The records of the delivered batches as columns. Each batch's record bytes are copied whole into
 * the packed buffer (one copy a batch, not one a value); a value's start points into them.
 */
function columnsOf(batches: readonly BatchInSet[], fetchOffset: number): DecodedRecordSet {
  let capacity = 0;
  let bytes = 0;
  for (const b of batches) {
    capacity += b.count;
    bytes += b.to - b.from;
  }
  const buffer = new ArrayBuffer(capacity * 8 + bytes);
  const header = new Int32Array(buffer, 0, capacity * 2);
  const out = new Uint8Array(buffer, capacity * 8);
  const offsets = new Float64Array(capacity);
  const timestamps = new Float64Array(capacity);
  let n = 0;
  let copied = 0;
  let lastOffsetBefore: number | null = null;
  for (const b of batches) {
    out.set(b.data.subarray(b.from, b.to), copied);
    const shift = copied - b.from;
    copied += b.to - b.from;
    const reader = new VarintReader(b.data);
    reader.at = b.from;
    for (let r = 0; r < b.count; r++) {
      if (reader.at >= b.to)
        throw new RecordBatchError('a record batch holds fewer records than it says');
      const length = reader.varint();
      const recordEnd = reader.at + length;
      reader.at += 1; // attributes
      reader.skipVarlong(); // timestamp delta
      const offset = b.baseOffset + reader.varint();
      const keyLength = reader.varint();
      if (keyLength > 0) reader.at += keyLength;
      const valueLength = reader.varint();
      if (recordEnd > b.to || reader.at + Math.max(0, valueLength) > recordEnd) {
        throw new RecordBatchError('a record runs past the end of its batch');
      }
      if (offset < fetchOffset) lastOffsetBefore = offset;
      else {
        offsets[n] = offset;
        timestamps[n] = b.maxTimestamp;
        header[n] = reader.at + shift;
        header[capacity + n] = valueLength < 0 ? -1 : valueLength;
        n++;
      }
      reader.at = recordEnd;
    }
  }
  if (n < capacity) {
    // The lengths follow the starts: move them up, and the starts along with the bytes' new start.
    header.copyWithin(n, capacity, capacity + n);
    const moved = (capacity - n) * 8;
    for (let i = 0; i < n; i++) header[i] = header[i]! + moved;
  }
  return {
    offsets: n < capacity ? offsets.subarray(0, n) : offsets,
    values: { count: n, buffer },
    timestamps: n < capacity ? timestamps.subarray(0, n) : timestamps,
    firstOffset: n > 0 ? offsets[0]! : null,
    lastOffset: n > 0 ? offsets[n - 1]! : null,
    lastOffsetBefore,
  };
}
