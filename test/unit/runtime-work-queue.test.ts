// The keyed work queue keeps client-go's promises: a key waits once, never runs twice at once,
// runs once more when added during processing; delayed and rate-limited adds wait as long as
// client-go's default controller rate limiter says; shut-down lets workers go.
import { Registry } from 'prom-client';
import { ManualClock } from '../../src/operator/runtime/clock.ts';
import {
  ExponentialFailureRateLimiter,
  TokenBucketRateLimiter,
  defaultControllerRateLimiter,
} from '../../src/operator/runtime/rate-limiter.ts';
import { WorkQueue } from '../../src/operator/runtime/work-queue.ts';

/** Lets promise callbacks (a worker woken by `get`) run. */
const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

function newQueue(clock = new ManualClock()): {
  queue: WorkQueue;
  clock: ManualClock;
  registry: Registry;
} {
  const registry = new Registry();
  return { queue: new WorkQueue({ name: 'test', registry, clock }), clock, registry };
}

const pending = Symbol('pending');

/** A `get()` whose result can be checked later without awaiting it now. */
function pendingGet(queue: WorkQueue): { result: () => string | undefined | typeof pending } {
  let value: string | undefined | typeof pending = pending;
  void queue.get().then((key) => (value = key));
  return { result: () => value };
}

/** A histogram's values carry the series they belong to (`…_sum`, `…_count`, `…_bucket`). */
const seriesName = (value: object): string | undefined =>
  'metricName' in value && typeof value.metricName === 'string' ? value.metricName : undefined;

async function metricValue(
  registry: Registry,
  name: string,
  labels: Record<string, string> = {},
): Promise<number> {
  const metric = registry.getSingleMetric(name);
  if (metric === undefined) throw new Error(`no metric ${name}`);
  const values = (await metric.get()).values.filter((v) =>
    Object.entries(labels).every(([k, l]) => v.labels[k] === l),
  );
  return values.reduce((sum, v) => sum + v.value, 0);
}

test('a key added several times before it is processed waits once; keys come out in order', async () => {
  const { queue, registry } = newQueue();
  for (const key of ['a', 'b', 'a', 'c', 'b', 'a']) queue.add(key);
  expect(queue.len()).toBe(3);
  expect([await queue.get(), await queue.get(), await queue.get()]).toEqual(['a', 'b', 'c']);
  expect(queue.len()).toBe(0);
  expect(await metricValue(registry, 'workqueue_adds_total', { name: 'test' })).toBe(3);
});

test('a key being processed is not handed to a second worker, and runs once more after done', async () => {
  const { queue } = newQueue();
  queue.add('a');
  expect(await queue.get()).toBe('a');

  // Added (three times) while processing: not queued yet, so an idle worker does not get it.
  queue.add('a');
  queue.add('a');
  queue.add('a');
  expect(queue.len()).toBe(0);
  const second = pendingGet(queue);
  await settle();
  expect(second.result()).toBe(pending);

  // done() puts it back once; the waiting worker receives it.
  queue.done('a');
  await settle();
  expect(second.result()).toBe('a');
  expect(queue.len()).toBe(0);

  // Processed again without further adds: nothing more comes.
  queue.done('a');
  const third = pendingGet(queue);
  await settle();
  expect(third.result()).toBe(pending);
  queue.shutDown();
  await settle();
  expect(third.result()).toBeUndefined();
});

test('other keys flow while one is processing; workers share the queue without duplicates', async () => {
  const { queue } = newQueue();
  queue.add('a');
  queue.add('b');
  const first = await queue.get();
  queue.add('a'); // while a is processing
  const second = await queue.get();
  expect([first, second]).toEqual(['a', 'b']);
  expect(queue.len()).toBe(0);
  queue.done('b');
  expect(queue.len()).toBe(0);
  queue.done('a');
  expect(queue.len()).toBe(1);
  expect(await queue.get()).toBe('a');
});

test('addAfter adds when the delay has passed; the earlier of two delays wins', async () => {
  const { queue, clock } = newQueue();
  queue.addAfter('a', 100);
  queue.addAfter('b', 100);
  queue.addAfter('b', 30); // earlier: replaces
  queue.addAfter('c', 30);
  queue.addAfter('c', 100); // later: ignored
  queue.addAfter('now', 0); // no delay: added at once
  expect(queue.len()).toBe(1);
  expect(await queue.get()).toBe('now');

  clock.advance(29);
  expect(queue.len()).toBe(0);
  clock.advance(1);
  expect(queue.len()).toBe(2);
  expect([await queue.get(), await queue.get()].sort()).toEqual(['b', 'c']);
  clock.advance(69);
  expect(queue.len()).toBe(0);
  clock.advance(1);
  expect(queue.len()).toBe(1);
  expect(await queue.get()).toBe('a');
  clock.advance(1_000);
  expect(queue.len()).toBe(0); // b and c came once only
  expect(clock.pendingTimers()).toBe(0);
});

test('per-key backoff doubles from 5 ms up to 1000 s, and forget starts it over', () => {
  const limiter = new ExponentialFailureRateLimiter();
  const delays = Array.from({ length: 6 }, () => limiter.when('a'));
  expect(delays).toEqual([5, 10, 20, 40, 80, 160]);
  expect(limiter.numRequeues('a')).toBe(6);
  expect(limiter.when('b')).toBe(5); // keys back off independently
  for (let i = 0; i < 40; i++) limiter.when('a');
  expect(limiter.when('a')).toBe(1_000_000);
  for (let i = 0; i < 2000; i++) limiter.when('a'); // 2^n overflows to Infinity: still capped
  expect(limiter.when('a')).toBe(1_000_000);
  limiter.forget('a');
  expect(limiter.numRequeues('a')).toBe(0);
  expect(limiter.when('a')).toBe(5);
});

test('the overall token bucket allows a burst of 100, then 10 per second', () => {
  const clock = new ManualClock();
  const bucket = new TokenBucketRateLimiter(10, 100, clock);
  const burst = Array.from({ length: 100 }, () => bucket.when());
  expect(burst.every((d) => d === 0)).toBe(true);
  expect(bucket.when()).toBeCloseTo(100); // 101st: one token at 10 qps
  expect(bucket.when()).toBeCloseTo(200); // 102nd: the debt grows
  clock.advance(1_000); // ten tokens earned, two of them owed
  expect(bucket.when()).toBe(0);
});

test('the default controller rate limiter waits for the larger of backoff and bucket', () => {
  const clock = new ManualClock();
  const limiter = defaultControllerRateLimiter(clock);
  // A fresh key inside the burst: the per-key backoff decides.
  expect(limiter.when('x')).toBe(5);
  expect(limiter.when('x')).toBe(10);
  for (let i = 0; i < 98; i++) limiter.when(`k${i}`);
  // The bucket is empty now: a fresh key waits for a token rather than 5 ms.
  expect(limiter.when('fresh')).toBeCloseTo(100);
  // A key deep in backoff waits for its backoff, which is longer.
  for (let i = 0; i < 10; i++) limiter.when('slow');
  expect(limiter.when('slow')).toBe(5 * 2 ** 10);
  expect(limiter.numRequeues('slow')).toBe(11);
  limiter.forget('slow');
  expect(limiter.numRequeues('slow')).toBe(0);
});

test('addRateLimited backs a failing key off exponentially; forget resets it', async () => {
  const { queue, clock, registry } = newQueue();
  const waits: number[] = [];
  for (let attempt = 0; attempt < 4; attempt++) {
    queue.addRateLimited('a');
    let waited = 0;
    while (queue.len() === 0) {
      clock.advance(1);
      waited += 1;
    }
    waits.push(waited);
    expect(await queue.get()).toBe('a');
    queue.done('a');
  }
  expect(waits).toEqual([5, 10, 20, 40]);
  expect(queue.numRequeues('a')).toBe(4);
  expect(await metricValue(registry, 'workqueue_retries_total', { name: 'test' })).toBe(4);

  queue.forget('a');
  expect(queue.numRequeues('a')).toBe(0);
  queue.addRateLimited('a');
  clock.advance(4);
  expect(queue.len()).toBe(0);
  clock.advance(1);
  expect(queue.len()).toBe(1);
});

test('shutDown wakes idle workers with undefined, hands out what was queued, refuses new keys', async () => {
  const { queue, clock } = newQueue();
  const idle = pendingGet(queue);
  await settle();
  queue.add('a'); // the idle worker takes it
  await settle();
  expect(idle.result()).toBe('a');

  const idle2 = pendingGet(queue);
  queue.add('b'); // taken by idle2
  queue.add('c'); // stays queued
  queue.addAfter('later', 50);
  queue.shutDown();
  expect(queue.isShuttingDown()).toBe(true);
  await settle();
  expect(idle2.result()).toBe('b');

  queue.add('d');
  queue.addRateLimited('e');
  expect(queue.len()).toBe(1);
  expect(await queue.get()).toBe('c'); // as in client-go: queued keys are still handed out
  expect(await queue.get()).toBeUndefined();
  clock.advance(1_000);
  expect(clock.pendingTimers()).toBe(0); // delayed adds dropped
  expect(queue.len()).toBe(0);
});

test('shutDownWithDrain waits until every key handed out is done', async () => {
  const { queue } = newQueue();
  queue.add('a');
  queue.add('b');
  const a = await queue.get();
  const b = await queue.get();
  let drained = false;
  const drain = queue.shutDownWithDrain().then(() => (drained = true));
  queue.done(a as string);
  await settle();
  expect(drained).toBe(false);
  queue.done(b as string);
  await drain;
  expect(drained).toBe(true);
  expect(await queue.get()).toBeUndefined();
});

test('metrics: depth counts waiting keys, durations are observed per key', async () => {
  const { queue, clock, registry } = newQueue();
  queue.add('a');
  queue.add('b');
  expect(await metricValue(registry, 'workqueue_depth', { name: 'test' })).toBe(2);
  clock.advance(2_000);
  expect(await queue.get()).toBe('a');
  expect(await metricValue(registry, 'workqueue_depth', { name: 'test' })).toBe(1);
  clock.advance(500);
  queue.done('a');
  const queued = (await registry.getSingleMetric('workqueue_queue_duration_seconds')!.get()).values;
  expect(queued.find((v) => seriesName(v) === 'workqueue_queue_duration_seconds_sum')?.value).toBe(
    2,
  );
  const worked = (await registry.getSingleMetric('workqueue_work_duration_seconds')!.get()).values;
  expect(worked.find((v) => seriesName(v) === 'workqueue_work_duration_seconds_sum')?.value).toBe(
    0.5,
  );

  // A second queue on the same registry shares the metric families under its own name.
  const other = new WorkQueue({ name: 'other', registry, clock });
  other.add('x');
  expect(await metricValue(registry, 'workqueue_depth', { name: 'other' })).toBe(1);
  expect(await metricValue(registry, 'workqueue_depth', { name: 'test' })).toBe(1);
});

test('unfinished work and the longest-running processor are measured while keys are processed', async () => {
  const { queue, clock, registry } = newQueue();
  const gauge = async (name: string): Promise<number> =>
    metricValue(registry, name, { name: 'test', controller: 'test' });
  expect(await gauge('workqueue_unfinished_work_seconds')).toBe(0);
  queue.add('a');
  queue.add('b');
  await queue.get();
  clock.advance(3_000);
  await queue.get();
  clock.advance(1_000);
  // a: 4 s, b: 1 s in progress
  expect(await gauge('workqueue_unfinished_work_seconds')).toBe(5);
  expect(await gauge('workqueue_longest_running_processor_seconds')).toBe(4);
  queue.done('a');
  expect(await gauge('workqueue_longest_running_processor_seconds')).toBe(1);
  queue.done('b');
  expect(await gauge('workqueue_unfinished_work_seconds')).toBe(0);
  expect(await gauge('workqueue_longest_running_processor_seconds')).toBe(0);
});

test('two queues on one registry share the metric families, told apart by name and controller', async () => {
  const clock = new ManualClock();
  const registry = new Registry();
  const a = new WorkQueue({ name: 'a', controller: 'ctl-a', registry, clock });
  const b = new WorkQueue({ name: 'b', controller: 'ctl-b', registry, clock });
  a.add('x');
  b.add('y');
  await b.get();
  clock.advance(2_000);
  expect(await metricValue(registry, 'workqueue_depth', { name: 'a', controller: 'ctl-a' })).toBe(
    1,
  );
  expect(
    await metricValue(registry, 'workqueue_unfinished_work_seconds', { controller: 'ctl-b' }),
  ).toBe(2);
  expect(
    await metricValue(registry, 'workqueue_unfinished_work_seconds', { controller: 'ctl-a' }),
  ).toBe(0);
});
