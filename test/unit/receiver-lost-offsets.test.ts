// Offsets Kafka deleted before a receiver read them: a fetch from past the partition's position
// (the client's jump to the log start) records [position, fetch offset) as lost — counted,
// reported in the partition's status, checkpointed — and no segment covers it, while a gap the
// fetch read over (transaction markers, compaction) stays consumed.
import { jest } from '@jest/globals';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import { maxListedLostRanges } from '../../src/protocol/admin-api.ts';
import { CubeChannel } from '../../src/receiver/cube-channel.ts';
import type { HandOffManifest } from '../../src/receiver/hand-off.ts';
import { LostOffsets } from '../../src/receiver/lost-offsets.ts';
import { createReceiverMetrics } from '../../src/receiver/metrics.ts';
import {
  FakePartitionConsumer,
  countsByCountry,
  fakeChannelOptions,
} from '../support/fake-partition-consumer.ts';

const T0 = Date.UTC(2026, 10, 30, 12, 0, 0);
const schema = countsByCountry('1h', '0s');

let dir: string;
let registry: Registry;
let channel: CubeChannel;
let consumer: FakePartitionConsumer;

async function openChannel(): Promise<void> {
  registry = new Registry();
  channel = new CubeChannel(
    fakeChannelOptions(dir, schema, (c) => (consumer = c), {
      metrics: createReceiverMetrics(registry),
    }),
  );
  await channel.open();
}

beforeEach(async () => {
  jest.useFakeTimers({ now: T0 });
  dir = mkdtempSync(join(tmpdir(), 'streamcube-lost-'));
  await openChannel();
  await channel.assign([{ partition: 0, position: '0', epoch: 1, watermark: null }]);
});

afterEach(async () => {
  await channel.close();
  jest.useRealTimers();
  rmSync(dir, { recursive: true, force: true });
});

const partition0 = () => channel.status().partitions.find((p) => p.partition === 0)!;
const ranges0 = () => channel.status().segments.flatMap((s) => s.offsetRanges['0'] ?? []);
async function lostCounter(): Promise<number | undefined> {
  const metric = await registry.getSingleMetric('streamcube_receiver_offsets_lost_total')!.get();
  return metric.values.find((v) => v.labels.partition === '0')?.value;
}

test('a fetch from past the position: the offsets between are lost, not consumed', async () => {
  consumer.deliver(0, 0, 5, T0);
  expect(partition0().lostOffsets).toBeUndefined();
  consumer.deliver(0, 20, 5, T0 + 5, 20);
  expect(partition0()).toMatchObject({
    position: '25',
    lostOffsets: '15',
    lostRanges: [['5', '20']],
  });
  expect(ranges0()).toEqual([
    ['0', '5'],
    ['20', '25'],
  ]);
  // The segment that reading went on in names the range: with its offsets they tile the log.
  expect(channel.status().segments.map((s) => s.lostRanges)).toEqual([{ '0': [['5', '20']] }]);
  expect(await lostCounter()).toBe(15);
});

test('a gap the fetch read over (markers, compaction) is consumed, not lost', async () => {
  consumer.deliver(0, 0, 5, T0, 0);
  consumer.deliver(0, 8, 2, T0 + 5, 5);
  expect(partition0()).toMatchObject({ position: '10' });
  expect(partition0().lostOffsets).toBeUndefined();
  expect(ranges0()).toEqual([['0', '10']]);
  expect(channel.status().segments[0]!.lostRanges).toBeUndefined();
  expect(await lostCounter()).toBe(0);
});

test('a draining partition loses offsets up to its stop offset only', async () => {
  consumer.deliver(0, 0, 5, T0);
  const drained = channel.drain({ '0': '12' }, 5_000);
  consumer.deliver(0, 30, 5, T0 + 5, 30);
  await jest.advanceTimersByTimeAsync(300);
  const answer = await drained;
  expect(answer.done).toBe(true);
  expect(answer.partitions[0]).toMatchObject({ position: '12', lostRanges: [['5', '12']] });
});

test('lost offsets survive a restart (checkpointed)', async () => {
  consumer.deliver(0, 0, 5, T0);
  consumer.deliver(0, 100, 1, T0 + 5, 100);
  await channel.close();
  await openChannel();
  expect(partition0()).toMatchObject({
    position: '101',
    lostOffsets: '95',
    lostRanges: [['5', '100']],
  });
});

test('a sealed segment hands off with the lost ranges before its own in its manifest', async () => {
  consumer.deliver(0, 0, 5, T0);
  consumer.deliver(0, 40, 5, T0 + 5, 40);
  await channel.seal(5_000);
  const [handOff] = channel.status().segments;
  expect(handOff).toMatchObject({ state: 'HANDED_OFF', lostRanges: { '0': [['5', '40']] } });
  const manifest = JSON.parse(
    readFileSync(join(handOff!.handOff!.path!, 'manifest.json'), 'utf8'),
  ) as HandOffManifest;
  expect(manifest.offsetRanges).toEqual({
    '0': [
      ['0', '5'],
      ['40', '45'],
    ],
  });
  expect(manifest.lostRanges).toEqual({ '0': [['5', '40']] });
});

test('the status lists the latest ranges; the total counts every one', () => {
  const lost = new LostOffsets();
  for (let i = 0; i < maxListedLostRanges + 2; i++)
    lost.record(3, BigInt(i * 10), BigInt(i * 10 + 4));
  lost.record(3, 200n, 200n); // empty: nothing
  lost.record(3, 200n, 210n);
  lost.record(3, 210n, 215n); // touching the last: one range
  const json = lost.of(3)!;
  expect(json.total).toBe(String((maxListedLostRanges + 2) * 4 + 15));
  expect(json.ranges).toHaveLength(maxListedLostRanges);
  expect(json.ranges.at(-1)).toEqual(['200', '215']);
  expect(json.ranges[0]).toEqual(['30', '34']);
  expect(lost.of(4)).toBeUndefined();
});
