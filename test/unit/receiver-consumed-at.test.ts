// When a replica consumed a partition's records, as its status says: `consumedAt` (the last time
// records moved the position) and `firstConsumedAt` (the first time under the epoch). A released
// source's `consumedAt` is when it took its last event and a target's `firstConsumedAt` its first:
// bench:reassign measures a hand-off's gap from the two.
import { jest } from '@jest/globals';
import { CubeChannel } from '../../src/receiver/cube-channel.ts';
import {
  FakePartitionConsumer,
  countsByCountry,
  fakeChannelOptions,
} from '../support/fake-partition-consumer.ts';
import { scratchDirs } from '../support/scratch-dirs.ts';

const T0 = Date.UTC(2026, 11, 6, 12, 0, 0);
const iso = (ms: number) => new Date(ms).toISOString();
const tempDir = scratchDirs();

let channel: CubeChannel;
let consumer: FakePartitionConsumer;

beforeEach(async () => {
  jest.useFakeTimers({ now: T0 });
  channel = new CubeChannel(
    fakeChannelOptions(
      tempDir('streamcube-consumed-at-'),
      countsByCountry('1h', '0s'),
      (c) => (consumer = c),
    ),
  );
  await channel.open();
  await channel.assign([{ partition: 0, position: '0', epoch: 1, watermark: null }]);
});

afterEach(async () => {
  await channel.close();
  jest.useRealTimers();
});

const partition0 = () => channel.status().partitions.find((p) => p.partition === 0)!;

test('absent until records move the position; then the first and the latest time they did', () => {
  expect(partition0().consumedAt).toBeUndefined();
  expect(partition0().firstConsumedAt).toBeUndefined();
  jest.setSystemTime(T0 + 1_000);
  consumer.deliver(0, 0, 5, T0);
  expect(partition0()).toMatchObject({
    position: '5',
    consumedAt: iso(T0 + 1_000),
    firstConsumedAt: iso(T0 + 1_000),
  });
  jest.setSystemTime(T0 + 2_000);
  consumer.deliver(0, 5, 3, T0);
  expect(partition0()).toMatchObject({
    position: '8',
    consumedAt: iso(T0 + 2_000),
    firstConsumedAt: iso(T0 + 1_000),
  });
});

test('records that do not move the position (read before) leave both as they were', () => {
  jest.setSystemTime(T0 + 1_000);
  consumer.deliver(0, 0, 5, T0);
  jest.setSystemTime(T0 + 2_000);
  consumer.deliver(0, 0, 5, T0);
  expect(partition0()).toMatchObject({ position: '5', consumedAt: iso(T0 + 1_000) });
});

test("a released source keeps the time of its last event; a new epoch's first event starts anew", async () => {
  jest.setSystemTime(T0 + 1_000);
  consumer.deliver(0, 0, 5, T0);
  jest.setSystemTime(T0 + 3_000);
  const [released] = await channel.release([0], { 0: '5' });
  expect(released).toMatchObject({ state: 'released', consumedAt: iso(T0 + 1_000) });

  // Taken again under the next epoch (the partition came back): the first event of that epoch.
  await channel.assign([{ partition: 0, position: '9', epoch: 2, watermark: null }]);
  expect(partition0().firstConsumedAt).toBeUndefined();
  jest.setSystemTime(T0 + 4_000);
  consumer.deliver(0, 9, 2, T0);
  expect(partition0()).toMatchObject({
    epoch: 2,
    position: '11',
    consumedAt: iso(T0 + 4_000),
    firstConsumedAt: iso(T0 + 4_000),
  });
});

test('a drain that reaches its stop offset: consumedAt is when it took the last event', async () => {
  await channel.pause([0]);
  const drained = channel.drain({ 0: '4' }, 10_000);
  await jest.advanceTimersByTimeAsync(0);
  jest.setSystemTime(T0 + 500);
  consumer.deliver(0, 0, 6, T0);
  expect((await drained).partitions[0]).toMatchObject({
    state: 'stopped',
    position: '4',
    consumedAt: iso(T0 + 500),
  });
});
