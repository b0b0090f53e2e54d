// A PartitionConsumer that stands in for Kafka in unit tests of a CubeChannel: it records what the
// channel asks of it (starts, pauses, resumes, commits, group deletions), fails starts when told
// to, keeps a log end per partition, and delivers the records a test hands it.
import { join } from 'node:path';
import type { Kafka } from 'kafkajs';
import { Registry } from 'prom-client';
import winston from 'winston';
import { type CubeSchema, cubeSchema } from '../../src/api/cube.ts';
import {
  type PartitionConsumer,
  type PartitionSink,
  consumedRecords,
} from '../../src/kafka/partition-consumer.ts';
import type { ChannelOptions } from '../../src/receiver/cube-channel.ts';
import { FilesystemDeepStorage } from '../../src/receiver/deep-storage-filesystem.ts';
import { createReceiverMetrics } from '../../src/receiver/metrics.ts';

export class FakePartitionConsumer implements PartitionConsumer {
  readonly sink: PartitionSink;
  /** Positions of every start, in order. */
  readonly starts: Record<number, string>[] = [];
  readonly paused = new Set<number>();
  /** Positions of every resume, in order. */
  readonly resumes: Record<number, string>[] = [];
  /** The end of each partition's log, as highWatermarks() reports it. */
  readonly highWatermark = new Map<number, bigint>();
  /** Starts still to fail, with `startError`. */
  failingStarts = 0;
  startError = new Error('connect ECONNREFUSED 127.0.0.1:9092');

  constructor(sink: PartitionSink) {
    this.sink = sink;
  }

  start(positions: Map<number, bigint>): Promise<void> {
    this.paused.clear();
    this.starts.push(Object.fromEntries([...positions].map(([p, o]) => [p, o.toString()])));
    for (const p of positions.keys()) if (!this.highWatermark.has(p)) this.highWatermark.set(p, 0n);
    if (this.failingStarts > 0) {
      this.failingStarts -= 1;
      return Promise.reject(this.startError);
    }
    return Promise.resolve();
  }
  pause(partitions: number[]): void {
    for (const p of partitions) this.paused.add(p);
  }
  resume(positions: Map<number, bigint>): void {
    this.resumes.push(Object.fromEntries([...positions].map(([p, o]) => [p, o.toString()])));
    for (const p of positions.keys()) this.paused.delete(p);
  }
  /** Positions of every commit, in order. */
  readonly commits: Record<number, string>[] = [];
  commit(positions: Map<number, bigint>): Promise<void> {
    this.commits.push(Object.fromEntries([...positions].map(([p, o]) => [p, o.toString()])));
    return Promise.resolve();
  }
  highWatermarks(): Promise<Map<number, bigint>> {
    return Promise.resolve(new Map(this.highWatermark));
  }
  stop(): Promise<void> {
    return Promise.resolve();
  }
  /** How many times the channel deleted its consumer group. */
  groupDeletions = 0;
  deleteGroup(): Promise<void> {
    this.groupDeletions += 1;
    return Promise.resolve();
  }

  /**
   * Delivers `count` events to `partition` from offset `from`, event times `firstTs` + i, as a
   * fetch from `fetchOffset` would (a client that jumped to the log start fetched past the
   * position it was given).
   */
  deliver(
    partition: number,
    from: number,
    count: number,
    firstTs: number,
    fetchOffset?: number,
  ): void {
    const values = Array.from({ length: count }, (_, i) =>
      JSON.stringify({ ts: firstTs + i, country: 'de', price: 1 }),
    );
    this.deliverValues(partition, from, values, fetchOffset);
  }

  /** Delivers records of these JSON texts to `partition` from offset `from`. */
  deliverValues(partition: number, from: number, values: string[], fetchOffset?: number): void {
    const records = values.map((text, i) => ({
      offset: BigInt(from + i),
      value: Buffer.from(text),
    }));
    const end = BigInt(from + values.length);
    if ((this.highWatermark.get(partition) ?? 0n) < end) this.highWatermark.set(partition, end);
    const batch = consumedRecords(records);
    if (fetchOffset !== undefined) batch.fetchOffset = fetchOffset;
    void this.sink.onRecords(partition, batch, this.highWatermark.get(partition)!);
  }

  /** Appends one event at the end of the partition's log and delivers it. */
  produce(partition: number, ts: number): void {
    this.deliver(partition, Number(this.highWatermark.get(partition) ?? 0n), 1, ts);
  }
}

/** The schema of the events the fake delivers, counted per country. */
export const countsByCountry = (window: string, allowedLateness: string): CubeSchema =>
  cubeSchema.parse({
    timestampField: 'ts',
    dimensions: ['country'],
    measures: [{ name: 'events', function: 'count' }],
    window,
    allowedLateness,
  });

/**
 * Options of a channel for cube `orders` on receiver `rs-a-0` under `dir`, whose consumer is a
 * FakePartitionConsumer handed to `onConsumer`; no Kafka client is ever used.
 */
export function fakeChannelOptions(
  dir: string,
  schema: CubeSchema,
  onConsumer: (consumer: FakePartitionConsumer) => void,
  overrides: Partial<ChannelOptions> = {},
): ChannelOptions {
  return {
    cube: 'orders',
    spec: {
      source: { brokers: ['127.0.0.1:9'], topic: 'orders', startingOffsets: 'earliest' },
      schema,
    },
    replicaSet: 'rs-a',
    receiverId: 'rs-a-0',
    dataDir: join(dir, 'data'),
    deepStorage: new FilesystemDeepStorage(join(dir, 'deep')),
    kafka: {} as Kafka, // never used: the consumer is the fake
    metrics: createReceiverMetrics(new Registry()),
    logger: winston.createLogger({ silent: true }),
    flushIntervalMs: 1_000,
    idleTimeoutMs: 3_600_000,
    consumerFactory: (sink) => {
      const consumer = new FakePartitionConsumer(sink);
      onConsumer(consumer);
      return consumer;
    },
    ...overrides,
  };
}
