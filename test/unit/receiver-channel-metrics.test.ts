// A cube's series on a receiver carry its namespace and topic, say how fresh its data is, and go
// away with what they describe: a released partition's series when it leaves the channel, every
// series of a cube when the cube leaves the receiver, and nothing of another cube.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import { CubeChannel } from '../../src/receiver/cube-channel.ts';
import { createReceiverMetrics } from '../../src/receiver/metrics.ts';
import {
  FakePartitionConsumer,
  countsByCountry,
  fakeChannelOptions,
} from '../support/fake-partition-consumer.ts';

const T0 = Date.UTC(2026, 0, 1);
const schema = countsByCountry('1h', '10m');

let dir: string;
let registry: Registry;
let orders: CubeChannel;
let clicks: CubeChannel;
let ordersConsumer: FakePartitionConsumer;
let clicksConsumer: FakePartitionConsumer;

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'streamcube-channel-metrics-'));
  registry = new Registry();
  const metrics = createReceiverMetrics(registry);
  orders = new CubeChannel(
    fakeChannelOptions(dir, schema, (c) => (ordersConsumer = c), {
      metrics,
      namespace: 'shop',
      flushIntervalMs: 3_600_000,
    }),
  );
  clicks = new CubeChannel(
    fakeChannelOptions(dir, schema, (c) => (clicksConsumer = c), {
      metrics,
      cube: 'clicks',
      spec: {
        source: { brokers: ['127.0.0.1:9'], topic: 'clicks-v2', startingOffsets: 'earliest' },
        schema,
      },
      flushIntervalMs: 3_600_000,
    }),
  );
  for (const channel of [orders, clicks]) {
    await channel.open();
    await channel.assign(
      [0, 1, 2].map((partition) => ({ partition, position: '0', epoch: 1, watermark: null })),
    );
  }
  ordersConsumer.deliver(0, 0, 3, T0);
  ordersConsumer.deliver(1, 0, 5, T0 + 60_000);
  clicksConsumer.deliver(0, 0, 2, T0);
  await orders.flush();
  await clicks.flush();
});

afterEach(async () => {
  await orders.close();
  await clicks.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Every series of a metric as `label=value,… → value`, sorted. */
async function series(name: string): Promise<string[]> {
  const values = (await registry.getSingleMetric(name)?.get())?.values ?? [];
  return values
    .filter((v) => !('le' in v.labels))
    .map((v) => {
      const labels = Object.entries(v.labels)
        .map(([k, l]) => `${k}=${l}`)
        .join(',');
      return `${labels} → ${v.value}`;
    })
    .sort();
}

test('per-partition series carry namespace, cube, topic and partition; freshness is the newest event time', async () => {
  expect(await series('streamcube_receiver_partition_position')).toEqual([
    'namespace=,cube=clicks,topic=clicks-v2,partition=0 → 2',
    'namespace=,cube=clicks,topic=clicks-v2,partition=1 → 0',
    'namespace=,cube=clicks,topic=clicks-v2,partition=2 → 0',
    'namespace=shop,cube=orders,topic=orders,partition=0 → 3',
    'namespace=shop,cube=orders,topic=orders,partition=1 → 5',
    'namespace=shop,cube=orders,topic=orders,partition=2 → 0',
  ]);
  expect(await series('streamcube_receiver_newest_event_timestamp_seconds')).toEqual([
    `namespace=,cube=clicks,topic=clicks-v2,partition=0 → ${(T0 + 1) / 1000}`,
    `namespace=shop,cube=orders,topic=orders,partition=0 → ${(T0 + 2) / 1000}`,
    `namespace=shop,cube=orders,topic=orders,partition=1 → ${(T0 + 60_004) / 1000}`,
  ]);
  expect(await series('streamcube_receiver_events_ingested_total')).toEqual([
    'namespace=,cube=clicks → 2',
    'namespace=shop,cube=orders → 8',
  ]);
  // Counters of failures and rejections exist at zero before the first one.
  expect(await series('streamcube_receiver_handoff_failures_total')).toEqual([
    'namespace=,cube=clicks → 0',
    'namespace=shop,cube=orders → 0',
  ]);
  expect(await series('streamcube_receiver_events_rejected_total')).toContain(
    'namespace=shop,cube=orders,reason=too_late → 0',
  );
});

test('a released partition loses its series; the others and other cubes keep theirs', async () => {
  ordersConsumer.highWatermark.set(1, 9n);
  await orders.release([1]);
  for (const name of [
    'streamcube_receiver_partition_position',
    'streamcube_receiver_partition_high_watermark',
    'streamcube_receiver_partition_lag',
    'streamcube_receiver_newest_event_timestamp_seconds',
  ]) {
    const held = await series(name);
    expect(held.filter((s) => s.includes('cube=orders,topic=orders,partition=1 '))).toEqual([]);
    expect(held.some((s) => s.includes('cube=orders,topic=orders,partition=0 '))).toBe(true);
    expect(held.some((s) => s.includes('cube=clicks'))).toBe(true);
  }
  // Assigned again (a later epoch), it is published again.
  await orders.assign([{ partition: 1, position: '5', epoch: 2, watermark: null }]);
  expect(await series('streamcube_receiver_partition_position')).toContain(
    'namespace=shop,cube=orders,topic=orders,partition=1 → 5',
  );
});

test('a cube leaving the receiver removes every series of it, and none of another cube', async () => {
  const before = await registry.metrics();
  expect(before).toContain('cube="orders"');
  await orders.close();
  orders.removeLocalData();
  const after = await registry.metrics();
  expect(after).not.toContain('cube="orders"');
  const clicksLines = (text: string): string[] =>
    text.split('\n').filter((l) => l.includes('cube="clicks"'));
  expect(clicksLines(after)).toEqual(clicksLines(before));
});
