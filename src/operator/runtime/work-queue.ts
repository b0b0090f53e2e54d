// A keyed work queue with client-go's semantics: a key waits at most once, is never handed to two
// workers at once, and a key added while it is being processed is handed out again after `done`.
// Delayed and rate-limited adds sit beside it, as in client-go's delaying/rate-limiting queues.
import type { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { sharedCounter, sharedGauge, sharedHistogram } from '../../observability/metrics.ts';
import { systemClock, type Clock } from './clock.ts';
import { defaultControllerRateLimiter, type RateLimiter } from './rate-limiter.ts';

export interface WorkQueueOptions {
  /** The `name` label of the queue's metrics. */
  name: string;
  /** Their `controller` label (controller-runtime sets both): the controller's name; default `name`. */
  controller?: string;
  registry: Registry;
  clock?: Clock;
  /** Defaults to client-go's DefaultControllerRateLimiter (5 ms → 1000 s per key, 10 qps / 100 burst). */
  rateLimiter?: RateLimiter;
}

// client-go's workqueue buckets: 10 ns … 1000 s, a decade apart.
const durationBuckets = Array.from({ length: 12 }, (_, i) => 1e-8 * 10 ** i);

type QueueLabels = 'name' | 'controller';

/** The queues of each registry, for the gauges computed when scraped. */
const queuesOf = new WeakMap<Registry, Set<WorkQueue>>();

export class WorkQueue {
  readonly name: string;
  private readonly clock: Clock;
  private readonly rateLimiter: RateLimiter;

  /** Keys in the order they will be handed out; each is dirty and not processing. */
  private queue: string[] = [];
  /** Keys that need processing: queued, or added again while processing. */
  private readonly dirty = new Set<string>();
  private readonly processing = new Set<string>();
  private readonly waiters: ((key: string | undefined) => void)[] = [];
  private readonly delayed = new Map<string, { readyAt: number; cancel: () => void }>();
  private shuttingDown = false;
  private drainWaiters: (() => void)[] = [];

  private readonly addedAt = new Map<string, number>();
  private readonly startedAt = new Map<string, number>();
  private readonly labels: Record<QueueLabels, string>;
  private readonly metrics: {
    depth: Gauge<QueueLabels>;
    adds: Counter<QueueLabels>;
    retries: Counter<QueueLabels>;
    queueDuration: Histogram<QueueLabels>;
    workDuration: Histogram<QueueLabels>;
  };

  constructor(options: WorkQueueOptions) {
    this.name = options.name;
    this.clock = options.clock ?? systemClock;
    this.rateLimiter = options.rateLimiter ?? defaultControllerRateLimiter(this.clock);
    this.labels = { name: this.name, controller: options.controller ?? this.name };
    const { registry } = options;
    const queues = queuesOf.get(registry) ?? new Set<WorkQueue>();
    queuesOf.set(registry, queues.add(this));
    // client-go's two gauges of work in progress, computed from the keys processing when scraped.
    const inProgress = (
      name: string,
      help: string,
      of: (queue: WorkQueue) => number,
    ): Gauge<QueueLabels> =>
      sharedGauge(registry, {
        name,
        help,
        labelNames: ['name', 'controller'],
        collect(this: Gauge<QueueLabels>) {
          for (const queue of queues) this.set(queue.labels, of(queue));
        },
      });
    inProgress(
      'workqueue_unfinished_work_seconds',
      'How many seconds of work has been done that is in progress and has not been observed by work_duration. Large values indicate stuck threads.',
      (q) => q.runningSeconds().reduce((a, b) => a + b, 0),
    );
    inProgress(
      'workqueue_longest_running_processor_seconds',
      'How many seconds has the longest running processor for workqueue been running.',
      (q) => Math.max(0, ...q.runningSeconds()),
    );
    this.metrics = {
      depth: sharedGauge(registry, {
        name: 'workqueue_depth',
        help: 'Current depth of workqueue',
        labelNames: ['name', 'controller'],
      }),
      adds: sharedCounter(registry, {
        name: 'workqueue_adds_total',
        help: 'Total number of adds handled by workqueue',
        labelNames: ['name', 'controller'],
      }),
      retries: sharedCounter(registry, {
        name: 'workqueue_retries_total',
        help: 'Total number of retries handled by workqueue',
        labelNames: ['name', 'controller'],
      }),
      queueDuration: sharedHistogram(registry, {
        name: 'workqueue_queue_duration_seconds',
        help: 'How long in seconds an item stays in workqueue before being requested',
        labelNames: ['name', 'controller'],
        buckets: durationBuckets,
      }),
      workDuration: sharedHistogram(registry, {
        name: 'workqueue_work_duration_seconds',
        help: 'How long in seconds processing an item from workqueue takes',
        labelNames: ['name', 'controller'],
        buckets: durationBuckets,
      }),
    };
    this.metrics.depth.set(this.labels, 0);
  }

  /** Marks `key` as needing processing. A key already waiting is not queued twice. */
  add(key: string): void {
    if (this.shuttingDown || this.dirty.has(key)) return;
    this.dirty.add(key);
    this.metrics.adds.inc(this.labels);
    if (!this.addedAt.has(key)) this.addedAt.set(key, this.clock.now());
    this.updateDepth();
    // Processing now: it goes back into the queue when the worker calls done().
    if (this.processing.has(key)) return;
    this.queue.push(key);
    this.handOut();
  }

  /**
   * Adds `key` after `delayMs`. When the key is already waiting for a delayed add, the earlier of
   * the two times wins. Counted in `workqueue_retries_total`, as client-go counts every AddAfter.
   */
  addAfter(key: string, delayMs: number): void {
    if (this.shuttingDown) return;
    this.metrics.retries.inc(this.labels);
    if (delayMs <= 0) {
      this.add(key);
      return;
    }
    const readyAt = this.clock.now() + delayMs;
    const waiting = this.delayed.get(key);
    if (waiting !== undefined) {
      if (waiting.readyAt <= readyAt) return;
      waiting.cancel();
    }
    const cancel = this.clock.setTimeout(() => {
      this.delayed.delete(key);
      this.add(key);
    }, delayMs);
    this.delayed.set(key, { readyAt, cancel });
  }

  /** Adds `key` once the rate limiter allows it: call this when processing `key` failed. */
  addRateLimited(key: string): void {
    if (this.shuttingDown) return;
    this.addAfter(key, this.rateLimiter.when(key));
  }

  /** Ends the backoff of `key`: its next failure starts again at the base delay. */
  forget(key: string): void {
    this.rateLimiter.forget(key);
  }

  numRequeues(key: string): number {
    return this.rateLimiter.numRequeues(key);
  }

  /**
   * The next key to process; the caller owns it until it calls `done(key)`. After a shut-down,
   * keys still queued are handed out (as in client-go) and then `undefined`.
   */
  get(): Promise<string | undefined> {
    if (this.queue.length > 0) return Promise.resolve(this.take());
    if (this.shuttingDown) return Promise.resolve(undefined);
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /** Seconds each key being processed has been processing for. */
  private runningSeconds(): number[] {
    const now = this.clock.now();
    return [...this.startedAt.values()].map((started) => (now - started) / 1000);
  }

  /** Ends processing of `key`; if it was added meanwhile, it is queued again. */
  done(key: string): void {
    if (!this.processing.delete(key)) return;
    const started = this.startedAt.get(key);
    this.startedAt.delete(key);
    if (started !== undefined) {
      this.metrics.workDuration.observe(this.labels, (this.clock.now() - started) / 1000);
    }
    if (this.dirty.has(key)) {
      this.queue.push(key);
      this.handOut();
    }
    if (this.processing.size === 0) this.resolveDrainWaiters();
  }

  /** Keys waiting to be handed out (not counting those being processed or delayed). */
  len(): number {
    return this.queue.length;
  }

  isShuttingDown(): boolean {
    return this.shuttingDown;
  }

  /** Refuses new keys, drops delayed ones and wakes idle workers with `undefined`. */
  shutDown(): void {
    this.beginShutDown();
    // A plain shut-down ends any drain in progress, as client-go's ShutDown does.
    this.resolveDrainWaiters();
  }

  /** As `shutDown`, then waits until every key handed out has been marked done. */
  shutDownWithDrain(): Promise<void> {
    this.beginShutDown();
    if (this.processing.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.drainWaiters.push(resolve));
  }

  private beginShutDown(): void {
    this.shuttingDown = true;
    for (const { cancel } of this.delayed.values()) cancel();
    this.delayed.clear();
    this.handOut();
    for (const waiter of this.waiters.splice(0)) waiter(undefined);
  }

  private take(): string {
    const key = this.queue.shift() as string;
    this.dirty.delete(key);
    this.processing.add(key);
    const now = this.clock.now();
    const added = this.addedAt.get(key);
    this.addedAt.delete(key);
    if (added !== undefined) {
      this.metrics.queueDuration.observe(this.labels, (now - added) / 1000);
    }
    this.startedAt.set(key, now);
    this.updateDepth();
    return key;
  }

  private handOut(): void {
    while (this.waiters.length > 0 && this.queue.length > 0) {
      const waiter = this.waiters.shift() as (key: string | undefined) => void;
      waiter(this.take());
    }
  }

  private resolveDrainWaiters(): void {
    for (const resolve of this.drainWaiters.splice(0)) resolve();
  }

  private updateDepth(): void {
    this.metrics.depth.set(this.labels, this.dirty.size);
  }
}
