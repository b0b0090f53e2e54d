// Test events with a known ground truth: produced to chosen partitions, and the aggregates they
// must give computed independently of the receiver's code.
import { randomUUID } from 'node:crypto';
import type { Admin, Kafka, Producer } from 'kafkajs';
import type { AssignCubeRequest } from '../../src/protocol/admin-api.ts';
import { waitFor } from './wait.ts';

export interface TestEvent {
  ts: number;
  country: string;
  device: string;
  price: number;
}

export const testSchema = {
  timestampField: 'ts',
  dimensions: ['country', 'device'],
  measures: [
    { name: 'events', function: 'count' as const },
    { name: 'revenue', function: 'sum' as const, field: 'price' },
    { name: 'cheapest', function: 'min' as const, field: 'price' },
    { name: 'dearest', function: 'max' as const, field: 'price' },
  ],
  // Wide enough that test data stays in open windows unless a test seals them or moves time on.
  window: '1h',
  allowedLateness: '5m',
};

const countries = ['de', 'fr', 'jp', 'us'];
const devices = ['ios', 'android', 'web'];

/** Deterministic events: event i of a partition is `step` ms after `start`, prices in cents. */
export function makeEvents(
  partition: number,
  count: number,
  start: number,
  step = 1000,
  salt = 0,
): TestEvent[] {
  return Array.from({ length: count }, (_, i) => {
    const n = i + partition * 7919 + salt * 104729;
    return {
      ts: start + i * step,
      country: countries[n % countries.length]!,
      device: devices[(n >> 2) % devices.length]!,
      price: ((n * 37) % 1000) / 100,
    };
  });
}

export interface Totals {
  events: number;
  revenue: number;
  cheapest: number;
  dearest: number;
}

export function totalsOf(events: TestEvent[]): Totals {
  return {
    events: events.length,
    revenue: events.reduce((a, e) => a + e.price, 0),
    // A fold, not Math.min(...): a 30-minute chaos run's 150,000 events overflow the call stack.
    cheapest: events.reduce((a, e) => Math.min(a, e.price), Infinity),
    dearest: events.reduce((a, e) => Math.max(a, e.price), -Infinity),
  };
}

export function byCountry(
  events: TestEvent[],
): Record<string, { events: number; revenue: number }> {
  const out: Record<string, { events: number; revenue: number }> = {};
  for (const e of events) {
    const g = (out[e.country] ??= { events: 0, revenue: 0 });
    g.events += 1;
    g.revenue += e.price;
  }
  return out;
}

export async function createTopic(admin: Admin, partitions: number): Promise<string> {
  const topic = `events-${randomUUID().slice(0, 8)}`;
  try {
    await admin.createTopics({
      topics: [{ topic, numPartitions: partitions }],
      waitForLeaders: true,
    });
  } catch (error) {
    // Created, but the broker does not host its partitions yet: kafkajs's wait for leaders gives
    // up on this answer (seen on a loaded machine); the wait below covers it.
    if ((error as { type?: string }).type !== 'UNKNOWN_TOPIC_OR_PARTITION') throw error;
  }
  // The controller has leaders when createTopics returns, but the broker may not host the
  // partitions yet: a produce then fails with "This server does not host this topic-partition".
  await waitFor(`topic ${topic} served`, async () => {
    const offsets = await admin.fetchTopicOffsets(topic);
    return offsets.length === partitions || undefined;
  });
  return topic;
}

export async function produce(
  producer: Producer,
  topic: string,
  partition: number,
  values: (TestEvent | string)[],
): Promise<void> {
  for (let i = 0; i < values.length; i += 500) {
    await producer.send({
      topic,
      acks: -1,
      messages: values.slice(i, i + 500).map((v) => ({
        partition,
        value: typeof v === 'string' ? v : JSON.stringify(v),
      })),
    });
  }
}

/**
 * Produces `count` events to each of `partitions` (makeEvents from `start`, `step` ms apart, with
 * `salt`, or the partition's salt); the events, indexed by partition.
 */
export async function produceEach(
  producer: Producer,
  topic: string,
  partitions: number[],
  count: number,
  start: number,
  step = 1000,
  salt: number | ((partition: number) => number) = 0,
): Promise<TestEvent[][]> {
  const events: TestEvent[][] = [];
  for (const p of partitions) {
    events[p] = makeEvents(p, count, start, step, typeof salt === 'number' ? salt : salt(p));
    await produce(producer, topic, p, events[p]);
  }
  return events;
}

export function assignRequest(
  brokers: string,
  topic: string,
  replicaSet: string,
  partitions: { partition: number; position: string; epoch?: number }[],
  schema: AssignCubeRequest['schema'] = testSchema,
): AssignCubeRequest {
  return {
    source: { brokers: [brokers], topic, startingOffsets: 'earliest' },
    schema,
    replicaSet,
    partitions: partitions.map((p) => ({ epoch: 1, watermark: null, ...p })),
  };
}

export async function highWatermarks(kafka: Kafka, topic: string): Promise<Map<number, bigint>> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const offsets = await admin.fetchTopicOffsets(topic);
    return new Map(offsets.map((o) => [o.partition, BigInt(o.high)]));
  } finally {
    await admin.disconnect();
  }
}

/** The test schema with one-minute windows and ten seconds of allowed lateness. */
export const windowedSchema = { ...testSchema, window: '1m', allowedLateness: '10s' };

/** A record that is not a valid event, with the reason the receiver must give for it. */
export interface BadRecord {
  raw: string;
  reason: string;
}

export type ProducedRecord = TestEvent | BadRecord;

export const isBadRecord = (r: ProducedRecord): r is BadRecord => 'raw' in r;

/** One malformed record of each parse failure the receiver distinguishes. */
export function malformedRecords(ts: number): BadRecord[] {
  return [
    { raw: 'not json {', reason: 'bad_json' },
    { raw: JSON.stringify([ts, 'de', 'web', 1]), reason: 'not_an_object' },
    {
      raw: JSON.stringify({ country: 'de', device: 'web', price: 1 }),
      reason: 'missing_timestamp',
    },
    {
      raw: JSON.stringify({ ts: 'yesterday', country: 'de', device: 'web', price: 1 }),
      reason: 'bad_timestamp',
    },
    {
      raw: JSON.stringify({ ts, country: { code: 'de' }, device: 'web', price: 1 }),
      reason: 'bad_dimension',
    },
    {
      raw: JSON.stringify({ ts, country: 'de', device: 'web', price: '1.5' }),
      reason: 'bad_measure',
    },
    { raw: JSON.stringify({ ts, country: 'de', device: 'web' }), reason: 'missing_measure' },
  ];
}

/** A record shaped like a valid event, `fields` over its own, that the receiver rejects by `reason`. */
export function badEvent(reason: string, fields: Record<string, unknown>): BadRecord {
  return { raw: JSON.stringify({ country: 'de', device: 'web', price: 1, ...fields }), reason };
}

const year = 365 * 24 * 3_600_000;

/**
 * One hostile record of each kind a cube's default bounds refuse, for batches written at about
 * `ts`: event times ten years past the batch (more than the hour of `maxEventTimeSkew`), as
 * milliseconds and as ISO-8601; seconds for milliseconds and a date before 2000-01-01; dimension
 * values past `maxDimensionBytes` (4096 bytes).
 */
export function poisonRecords(ts: number): BadRecord[] {
  return [
    badEvent('future_timestamp', { ts: ts + 10 * year }),
    badEvent('future_timestamp', { ts: new Date(ts + 10 * year).toISOString() }),
    badEvent('ancient_timestamp', { ts: Math.floor(ts / 1000) }),
    badEvent('ancient_timestamp', { ts: '1999-12-31T23:59:59Z' }),
    badEvent('dimension_too_long', { ts, country: 'x'.repeat(5000) }),
    badEvent('dimension_too_long', { ts, device: '\u00e9'.repeat(2100) }),
  ];
}

/**
 * A valid event padded with `bytes` spaces: compressed (zstd, lz4, gzip) its batch is a few
 * kilobytes, well within what the broker takes, while its records decompress past a bound below
 * `bytes`.
 */
export function decompressionBomb(ts: number, bytes: number): string {
  return JSON.stringify({ ts, country: 'de', device: 'web', price: 1, pad: ' '.repeat(bytes) });
}

/**
 * Events of one partition spread over several one-minute windows, one second apart, with every
 * 13th event 5 s behind its neighbours (out of order, still within lateness) and every 29th two
 * minutes behind (too late once the partition's event time has moved on).
 */
export function makeWindowedEvents(partition: number, count: number, start: number): TestEvent[] {
  return makeEvents(partition, count, start, 1000, 3).map((e, i) => {
    if (i > 0 && i % 29 === 0) return { ...e, ts: e.ts - 120_000 };
    if (i > 0 && i % 13 === 0) return { ...e, ts: e.ts - 5_000 };
    return e;
  });
}

export async function produceRecords(
  producer: Producer,
  topic: string,
  partition: number,
  records: ProducedRecord[],
  batchSize = 500,
): Promise<void> {
  for (let i = 0; i < records.length; i += batchSize) {
    await producer.send({
      topic,
      acks: -1,
      messages: records.slice(i, i + batchSize).map((r) => ({
        partition,
        value: isBadRecord(r) ? r.raw : JSON.stringify(r),
      })),
    });
  }
}
