// The hand-off scheduler with deep storage that fails: the segment stays IMMUTABLE, each failure
// is counted and reported with the time of the next attempt, attempts back off (1 s doubling to
// the maximum), and once storage works again the segment is handed off and the report says where.
// A pass hands off a few segments at once; more than 100 sealed segments not tried yet make
// hand-offs behind, and ingest waits for them.
import { Registry } from 'prom-client';
import winston from 'winston';
import { cubeSchema } from '../../src/api/cube.ts';
import { ChannelMetrics } from '../../src/receiver/channel-metrics.ts';
import type { DeepStorage } from '../../src/receiver/deep-storage.ts';
import { HandOffScheduler } from '../../src/receiver/hand-off-scheduler.ts';
import { createReceiverMetrics } from '../../src/receiver/metrics.ts';
import { SegmentManager } from '../../src/receiver/segments.ts';
import { MemoryDeepStorage } from '../support/memory-deep-storage.ts';

/** Deep storage in memory that refuses every call while `down`. */
class FlakyStorage extends MemoryDeepStorage {
  override down = true;
}

const schema = cubeSchema.parse({
  timestampField: 'ts',
  dimensions: ['country'],
  measures: [{ name: 'events', function: 'count' }],
  window: '1m',
});

/** Sealed segments of one event each, in the one-minute windows `0..windows-1`. */
function sealedSegments(windows: number): SegmentManager {
  const segments = new SegmentManager(schema);
  for (let w = 0; w < windows; w++) {
    segments.accept(0, 1, BigInt(w), {
      time: w * 60_000 + 30_000,
      dimensions: ['de'],
      values: [1],
    });
    segments.seal(segments.segments.get(w * 60_000)!);
  }
  return segments;
}

function schedulerOf(
  storage: DeepStorage,
  segments: SegmentManager,
  now?: () => number,
): { scheduler: HandOffScheduler; metrics: ReturnType<typeof createReceiverMetrics> } {
  const metrics = createReceiverMetrics(new Registry());
  const scheduler = new HandOffScheduler({
    storage,
    target: { namespace: 'a', cube: 'orders', replicaSet: 'rs-a', receiver: 'r0', schema },
    segments,
    metrics: new ChannelMetrics(metrics, { namespace: 'a', cube: 'orders', topic: 't' }),
    logger: winston.createLogger({ silent: true }),
    retentionMs: 60_000,
    lostBefore: () => new Map(),
    onHandedOff: () => undefined,
    retry: { initialMs: 1_000, maxMs: 4_000 },
    ...(now ? { now } : {}),
  });
  return { scheduler, metrics };
}

test('a failing store: the segment waits IMMUTABLE, retries back off, and it lands once the store is back', async () => {
  const segments = sealedSegments(1);
  const segment = segments.segments.get(0)!;
  const storage = new FlakyStorage();
  let now = 1_000_000;
  const { scheduler, metrics } = schedulerOf(storage, segments, () => now);
  const failures = async (): Promise<number> =>
    (await metrics.handOffFailures.get()).values.find((v) => v.labels.cube === 'orders')?.value ??
    0;

  // Attempt times: 0, +1 s, +2 s, +4 s, +4 s (the maximum); a pass in between tries nothing.
  const attemptsAt: number[] = [];
  for (let t = 0; t <= 12_000; t += 500) {
    now = 1_000_000 + t;
    const before = scheduler.report(0)?.attempts ?? 0;
    await scheduler.handOffSealed();
    if ((scheduler.report(0)?.attempts ?? 0) > before) attemptsAt.push(t);
  }
  expect(attemptsAt).toEqual([0, 1_000, 3_000, 7_000, 11_000]);
  expect(segment.state).toBe('IMMUTABLE');
  expect(await failures()).toBe(5);
  expect(scheduler.report(0)).toEqual({
    attempts: 5,
    lastError: 'connect ECONNREFUSED',
    nextAttemptAt: new Date(1_000_000 + 15_000).toISOString(),
  });

  storage.down = false;
  now = 1_000_000 + 15_000;
  await scheduler.handOffSealed();
  expect(segment.state).toBe('HANDED_OFF');
  expect(storage.writes).toBe(1);
  const path = scheduler.report(0)?.path;
  expect(path).toMatch(/^s3:\/\/lake\/namespace=a\/orders\/window=0\/replicaSet=rs-a\/r0\.e1\./);
  expect(scheduler.report(0)).toEqual({
    attempts: 1,
    path,
    commit: { outcome: 'committed', by: 'r0', version: 1 },
  });
  expect([...storage.objects.keys()].map((k) => k.split('/').at(-1)).sort()).toEqual([
    'commit.00000001.json',
    'data.arrow',
    'manifest.json',
  ]);
  expect(await failures()).toBe(5);
});

test('a pass hands off a few segments at once, four at the most, and every one of them lands', async () => {
  const storage = new FlakyStorage();
  storage.down = false;
  let inFlight = 0;
  let most = 0;
  const write = storage.writeHandOff.bind(storage);
  storage.writeHandOff = async (...args) => {
    inFlight += 1;
    most = Math.max(most, inFlight);
    // Several turns of the event loop, as a write through the thread pool takes.
    for (let i = 0; i < 3; i++) await new Promise((resolve) => setImmediate(resolve));
    inFlight -= 1;
    return write(...args);
  };
  const segments = sealedSegments(10);
  const { scheduler } = schedulerOf(storage, segments);
  await scheduler.handOffSealed();
  expect(most).toBe(4);
  expect(storage.writes).toBe(10);
  expect([...segments.segments.values()].map((s) => s.state)).toEqual(
    Array<string>(10).fill('HANDED_OFF'),
  );
});

test('more than 100 sealed segments not tried yet: hand-offs are behind until they catch up; failed ones do not count', async () => {
  const storage = new FlakyStorage();
  storage.down = false;
  expect(schedulerOf(storage, sealedSegments(100)).scheduler.caughtUp(60_000)).toBeUndefined();
  const { scheduler } = schedulerOf(storage, sealedSegments(101));
  let caughtUp = false;
  void scheduler.caughtUp(60_000)?.then(() => (caughtUp = true));
  await Promise.resolve();
  expect(caughtUp).toBe(false);
  await scheduler.handOffSealed();
  expect(caughtUp).toBe(true);
  expect(scheduler.behind()).toBe(false);

  // Deep storage down: a segment that failed waits for its backoff, and ingest does not wait.
  storage.down = true;
  const down = schedulerOf(storage, sealedSegments(101)).scheduler;
  expect(down.behind()).toBe(true);
  await down.handOffSealed();
  expect(down.behind()).toBe(false);
  expect(down.caughtUp(60_000)).toBeUndefined();
});
