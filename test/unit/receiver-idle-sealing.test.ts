// The idle rule of DESIGN §6 on a whole CubeChannel, with a fake PartitionConsumer and a fake
// clock: a partition is idle only after silence, never because it is caught up. A steady trickle
// into a caught-up partition must not seal the window it writes to (the `local` demo once lost most
// of its events that way); a silent partition must not hold windows open for ever.
import { jest } from '@jest/globals';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Kafka } from 'kafkajs';
import { Registry } from 'prom-client';
import winston from 'winston';
import { cubeSchema } from '../../src/api/cube.ts';
import { type PartitionConsumer, consumedRecords } from '../../src/kafka/partition-consumer.ts';
import { CubeChannel } from '../../src/receiver/cube-channel.ts';
import { createReceiverMetrics } from '../../src/receiver/metrics.ts';

type Sink = Parameters<
  NonNullable<ConstructorParameters<typeof CubeChannel>[0]['consumerFactory']>
>[0];

/** Delivers what the test hands it and reports the high watermark the test sets. */
class FakeConsumer implements PartitionConsumer {
  readonly highWatermark = new Map<number, bigint>();
  readonly sink: Sink;
  constructor(sink: Sink) {
    this.sink = sink;
  }
  start(positions: Map<number, bigint>): Promise<void> {
    for (const p of positions.keys()) if (!this.highWatermark.has(p)) this.highWatermark.set(p, 0n);
    return Promise.resolve();
  }
  pause(): void {}
  resume(): void {}
  commit(): Promise<void> {
    return Promise.resolve();
  }
  highWatermarks(): Promise<Map<number, bigint>> {
    return Promise.resolve(new Map(this.highWatermark));
  }
  stop(): Promise<void> {
    return Promise.resolve();
  }
  /** Appends one event at the end of the partition's log and delivers it. */
  produce(partition: number, ts: number): void {
    const offset = this.highWatermark.get(partition) ?? 0n;
    this.highWatermark.set(partition, offset + 1n);
    const record = { offset, value: Buffer.from(JSON.stringify({ ts, country: 'de', price: 1 })) };
    void this.sink.onRecords(partition, consumedRecords([record]), offset + 1n);
  }
}

const SECOND = 1_000;
const T0 = Date.UTC(2026, 10, 30, 12, 0, 0);
const schema = cubeSchema.parse({
  timestampField: 'ts',
  dimensions: ['country'],
  measures: [{ name: 'events', function: 'count' }],
  window: '1m',
  allowedLateness: '10s',
});

let dir: string;
let channel: CubeChannel;
let consumer: FakeConsumer;

beforeEach(async () => {
  jest.useFakeTimers({ now: T0 });
  dir = mkdtempSync(join(tmpdir(), 'streamcube-idle-'));
  channel = new CubeChannel({
    cube: 'orders',
    spec: {
      source: { brokers: ['127.0.0.1:1'], topic: 'orders', startingOffsets: 'earliest' },
      schema,
    },
    replicaSet: 'rs-a',
    receiverId: 'r-0',
    dataDir: join(dir, 'data'),
    deepStorageDir: join(dir, 'deep'),
    kafka: {} as Kafka, // never used: the consumer is the fake
    metrics: createReceiverMetrics(new Registry()),
    logger: winston.createLogger({ silent: true }),
    flushIntervalMs: SECOND,
    idleTimeoutMs: 30 * SECOND,
    consumerFactory: (sink) => (consumer = new FakeConsumer(sink)),
  });
  await channel.open();
  await channel.assign([
    { partition: 0, position: '0', epoch: 1, watermark: null },
    { partition: 1, position: '0', epoch: 1, watermark: null },
  ]);
});

afterEach(async () => {
  await channel.close();
  jest.useRealTimers();
  rmSync(dir, { recursive: true, force: true });
});

const stateOf = (windowStart: number): string | undefined =>
  channel.status().segments.find((s) => s.windowStart === windowStart)?.state;

test('a caught-up partition under a steady trickle is not idle: its window stays open', async () => {
  // Partition 0 trickles one event every 5 s with event time = now; partition 1 too, so both
  // stay caught up (position = high watermark) for the whole minute.
  for (let t = 0; t < 55; t += 5) {
    consumer.produce(0, T0 + t * SECOND);
    consumer.produce(1, T0 + t * SECOND);
    await jest.advanceTimersByTimeAsync(5 * SECOND);
  }
  expect(stateOf(T0)).toBe('ACTIVE');
  expect(channel.status().rejected).toEqual({});
});

test('a window seals by event time once every partition has passed its end plus lateness', async () => {
  for (let t = 0; t <= 75; t += 5) {
    consumer.produce(0, T0 + t * SECOND);
    consumer.produce(1, T0 + t * SECOND);
    await jest.advanceTimersByTimeAsync(5 * SECOND);
  }
  // Watermarks at T0 + 75 s ≥ window end (60 s) + lateness (10 s).
  expect(stateOf(T0)).not.toBe('ACTIVE');
  expect(stateOf(T0 + 60 * SECOND)).toBe('ACTIVE');
});

test('a silent partition becomes idle after the timeout and no longer holds windows open', async () => {
  // Partition 1 never receives a record; partition 0 moves past the first window.
  for (let t = 0; t <= 75; t += 5) {
    consumer.produce(0, T0 + t * SECOND);
    await jest.advanceTimersByTimeAsync(5 * SECOND);
    if (t < 25) expect(stateOf(T0)).toBe('ACTIVE'); // partition 1 silent for < 30 s
  }
  expect(stateOf(T0)).not.toBe('ACTIVE');
});

test('a partition behind its high watermark is never idle, however long it is silent', async () => {
  consumer.produce(0, T0);
  consumer.highWatermark.set(1, 5n); // records exist that the consumer has not delivered
  for (let t = 0; t <= 120; t += 5) {
    consumer.produce(0, T0 + t * SECOND);
    await jest.advanceTimersByTimeAsync(5 * SECOND);
  }
  expect(stateOf(T0)).toBe('ACTIVE');
});
