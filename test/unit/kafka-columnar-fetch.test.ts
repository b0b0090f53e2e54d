// The columnar Fetch decoder against kafkajs's own: fetch responses built from record batches
// that kafkajs's encoder writes (every codec, transactions committed and aborted, control batches,
// a fetch offset inside a batch, a set cut off by the fetch's size limit), decoded both ways:
// kafkajs's Batch (what the receivers' kafkajs consumers read before the fetch session) must hand
// out the same records and move to the same offsets as the session does with the columns.
import { createRequire } from 'node:module';
import fc from 'fast-check';
import { registerCodecs } from '../../src/kafka/codecs.ts';
import {
  type FetchedTopic,
  columnarRackId,
  decodeFetchResponse,
  installColumnarFetch,
  kafkajsInternals,
  kafkajsVersion,
  sessionRackId,
} from '../../src/kafka/columnar-fetch.ts';
import type { DecodedRecordSet } from '../../src/kafka/record-batches.ts';
import { packedValue } from '../../src/kafka/record-values.ts';

const require = createRequire(import.meta.url);

interface Encoder {
  buffer: Buffer;
  writeInt8(v: number): Encoder;
  writeInt16(v: number): Encoder;
  writeInt32(v: number): Encoder;
  writeInt64(v: number | string): Encoder;
  writeString(v: string): Encoder;
  writeBytes(v: Buffer): Encoder;
}
interface KafkaBatch {
  messages: { offset: string; value: Buffer | null }[];
  firstOffset(): string | null;
  lastOffset(): string;
  isEmpty(): boolean;
  isEmptyDueToFiltering(): boolean;
}
const EncoderClass = require('kafkajs/src/protocol/encoder.js') as new () => Encoder;
const { RecordBatch } = require('kafkajs/src/protocol/recordBatch/v0/index.js') as {
  RecordBatch: (options: {
    compression: number;
    firstOffset: string;
    lastOffsetDelta: number;
    transactional: boolean;
    producerId: string;
    records: unknown[];
  }) => Promise<Encoder>;
};
const Record = require('kafkajs/src/protocol/recordBatch/record/v0/index.js') as (r: {
  offsetDelta: number;
  key: Buffer | null;
  value: Buffer | null;
}) => unknown;
const v11 = require('kafkajs/src/protocol/requests/fetch/v11/response.js') as {
  decode(raw: Buffer): Promise<{ responses: { partitions: PartitionData[] }[] }>;
};
type PartitionData = { messages: unknown[] } & Record<string, unknown>;
const Batch = require('kafkajs/src/consumer/batch.js') as new (
  topic: string,
  fetchedOffset: string,
  partition: PartitionData,
) => KafkaBatch;

registerCodecs();

const codecs = [0, 1, 2, 3, 4]; // none, gzip, snappy, lz4, zstd

/** A batch of the log: data (in a transaction or not) or a transaction's control marker. */
type LogBatch =
  | { kind: 'data'; producer: number; transactional: boolean; values: (string | null)[] }
  | { kind: 'marker'; producer: number; abort: boolean };

interface Log {
  sets: Buffer;
  /** Aborted transactions: first offset and the offset of the ABORT marker. */
  aborted: { producerId: number; firstOffset: number; lastOffset: number }[];
  end: number;
}

/** The log's batches encoded as kafkajs's producer writes them, and its aborted transactions. */
async function encodeLog(batches: LogBatch[], codec: number): Promise<Log> {
  const parts: Buffer[] = [];
  const aborted: Log['aborted'] = [];
  const open = new Map<number, number>(); // producer → first offset of its open transaction
  let offset = 0;
  for (const b of batches) {
    if (b.kind === 'data') {
      if (b.transactional && !open.has(b.producer)) open.set(b.producer, offset);
      const records = b.values.map((v, i) =>
        Record({ offsetDelta: i, key: null, value: v === null ? null : Buffer.from(v) }),
      );
      const encoded = await RecordBatch({
        compression: codec,
        firstOffset: String(offset),
        lastOffsetDelta: b.values.length - 1,
        transactional: b.transactional,
        producerId: b.transactional ? String(b.producer) : '-1',
        records,
      });
      parts.push(encoded.buffer);
      offset += b.values.length;
    } else {
      const first = open.get(b.producer);
      if (first !== undefined && b.abort) {
        aborted.push({ producerId: b.producer, firstOffset: first, lastOffset: offset });
      }
      open.delete(b.producer);
      // Control records: key version 0 and type (0 abort, 1 commit); value version, epoch.
      const key = Buffer.from([0, 0, 0, b.abort ? 0 : 1]);
      const value = Buffer.from([0, 0, 0, 0, 0, 0]);
      const encoded = await RecordBatch({
        compression: 0,
        firstOffset: String(offset),
        lastOffsetDelta: 0,
        transactional: true,
        producerId: String(b.producer),
        records: [Record({ offsetDelta: 0, key, value })],
      });
      const buffer = Buffer.from(encoded.buffer);
      buffer[22] = buffer[22]! | 0x20; // the control flag, which kafkajs's encoder never sets
      parts.push(buffer);
      offset += 1;
    }
  }
  return { sets: Buffer.concat(parts), aborted, end: offset };
}

/**
 * A Fetch v11 response for one partition of topic `t`, listing the aborted transactions as the
 * broker does: those not over before the fetch offset.
 */
function fetchResponse(log: Log, fetchOffset: number, setBytes: number): Buffer {
  const aborted = log.aborted.filter((a) => a.lastOffset >= fetchOffset);
  const e = new EncoderClass()
    .writeInt32(0) // throttle
    .writeInt16(0) // error
    .writeInt32(0) // session
    .writeInt32(1) // topics
    .writeString('t')
    .writeInt32(1) // partitions
    .writeInt32(0) // partition
    .writeInt16(0) // error
    .writeInt64(log.end) // high watermark
    .writeInt64(log.end) // last stable offset
    .writeInt64(0) // log start
    .writeInt32(aborted.length);
  for (const a of aborted) e.writeInt64(a.producerId).writeInt64(a.firstOffset);
  e.writeInt32(-1); // preferred read replica
  e.writeBytes(log.sets.subarray(0, setBytes));
  return e.buffer;
}

/**
 * What kafkajs's consumer made of a partition's data (the receivers' consumers before the fetch
 * session): the records of its Batch, and the offset it moved on to (past the batch's last
 * offset, filtered records included, once it covered any offset at or past the fetch offset).
 */
function kafkajsReads(batch: KafkaBatch, fetchOffset: number) {
  const first = batch.firstOffset();
  return {
    records: batch.messages.map((m) => ({ offset: m.offset, value: m.value?.toString() ?? null })),
    next: first === null ? fetchOffset : Number(batch.lastOffset()) + 1,
  };
}

/** The same as the fetch session reads it (fetch-session.ts, `answered`). */
function sessionReads(decoded: DecodedRecordSet | Error, fetchOffset: number) {
  if (decoded instanceof Error) throw decoded;
  return {
    records: [...decoded.offsets].map((offset, i) => ({
      offset: String(offset),
      value: packedValue(decoded.values, i)?.toString() ?? null,
    })),
    next:
      decoded.firstOffset === null || decoded.lastOffset === null
        ? fetchOffset
        : decoded.lastOffset + 1,
  };
}

async function both(log: Log, fetchOffset: number, setBytes = log.sets.length) {
  const raw = fetchResponse(log, fetchOffset, setBytes);
  const theirs = (await v11.decode(raw)).responses[0]!.partitions[0]!;
  const ours = await decodeFetchResponse(
    raw,
    11,
    new Map([[`0:t`, fetchOffset]]),
    kafkajsInternals(),
  );
  const mine = ours.responses[0]!.partitions[0]!;
  return {
    theirs: kafkajsReads(new Batch('t', String(fetchOffset), theirs), fetchOffset),
    ours: sessionReads(mine.decoded, fetchOffset),
    header: {
      theirs: {
        errorCode: theirs.errorCode,
        highWatermark: BigInt(theirs.highWatermark as string),
        lastStableOffset: BigInt(theirs.lastStableOffset as string),
        logStartOffset: BigInt(theirs.lastStartOffset as string),
      },
      ours: {
        errorCode: mine.errorCode,
        highWatermark: mine.highWatermark,
        lastStableOffset: mine.lastStableOffset,
        logStartOffset: mine.logStartOffset,
      },
    },
  };
}

const event = (i: number): string => JSON.stringify({ ts: 1_700_000_000_000 + i, country: 'de' });
const data = (producer: number, transactional: boolean, n: number, from: number): LogBatch => ({
  kind: 'data',
  producer,
  transactional,
  values: Array.from({ length: n }, (_, i) => (i % 7 === 3 ? null : event(from + i))),
});

const logs: [string, LogBatch[]][] = [
  ['plain batches', [data(1, false, 5, 0), data(1, false, 3, 5), data(1, false, 1, 8)]],
  [
    'a committed and an aborted transaction',
    [
      data(7, true, 4, 0),
      { kind: 'marker', producer: 7, abort: false },
      data(7, true, 3, 10),
      data(7, true, 2, 20),
      { kind: 'marker', producer: 7, abort: true },
      data(1, false, 2, 30),
    ],
  ],
  [
    'interleaved producers, one aborting',
    [
      data(7, true, 2, 0),
      data(8, true, 3, 10),
      data(7, true, 2, 20),
      { kind: 'marker', producer: 8, abort: true },
      data(9, false, 2, 30),
      { kind: 'marker', producer: 7, abort: false },
    ],
  ],
  [
    'a log that ends with an abort marker',
    [data(7, true, 3, 0), { kind: 'marker', producer: 7, abort: true }],
  ],
];

describe.each(codecs)('codec %i', (codec) => {
  test.each(logs)('%s: every fetch offset reads as kafkajs reads it', async (_, batches) => {
    const log = await encodeLog(batches, codec);
    for (let fetchOffset = 0; fetchOffset <= log.end; fetchOffset++) {
      const { theirs, ours, header } = await both(log, fetchOffset);
      expect(ours).toEqual(theirs);
      expect(header.ours).toEqual(header.theirs);
    }
  });
});

test('a set cut off inside a batch reads its whole batches only, as kafkajs does', async () => {
  const log = await encodeLog(
    [data(1, false, 5, 0), data(1, false, 5, 5), data(1, false, 5, 10)],
    0,
  );
  // From the magic byte of the first batch on: kafkajs reads it even from a shorter set, and fails.
  for (let bytes = 17; bytes <= log.sets.length; bytes += 7) {
    const { theirs, ours } = await both(log, 0, bytes);
    expect(ours).toEqual(theirs);
  }
});

/** A compacted batch: offsets `from` to `from + span - 1`, records left at `kept` (deltas). */
async function compacted(from: number, span: number, kept: number[]): Promise<Buffer> {
  const encoded = await RecordBatch({
    compression: 0,
    firstOffset: String(from),
    lastOffsetDelta: span - 1,
    transactional: false,
    producerId: '-1',
    records: kept.map((d) =>
      Record({ offsetDelta: d, key: null, value: Buffer.from(event(from + d)) }),
    ),
  });
  return encoded.buffer;
}

test("a compacted log's batches end at their last offset, however few records are left in them, and an emptied batch counts its offsets", async () => {
  // Offsets 0-9 with records left at 0, 1 and 5; 10-14 emptied (kept for its producer state);
  // 15-17 with a record at 17 only.
  const sets = [
    await compacted(0, 10, [0, 1, 5]),
    await compacted(10, 5, []),
    await compacted(15, 3, [2]),
  ];
  const reads = async (parts: Buffer[], end: number, fetchOffset: number) => {
    const raw = fetchResponse(
      { sets: Buffer.concat(parts), aborted: [], end },
      fetchOffset,
      Buffer.concat(parts).length,
    );
    const ours = await decodeFetchResponse(
      raw,
      11,
      new Map([[`0:t`, fetchOffset]]),
      kafkajsInternals(),
    );
    const decoded = ours.responses[0]!.partitions[0]!.decoded;
    if (decoded instanceof Error) throw decoded;
    return { ...sessionReads(decoded, fetchOffset), first: decoded.firstOffset };
  };
  const offsets = (list: number[]) => list.map((o) => String(o));
  const whole = await reads(sets, 18, 0);
  expect(whole.records.map((r) => r.offset)).toEqual(offsets([0, 1, 5, 17]));
  expect(whole.next).toBe(18);
  // From past the first batch's last record: on to the end all the same.
  const past = await reads(sets, 18, 6);
  expect(past.records.map((r) => r.offset)).toEqual(offsets([17]));
  expect(past.next).toBe(18);
  // Nothing left at or past the fetch offset (the log's tail compacted away, the broker answering
  // at once): the set still moves the reader past its last offset, not round and round at 6.
  const tail = await reads(sets.slice(0, 2), 15, 6);
  expect(tail.records).toEqual([]);
  expect(tail).toMatchObject({ first: 6, next: 15 });
  const emptied = await reads(sets.slice(1, 2), 15, 10);
  expect(emptied).toMatchObject({ records: [], first: 10, next: 15 });
});

test('an answer whose record set runs past its end is refused whole, not read on from a wrong place', async () => {
  const log = await encodeLog([data(1, false, 5, 0)], 0);
  const raw = fetchResponse(log, 0, log.sets.length);
  await expect(
    decodeFetchResponse(
      raw.subarray(0, raw.length - 3),
      11,
      new Map([[`0:t`, 0]]),
      kafkajsInternals(),
    ),
  ).rejects.toThrow(
    /partition 0 of t: the fetch answer's record set of \d+ bytes runs past its end/,
  );
});

test('random logs read as kafkajs reads them', async () => {
  // kafkajs steps into at most one aborted transaction per record, so its reading is the truth
  // only for transactions that do not overlap: interleaving is left to the tables above and to
  // the receiver-transactions suite (Kafka's own producer against a real broker).
  const step = fc.oneof(
    fc.record({ n: fc.integer({ min: 1, max: 6 }), txn: fc.constant(false) }),
    fc.record({ n: fc.integer({ min: 1, max: 6 }), txn: fc.constant(true), abort: fc.boolean() }),
  );
  await fc.assert(
    fc.asyncProperty(
      fc.array(step, { minLength: 1, maxLength: 8 }),
      fc.constantFrom(...codecs),
      fc.nat(),
      async (steps, codec, seed) => {
        const batches: LogBatch[] = [];
        steps.forEach((s, i) => {
          batches.push(data(i + 1, s.txn, s.n, i * 10));
          if ('abort' in s) batches.push({ kind: 'marker', producer: i + 1, abort: s.abort });
        });
        const log = await encodeLog(batches, codec);
        const fetchOffset = seed % (log.end + 1);
        const { theirs, ours } = await both(log, fetchOffset);
        expect(ours).toEqual(theirs);
      },
    ),
    { numRuns: 60 },
  );
});

test('kafkajs is the version whose internals columnar-fetch.ts reads', () => {
  expect(kafkajsInternals().version).toBe(kafkajsVersion);
  expect(() => installColumnarFetch()).not.toThrow();
  expect(columnarRackId).not.toBe('');
});

test("a session fetch is decoded here, keeps a partition's error to that partition, and the broker never sees the marker", async () => {
  installColumnarFetch();
  const { fetch } = kafkajsInternals();
  const build = fetch.protocol({ version: 11 });
  const args = {
    replicaId: -1,
    isolationLevel: 1,
    maxWaitTime: 500,
    minBytes: 1,
    maxBytes: 1_048_576,
    topics: [{ topic: 't', partitions: [{ partition: 0, fetchOffset: '3', maxBytes: 1_048_576 }] }],
    rackId: sessionRackId,
  };
  const request = build(args);
  const log = await encodeLog([data(1, false, 5, 0)], 0);
  const raw = fetchResponse(log, 3, log.sets.length);
  raw.writeInt16BE(1, 4 + 2 + 4 + 4 + 2 + 1 + 4 + 4); // the partition's error: OFFSET_OUT_OF_RANGE
  const response = (await request.response.parse(await request.response.decode(raw))) as {
    responses: FetchedTopic[];
  };
  expect(response.responses[0]!.partitions[0]!.errorCode).toBe(1);
  // The rack the request carries to the broker is kafkajs's default, not the marker.
  const plain = build({ ...args, rackId: '' });
  const encoded = async (r: { request: unknown }) =>
    (await (r.request as { encode(): Promise<{ buffer: Buffer }> }).encode()).buffer;
  expect(await encoded(request)).toEqual(await encoded(plain));
});
