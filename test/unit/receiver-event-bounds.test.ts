// The bounds that keep one record from poisoning a partition: decided from the record and its
// Kafka batch alone (never the wall clock), marked before the segments see the batch, so a
// far-future event is rejected `future_timestamp` and moves no watermark, and the records after it
// count as before.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cubeSchema } from '../../src/api/cube.ts';
import { consumedRecords } from '../../src/kafka/partition-consumer.ts';
import { packValues } from '../../src/kafka/record-values.ts';
import { parseColumns, reasonOf, recordReader } from '../../src/receiver/batch-parser.ts';
import { CubeChannel } from '../../src/receiver/cube-channel.ts';
import {
  defaultMaxDimensionBytes,
  defaultMaxEventTimeSkewMs,
  dimensionTooLong,
  eventTimeFloor,
  markOutOfBoundsTimes,
  maxDimensionBytesOf,
  maxEventTimeSkewOf,
} from '../../src/receiver/event-bounds.ts';
import { rejectReasons } from '../../src/receiver/event.ts';
import {
  type FakePartitionConsumer,
  countsByCountry,
  fakeChannelOptions,
} from '../support/fake-partition-consumer.ts';

const T0 = Date.UTC(2026, 10, 30, 12, 0, 0);
const HOUR = 3_600_000;
const YEAR = 365 * 24 * HOUR;
const code = (reason: string): number => 1 + rejectReasons.indexOf(reason as never);

describe('markOutOfBoundsTimes', () => {
  test.each([
    ['at the batch timestamp', T0, T0, 0],
    ['past it by the skew exactly', T0 + HOUR, T0, 0],
    ['past it by more than the skew', T0 + HOUR + 1, T0, code('future_timestamp')],
    ['ten years past it', T0 + 10 * YEAR, T0, code('future_timestamp')],
    ['long before it (a backfill)', T0 - 5 * YEAR, T0, 0],
    ['on the floor', eventTimeFloor, T0, 0],
    ['before the floor', eventTimeFloor - 1, T0, code('ancient_timestamp')],
    ['seconds for milliseconds', Math.floor(T0 / 1000), T0, code('ancient_timestamp')],
    ['a batch without a timestamp (−1): no future bound', T0 + 10 * YEAR, -1, 0],
    ['before the floor without a timestamp', -1, -1, code('ancient_timestamp')],
  ])('%s', (_name, time, batchTimestamp, expected) => {
    const columns = { count: 1, times: new Float64Array([time]), reasons: new Uint8Array(1) };
    markOutOfBoundsTimes(columns, new Float64Array([batchTimestamp]), HOUR);
    expect(columns.reasons[0]).toBe(expected);
  });

  test('records already rejected keep their reason; no timestamps bound only by the floor', () => {
    const columns = {
      count: 3,
      times: new Float64Array([T0 + 10 * YEAR, 0, T0 + 10 * YEAR]),
      reasons: new Uint8Array([code('bad_json'), code('bad_json'), 0]),
    };
    markOutOfBoundsTimes(columns, undefined, HOUR);
    expect([...columns.reasons].map((c) => (c === 0 ? 'event' : reasonOf(c)))).toEqual([
      'bad_json',
      'bad_json',
      'event',
    ]);
  });

  test('the same batch gives the same decisions whenever it is read', () => {
    const times = new Float64Array([T0, T0 + 2 * HOUR, 1, T0 + 30 * 60_000]);
    const timestamps = new Float64Array([T0, T0, T0, T0]);
    const decide = () => {
      const columns = { count: 4, times, reasons: new Uint8Array(4) };
      markOutOfBoundsTimes(columns, timestamps, HOUR);
      return [...columns.reasons];
    };
    expect(decide()).toEqual(decide());
    expect(decide()).toEqual([0, code('future_timestamp'), code('ancient_timestamp'), 0]);
  });
});

describe('the cube says the bounds', () => {
  const base = { timestampField: 'ts', measures: [{ name: 'n', function: 'count' }], window: '1h' };
  test('defaults when absent, and absent from the parsed schema (the digest of a cube stays as it was)', () => {
    const schema = cubeSchema.parse(base);
    expect(maxEventTimeSkewOf(schema)).toBe(defaultMaxEventTimeSkewMs);
    expect(maxDimensionBytesOf(schema)).toBe(defaultMaxDimensionBytes);
    expect(Object.keys(schema)).not.toContain('maxEventTimeSkew');
  });
  test('as given', () => {
    const schema = cubeSchema.parse({ ...base, maxEventTimeSkew: '5m', maxDimensionBytes: 16 });
    expect(maxEventTimeSkewOf(schema)).toBe(300_000);
    expect(maxDimensionBytesOf(schema)).toBe(16);
  });
  test.each([{ maxEventTimeSkew: 'soon' }, { maxDimensionBytes: 0 }, { maxDimensionBytes: 1.5 }])(
    'refused: %j',
    (bad) => expect(cubeSchema.safeParse({ ...base, ...bad }).success).toBe(false),
  );
});

describe('dimension values', () => {
  test.each([
    ['short', 'de', 4, false],
    ['exactly the bound', 'abcd', 4, false],
    ['one byte over', 'abcde', 4, true],
    ['two-byte characters within', 'éé', 4, false],
    ['two-byte characters over', 'ééé', 4, true],
    ['a four-byte character over', 'a😀', 4, true],
  ])('%s', (_name, text, maxBytes, expected) => {
    expect(dimensionTooLong(text, maxBytes)).toBe(expected);
  });

  test('a record with a value past the bound is dimension_too_long, and no dictionary holds it', () => {
    const schema = cubeSchema.parse({
      timestampField: 'ts',
      dimensions: ['country'],
      measures: [{ name: 'n', function: 'count' }],
      window: '1h',
      maxDimensionBytes: 8,
    });
    const long = 'x'.repeat(9);
    const values = [
      { ts: T0, country: 'de' },
      { ts: T0, country: long },
      { ts: T0, country: long, note: '\\u0041' }, // escaped: read by the full parser
      { ts: T0, country: 'x'.repeat(8) },
    ].map((v) => Buffer.from(JSON.stringify(v)));
    const dictionaries = { strings: new Map<string, number>(), keys: new Map<string, number>() };
    const columns = parseColumns(schema, recordReader(schema), dictionaries, packValues(values));
    expect([...columns.reasons].map((c) => (c === 0 ? 'event' : reasonOf(c)))).toEqual([
      'event',
      'dimension_too_long',
      'dimension_too_long',
      'event',
    ]);
    expect([...dictionaries.strings.keys()]).toEqual(['de', 'x'.repeat(8)]);
  });
});

describe('a far-future record in a partition', () => {
  let dir: string;
  let channel: CubeChannel;
  let consumer: FakePartitionConsumer;

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'streamcube-bounds-'));
    channel = new CubeChannel(
      fakeChannelOptions(dir, countsByCountry('1m', '0s'), (c) => (consumer = c)),
    );
    await channel.open();
    await channel.assign([{ partition: 0, position: '0', epoch: 1, watermark: null }]);
  });
  afterEach(async () => {
    await channel.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Records from `from` with these event times, in one batch whose maxTimestamp is `batchTs`. */
  const deliver = (from: number, times: number[], batchTs: number): void => {
    const records = consumedRecords(
      times.map((ts, i) => ({
        offset: BigInt(from + i),
        value: Buffer.from(JSON.stringify({ ts, country: 'de' })),
      })),
    );
    records.timestamps = new Float64Array(times.length).fill(batchTs);
    consumer.highWatermark.set(0, BigInt(from + times.length));
    void consumer.sink.onRecords(0, records, BigInt(from + times.length));
  };

  test('is rejected future_timestamp, moves no watermark, and the records after it count', () => {
    deliver(0, [T0, T0 + 1000], T0 + 1000);
    deliver(2, [T0 + 10 * YEAR], T0 + 2000);
    deliver(3, [T0 + 2000, T0 + 3000, T0 + 61_000], T0 + 61_000);
    const status = channel.status();
    expect(status.rejected).toEqual({ future_timestamp: 1 });
    expect(status.ingested).toBe(5);
    const p0 = status.partitions.find((p) => p.partition === 0)!;
    expect(p0).toMatchObject({ position: '6', watermark: T0 + 61_000 });
  });

  test('with its batch stamped as far ahead (a broker that allows it), it is not caught here', () => {
    // The bound is the batch's own timestamp: a broker refusing CreateTime far from its clock
    // (log.message.timestamp.after.max.ms, 1h by default since Kafka 4.0) is what keeps it sane.
    deliver(0, [T0 + 10 * YEAR], T0 + 10 * YEAR);
    expect(channel.status().rejected).toEqual({});
  });
});
