// The idle rule of DESIGN §6 on a whole CubeChannel, with a fake PartitionConsumer and a fake
// clock: a partition is idle only after silence, never because it is caught up. A steady trickle
// into a caught-up partition must not seal the window it writes to (the `local` demo once lost most
// of its events that way); a silent partition must not hold windows open for ever.
import { jest } from '@jest/globals';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CubeChannel } from '../../src/receiver/cube-channel.ts';
import {
  FakePartitionConsumer,
  countsByCountry,
  fakeChannelOptions,
} from '../support/fake-partition-consumer.ts';

const SECOND = 1_000;
const T0 = Date.UTC(2026, 10, 30, 12, 0, 0);
const schema = countsByCountry('1m', '10s');

let dir: string;
let channel: CubeChannel;
let consumer: FakePartitionConsumer;

beforeEach(async () => {
  jest.useFakeTimers({ now: T0 });
  dir = mkdtempSync(join(tmpdir(), 'streamcube-idle-'));
  channel = new CubeChannel(
    fakeChannelOptions(dir, schema, (c) => (consumer = c), {
      flushIntervalMs: SECOND,
      idleTimeoutMs: 30 * SECOND,
    }),
  );
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

test('a consumer that is down makes no partition idle: the window stays open through the outage', async () => {
  consumer.produce(0, T0);
  consumer.produce(1, T0);
  consumer.sink.onCrash(new Error('broker gone'));
  consumer.failingStarts = 100; // every restart fails: the consumer stays down
  await jest.advanceTimersByTimeAsync(90 * SECOND);
  expect(stateOf(T0)).toBe('ACTIVE');
  expect(channel.status().consumer.state).toBe('failed');
});
