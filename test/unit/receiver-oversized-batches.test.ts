// A record batch too large to decompress, as the receiver takes it from its consumer: its offsets
// are consumed and accounted to the partition's segment as rejected records (batch_too_large, its
// header's count), counted in the status and the metrics, and the records after it are read.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import { consumedRecords } from '../../src/kafka/partition-consumer.ts';
import { CubeChannel } from '../../src/receiver/cube-channel.ts';
import { createReceiverMetrics } from '../../src/receiver/metrics.ts';
import { rejectedToJson } from '../../src/receiver/segments.ts';
import {
  type FakePartitionConsumer,
  countsByCountry,
  fakeChannelOptions,
} from '../support/fake-partition-consumer.ts';

const T0 = Date.UTC(2026, 10, 30, 12, 0, 0);

let dir: string;
let channel: CubeChannel;
let consumer: FakePartitionConsumer;
let registry: Registry;

async function open(position: string): Promise<void> {
  registry = new Registry();
  channel = new CubeChannel(
    fakeChannelOptions(dir, countsByCountry('1h', '0s'), (c) => (consumer = c), {
      metrics: createReceiverMetrics(registry),
    }),
  );
  await channel.open();
  await channel.assign([{ partition: 0, position, epoch: 1, watermark: null }]);
}

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'streamcube-oversized-'));
});
afterEach(async () => {
  await channel.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Events at offsets [from, from + count). */
const deliver = (from: number, count: number): void => {
  const records = consumedRecords(
    Array.from({ length: count }, (_, i) => ({
      offset: BigInt(from + i),
      value: Buffer.from(JSON.stringify({ ts: T0 + i, country: 'de' })),
    })),
  );
  void consumer.sink.onRecords(0, records, 100n);
};

/** The batch [base, last] of `records` records, too large to read, handed over from `first`. */
const oversized = (first: number, base: number, last: number, records: number): void =>
  consumer.sink.onFilteredRange(0, BigInt(first), BigInt(last), 100n, {
    baseOffset: base,
    lastOffset: last,
    records,
  });

const rejectedMetric = async (): Promise<number | undefined> =>
  (await registry.getSingleMetric('streamcube_receiver_events_rejected_total')!.get()).values.find(
    (v) => v.labels.reason === 'batch_too_large',
  )?.value;

test("is rejected batch_too_large with its header's count; its offsets and the records around it tile", async () => {
  await open('0');
  deliver(0, 5);
  oversized(5, 5, 9, 4); // compaction left one offset of the five without a record
  deliver(10, 3);
  const status = channel.status();
  expect(status.rejected).toEqual({ batch_too_large: 4 });
  expect(status.ingested).toBe(8);
  expect(status.partitions[0]).toMatchObject({ position: '13' });
  const [segment, ...others] = [...channel.segments.segments.values()];
  expect(others).toEqual([]);
  expect(segment!.ranges.get(0)).toEqual([{ from: 0n, to: 13n }]);
  expect(rejectedToJson(segment!.rejected!)).toEqual({ '0': { batch_too_large: 4 } });
  expect(await rejectedMetric()).toBe(4);
});

test('first in the partition, it waits for a segment with its count', async () => {
  await open('0');
  oversized(0, 0, 2, 3);
  deliver(3, 2);
  const [segment] = [...channel.segments.segments.values()];
  expect(segment!.ranges.get(0)).toEqual([{ from: 0n, to: 5n }]);
  expect(rejectedToJson(segment!.rejected!)).toEqual({ '0': { batch_too_large: 3 } });
});

test('read from inside it (a stop offset there), only the records from the position count', async () => {
  await open('7');
  oversized(7, 5, 9, 5);
  deliver(10, 1);
  expect(channel.status().rejected).toEqual({ batch_too_large: 3 });
  const [segment] = [...channel.segments.segments.values()];
  expect(segment!.ranges.get(0)).toEqual([{ from: 7n, to: 11n }]);
});
