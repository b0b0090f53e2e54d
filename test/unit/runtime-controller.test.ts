// The controller turns a reconciler's answer into queue actions: success forgets the key's
// backoff, an error retries with growing backoff, a TerminalError is not retried, "requeue after"
// comes back after exactly that delay; workers never overlap on a key; stop waits for in-flight work.
import { Registry } from 'prom-client';
import { ManualClock } from '../../src/operator/runtime/clock.ts';
import {
  Controller,
  TerminalError,
  type ReconcileResult,
  type Reconciler,
} from '../../src/operator/runtime/controller.ts';
import { WorkQueue } from '../../src/operator/runtime/work-queue.ts';

const settle = async (): Promise<void> => {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
};

interface Harness {
  clock: ManualClock;
  queue: WorkQueue;
  registry: Registry;
  controller: Controller;
  calls: string[];
}

function harness(reconcile: Reconciler, workers = 1): Harness {
  const clock = new ManualClock();
  const registry = new Registry();
  const queue = new WorkQueue({ name: 'cubes', registry, clock });
  const calls: string[] = [];
  const controller = new Controller({
    name: 'cubes',
    queue,
    registry,
    clock,
    workers,
    reconcile: (key, signal) => {
      calls.push(key);
      return reconcile(key, signal);
    },
  });
  return { clock, queue, registry, controller, calls };
}

/** A histogram's values carry the series they belong to (`…_sum`, `…_count`, `…_bucket`). */
const seriesName = (value: object): string | undefined =>
  'metricName' in value && typeof value.metricName === 'string' ? value.metricName : undefined;

/** Sum of a metric's values with these labels; `series` picks e.g. a histogram's `_count`. */
/** controller_runtime_reconcile_total of the controller `cubes` with `result`. */
const reconciles = (h: ReturnType<typeof harness>, result: string): Promise<number> =>
  metric(h.registry, 'controller_runtime_reconcile_total', { controller: 'cubes', result });

async function metric(
  registry: Registry,
  name: string,
  labels: Record<string, string>,
  series = name,
): Promise<number> {
  const values = (await registry.getSingleMetric(name)!.get()).values;
  return values
    .filter((v) => (seriesName(v) ?? name) === series)
    .filter((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l))
    .reduce((sum, v) => sum + v.value, 0);
}

/** Moves the manual clock forward 1 ms at a time until `predicate` holds; returns the ms moved. */
async function advanceUntil(
  clock: ManualClock,
  predicate: () => boolean,
  limitMs: number,
): Promise<number> {
  for (let moved = 0; moved <= limitMs; moved++) {
    await settle();
    if (predicate()) return moved;
    clock.advance(1);
  }
  throw new Error(`condition not met within ${limitMs} ms`);
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

test('success forgets the key: nothing more happens, the backoff of earlier failures is reset', async () => {
  let failuresLeft = 2;
  const h = harness(() =>
    failuresLeft-- > 0 ? Promise.reject(new Error('API server said no')) : Promise.resolve(),
  );
  h.controller.start();
  h.queue.add('ns/a');
  await settle();
  expect(h.calls).toEqual(['ns/a']);
  expect(h.queue.numRequeues('ns/a')).toBe(1);

  // Retried after 5 ms, then after 10 ms: the backoff grows between failures.
  expect(await advanceUntil(h.clock, () => h.calls.length === 2, 100)).toBe(5);
  expect(h.queue.numRequeues('ns/a')).toBe(2);
  expect(await advanceUntil(h.clock, () => h.calls.length === 3, 100)).toBe(10);
  expect(h.queue.numRequeues('ns/a')).toBe(0);

  h.clock.advance(60_000);
  await settle();
  expect(h.calls).toHaveLength(3);
  expect(await reconciles(h, 'error')).toBe(2);
  expect(await reconciles(h, 'success')).toBe(1);
  expect(
    await metric(h.registry, 'controller_runtime_reconcile_errors_total', { controller: 'cubes' }),
  ).toBe(2);
  expect(
    await metric(
      h.registry,
      'controller_runtime_reconcile_time_seconds',
      { controller: 'cubes' },
      'controller_runtime_reconcile_time_seconds_count',
    ),
  ).toBe(3);
  await h.controller.stop();
});

test('a TerminalError is counted and logged but never retried', async () => {
  const h = harness(() => Promise.reject(new TerminalError('replica set rs-x does not exist')));
  h.controller.start();
  h.queue.add('ns/bad');
  await settle();
  h.clock.advance(3_600_000);
  await settle();
  expect(h.calls).toEqual(['ns/bad']);
  expect(h.queue.numRequeues('ns/bad')).toBe(0);
  expect(h.clock.pendingTimers()).toBe(0);
  expect(await reconciles(h, 'error')).toBe(1);
  expect(
    await metric(h.registry, 'controller_runtime_terminal_reconcile_errors_total', {
      controller: 'cubes',
    }),
  ).toBe(1);

  // A new event for the key runs it again: terminal means "not retried", not "ignored forever".
  h.queue.add('ns/bad');
  await settle();
  expect(h.calls).toEqual(['ns/bad', 'ns/bad']);
  await h.controller.stop();
});

test('requeueAfter brings the key back after exactly that delay and resets its backoff', async () => {
  const answers: (ReconcileResult | Error)[] = [new Error('flaky'), { requeueAfterMs: 1_000 }, {}];
  const h = harness(() => {
    const answer = answers.shift();
    return answer instanceof Error ? Promise.reject(answer) : Promise.resolve(answer);
  });
  h.controller.start();
  h.queue.add('ns/a');
  await settle();
  expect(await advanceUntil(h.clock, () => h.calls.length === 2, 100)).toBe(5);
  expect(h.queue.numRequeues('ns/a')).toBe(0); // forgotten by requeueAfter
  expect(await advanceUntil(h.clock, () => h.calls.length === 3, 2_000)).toBe(1_000);
  expect(await reconciles(h, 'requeue_after')).toBe(1);
  await h.controller.stop();
});

test('requeue: true retries with the rate limiter without counting an error', async () => {
  const answers: ReconcileResult[] = [{ requeue: true }, { requeue: true }, {}];
  const h = harness(() => Promise.resolve(answers.shift()));
  h.controller.start();
  h.queue.add('k');
  await settle();
  expect(await advanceUntil(h.clock, () => h.calls.length === 2, 100)).toBe(5);
  expect(await advanceUntil(h.clock, () => h.calls.length === 3, 100)).toBe(10);
  expect(await reconciles(h, 'requeue')).toBe(2);
  expect(
    await metric(h.registry, 'controller_runtime_reconcile_errors_total', { controller: 'cubes' }),
  ).toBe(0);
  await h.controller.stop();
});

test('N workers run different keys at once but never the same key twice; a key added meanwhile runs once more', async () => {
  const gates = new Map<string, ReturnType<typeof deferred>[]>();
  const running = new Set<string>();
  let overlap = false;
  let maxParallel = 0;
  const h = harness(async (key) => {
    if (running.has(key)) overlap = true;
    running.add(key);
    maxParallel = Math.max(maxParallel, running.size);
    const gate = deferred();
    gates.set(key, [...(gates.get(key) ?? []), gate]);
    await gate.promise;
    running.delete(key);
  }, 3);
  h.controller.start();
  for (const key of ['a', 'b', 'c', 'd']) h.queue.add(key);
  await settle();
  expect([...running].sort()).toEqual(['a', 'b', 'c']);
  expect(
    await metric(h.registry, 'controller_runtime_active_workers', { controller: 'cubes' }),
  ).toBe(3);

  h.queue.add('a'); // while a runs
  h.queue.add('a');
  await settle();
  expect(h.calls.filter((k) => k === 'a')).toHaveLength(1);

  gates.get('a')![0]!.resolve(); // a finishes: a worker frees up; d was waiting longer than a's re-add
  await settle();
  expect([...running].sort()).toEqual(['b', 'c', 'd']);
  gates.get('b')![0]!.resolve();
  await settle();
  expect([...running].sort()).toEqual(['a', 'c', 'd']);
  for (const key of ['a', 'c', 'd']) gates.get(key)!.at(-1)!.resolve();
  await settle();
  expect(running.size).toBe(0);
  expect(h.calls.filter((k) => k === 'a')).toHaveLength(2);
  expect(overlap).toBe(false);
  expect(maxParallel).toBe(3);
  expect(
    await metric(h.registry, 'controller_runtime_active_workers', { controller: 'cubes' }),
  ).toBe(0);
  await h.controller.stop();
});

test('stop takes no more keys, aborts the signal and waits for the reconcile in flight', async () => {
  const gate = deferred();
  let signalSeen: AbortSignal | undefined;
  const h = harness(async (_key, signal) => {
    signalSeen = signal;
    await gate.promise;
  });
  h.controller.start();
  h.queue.add('busy');
  h.queue.add('queued');
  await settle();
  expect(h.calls).toEqual(['busy']);

  let stopped = false;
  const stopping = h.controller.stop().then(() => (stopped = true));
  await settle();
  expect(signalSeen?.aborted).toBe(true);
  expect(stopped).toBe(false); // still waiting for 'busy'
  gate.resolve();
  await stopping;
  expect(h.calls).toEqual(['busy']); // 'queued' was not taken
  expect(h.queue.isShuttingDown()).toBe(true);
});

test('a programming error counts as a panic (and an error) and is retried; max concurrent reconciles is the worker count', async () => {
  let calls = 0;
  const h = harness(() => {
    calls += 1;
    if (calls === 1)
      return Promise.reject(new TypeError("Cannot read properties of undefined (reading 'spec')"));
    if (calls === 2) return Promise.reject(new Error('connect ECONNREFUSED'));
    return Promise.resolve();
  }, 3);
  h.controller.start();
  h.queue.add('ns/a');
  await settle();
  h.clock.advance(1_000);
  await settle();
  h.clock.advance(1_000);
  await settle();
  expect(calls).toBe(3);
  expect(
    await metric(h.registry, 'controller_runtime_reconcile_panics_total', { controller: 'cubes' }),
  ).toBe(1);
  expect(
    await metric(h.registry, 'controller_runtime_reconcile_errors_total', { controller: 'cubes' }),
  ).toBe(2);
  expect(
    await metric(h.registry, 'controller_runtime_max_concurrent_reconciles', {
      controller: 'cubes',
    }),
  ).toBe(3);
  await h.controller.stop();
});
