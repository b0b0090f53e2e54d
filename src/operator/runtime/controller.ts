// Runs a reconciler over a work queue with N workers, the way controller-runtime's controller
// does: an error is retried with backoff, a TerminalError is not, "requeue after" waits, success
// forgets the key's backoff. The reconciler reads current state itself; the key is all it gets.
import type { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { sharedCounter, sharedGauge, sharedHistogram } from '../../observability/metrics.ts';
import { systemClock, type Clock } from './clock.ts';
import { describeError, silentLogger, type RuntimeLogger } from './logger.ts';
import type { WorkQueue } from './work-queue.ts';

export interface ReconcileResult {
  /** Run the key again after this many milliseconds (its error backoff is reset). */
  requeueAfterMs?: number;
  /** Run the key again with the queue's rate limiting, without counting it as an error. */
  requeue?: boolean;
}

/**
 * A reconciler: brings the world in line with what `key` names and says whether to come back.
 * `signal` aborts when the controller stops; the controller still waits for the promise.
 */
export type Reconciler = (key: string, signal: AbortSignal) => Promise<ReconcileResult | void>;

/**
 * A programming error: what controller-runtime counts as a recovered panic. Like any error it is
 * logged and retried with backoff, and counted in `controller_runtime_reconcile_panics_total`.
 */
export function isPanic(error: unknown): boolean {
  return (
    error instanceof TypeError ||
    error instanceof ReferenceError ||
    error instanceof RangeError ||
    error instanceof SyntaxError
  );
}

/** An error that retrying cannot fix (bad input, a missing reference): logged, never retried. */
export class TerminalError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'TerminalError';
  }
}

export type ReconcileOutcome = 'success' | 'error' | 'requeue' | 'requeue_after';

export interface ControllerOptions {
  /** The `controller` label of the metrics and logs. */
  name: string;
  queue: WorkQueue;
  reconcile: Reconciler;
  /** Reconciles running at once (controller-runtime's MaxConcurrentReconciles); default 1. */
  workers?: number;
  registry: Registry;
  logger?: RuntimeLogger;
  clock?: Clock;
}

// controller-runtime's reconcile_time_seconds buckets.
const reconcileBuckets = [
  0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1,
  1.25, 1.5, 1.75, 2, 2.5, 3, 3.5, 4, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60,
];

export class Controller {
  readonly name: string;
  private readonly queue: WorkQueue;
  private readonly reconcile: Reconciler;
  private readonly workers: number;
  private readonly logger: RuntimeLogger;
  private readonly clock: Clock;
  private readonly stopping = new AbortController();
  private running: Promise<void> | undefined;
  private readonly metrics: {
    total: Counter<'controller' | 'result'>;
    errors: Counter<'controller'>;
    terminalErrors: Counter<'controller'>;
    panics: Counter<'controller'>;
    time: Histogram<'controller'>;
    activeWorkers: Gauge<'controller'>;
  };

  constructor(options: ControllerOptions) {
    this.name = options.name;
    this.queue = options.queue;
    this.reconcile = options.reconcile;
    this.workers = options.workers ?? 1;
    if (!Number.isInteger(this.workers) || this.workers < 1) {
      throw new Error(`controller ${this.name}: workers must be a positive integer`);
    }
    this.logger = options.logger ?? silentLogger;
    this.clock = options.clock ?? systemClock;
    const { registry } = options;
    this.metrics = {
      total: sharedCounter(registry, {
        name: 'controller_runtime_reconcile_total',
        help: 'Total number of reconciliations per controller',
        labelNames: ['controller', 'result'],
      }),
      errors: sharedCounter(registry, {
        name: 'controller_runtime_reconcile_errors_total',
        help: 'Total number of reconciliation errors per controller',
        labelNames: ['controller'],
      }),
      terminalErrors: sharedCounter(registry, {
        name: 'controller_runtime_terminal_reconcile_errors_total',
        help: 'Total number of terminal reconciliation errors per controller',
        labelNames: ['controller'],
      }),
      panics: sharedCounter(registry, {
        name: 'controller_runtime_reconcile_panics_total',
        help: 'Total number of reconciliation panics per controller',
        labelNames: ['controller'],
      }),
      time: sharedHistogram(registry, {
        name: 'controller_runtime_reconcile_time_seconds',
        help: 'Length of time per reconciliation per controller',
        labelNames: ['controller'],
        buckets: reconcileBuckets,
      }),
      activeWorkers: sharedGauge(registry, {
        name: 'controller_runtime_active_workers',
        help: 'Number of currently used workers per controller',
        labelNames: ['controller'],
      }),
    };
    for (const result of ['success', 'error', 'requeue', 'requeue_after'] as const) {
      this.metrics.total.inc({ controller: this.name, result }, 0);
    }
    this.metrics.errors.inc({ controller: this.name }, 0);
    this.metrics.terminalErrors.inc({ controller: this.name }, 0);
    this.metrics.panics.inc({ controller: this.name }, 0);
    this.metrics.activeWorkers.set({ controller: this.name }, 0);
    sharedGauge(registry, {
      name: 'controller_runtime_max_concurrent_reconciles',
      help: 'Maximum number of concurrent reconciles per controller',
      labelNames: ['controller'],
    }).set({ controller: this.name }, this.workers);
  }

  /** Starts the workers; they run until `stop()`. */
  start(): void {
    if (this.running !== undefined) throw new Error(`controller ${this.name} was already started`);
    if (this.stopping.signal.aborted) throw new Error(`controller ${this.name} was stopped`);
    this.logger.info('starting workers', { controller: this.name, workers: this.workers });
    const workers = Array.from({ length: this.workers }, () => this.work());
    this.running = Promise.all(workers).then(() => undefined);
  }

  /**
   * Stops taking keys, shuts the queue down, aborts the reconcilers' signal and waits for the
   * reconciles in flight to return. Keys still queued are left unprocessed.
   */
  async stop(): Promise<void> {
    if (!this.stopping.signal.aborted) {
      this.logger.info('stopping: waiting for reconciles in flight', { controller: this.name });
      this.stopping.abort(new Error(`controller ${this.name} is stopping`));
      this.queue.shutDown();
    }
    await this.running;
  }

  private async work(): Promise<void> {
    while (!this.stopping.signal.aborted) {
      const key = await this.queue.get();
      if (key === undefined) return;
      if (this.stopping.signal.aborted) {
        this.queue.done(key);
        return;
      }
      this.metrics.activeWorkers.inc({ controller: this.name });
      try {
        await this.reconcileKey(key);
      } finally {
        this.queue.done(key);
        this.metrics.activeWorkers.dec({ controller: this.name });
      }
    }
  }

  private async reconcileKey(key: string): Promise<void> {
    const started = this.clock.now();
    let outcome: ReconcileOutcome;
    try {
      const result = await this.reconcile(key, this.stopping.signal);
      outcome = this.handleResult(key, result ?? {});
    } catch (error) {
      outcome = 'error';
      this.metrics.errors.inc({ controller: this.name });
      if (isPanic(error)) this.metrics.panics.inc({ controller: this.name });
      if (error instanceof TerminalError) {
        this.metrics.terminalErrors.inc({ controller: this.name });
        this.queue.forget(key);
        this.logger.error('reconcile failed for good; not retrying', {
          controller: this.name,
          key,
          error: describeError(error),
        });
      } else {
        this.queue.addRateLimited(key);
        this.logger.warn('reconcile failed; retrying with backoff', {
          controller: this.name,
          key,
          retries: this.queue.numRequeues(key),
          error: describeError(error),
        });
      }
    } finally {
      this.metrics.time.observe({ controller: this.name }, (this.clock.now() - started) / 1000);
    }
    this.metrics.total.inc({ controller: this.name, result: outcome });
  }

  private handleResult(key: string, result: ReconcileResult): ReconcileOutcome {
    if (result.requeueAfterMs !== undefined && result.requeueAfterMs > 0) {
      this.queue.forget(key);
      this.queue.addAfter(key, result.requeueAfterMs);
      return 'requeue_after';
    }
    if (result.requeue === true) {
      this.queue.addRateLimited(key);
      return 'requeue';
    }
    this.queue.forget(key);
    return 'success';
  }
}
