// Keeps a cube's Kafka consumer running: a crash or a failed start, whatever the error, is
// followed by a restart with exponential backoff, and the consumer counts as failed until a
// restarted one has shown that it works. The channel owns positions and pauses; a restart is the
// channel starting a fresh consumer from them.

/** Time for the supervisor: wall-clock milliseconds and cancellable timers (a manual one in tests). */
export interface SupervisorClock {
  now(): number;
  /** Calls `callback` after `ms`; the returned function cancels it. */
  setTimeout(callback: () => void, ms: number): () => void;
}

export const wallClock: SupervisorClock = {
  now: () => Date.now(),
  setTimeout: (callback, ms) => {
    const timer = setTimeout(callback, Math.max(0, ms));
    return () => clearTimeout(timer);
  },
};

export interface RestartPolicy {
  /** Delay before the first restart after a healthy run; doubles with each failure in a row. */
  initialBackoffMs: number;
  maxBackoffMs: number;
  /**
   * A restarted consumer that has delivered no record yet counts as healthy once it has stayed
   * up this long: a topic may be quiet, but a consumer that cannot decode a batch or reach its
   * broker crashes well within it.
   */
  healthyAfterMs: number;
  /**
   * How long failures that Kafka calls retriable (a coordinator still loading after a broker
   * start, a leader election, a dropped connection) may last before the consumer is reported
   * failed. They are restarted and counted like any other; only the report waits, so that a
   * group join that meets a loading coordinator does not raise ConsumerFailed. A failure that is
   * not retriable (a batch that cannot be decoded) is reported at once.
   */
  transientGraceMs: number;
}

export const defaultRestartPolicy: RestartPolicy = {
  initialBackoffMs: 1_000,
  maxBackoffMs: 30_000,
  healthyAfterMs: 10_000,
  transientGraceMs: 5_000,
};

/** kafkajs marks errors a retry may cure `retriable` (KafkaJSError's own flag). */
export function isRetriable(error: Error): boolean {
  return (error as { retriable?: unknown }).retriable === true;
}

export interface ConsumerSupervisorOptions {
  /** Starts a fresh consumer from the channel's positions, with its pauses; throws on failure. */
  start: () => Promise<void>;
  policy?: Partial<RestartPolicy>;
  clock?: SupervisorClock;
  onFailure?: (error: Error, restartInMs: number) => void;
  onRecovered?: (downMs: number) => void;
}

export type ConsumerHealth =
  | { state: 'running'; failures: number }
  | { state: 'failed'; failures: number; error: Error; since: number };

type Phase =
  /** Started and healthy (or never failed). */
  | 'running'
  /** Failed; a restart is scheduled. */
  | 'failed'
  /** Restarted after a failure; not yet shown to work. */
  | 'recovering';

export class ConsumerSupervisor {
  private readonly startConsumer: () => Promise<void>;
  private readonly policy: RestartPolicy;
  private readonly clock: SupervisorClock;
  private readonly options: ConsumerSupervisorOptions;
  private phase: Phase = 'running';
  /** Since when the consumer is down, the latest error, and whether every error was retriable. */
  private failure: { error: Error; since: number; transient: boolean } | undefined;
  /** Failures in a row since the consumer last was healthy: the exponent of the backoff. */
  private streak = 0;
  private failures = 0;
  private cancelRestart: (() => void) | undefined;
  private cancelHealthy: (() => void) | undefined;
  private stopped = false;

  constructor(options: ConsumerSupervisorOptions) {
    this.options = options;
    this.startConsumer = options.start;
    this.policy = { ...defaultRestartPolicy, ...options.policy };
    this.clock = options.clock ?? wallClock;
  }

  /**
   * (Re)starts the consumer. A failure is not thrown: it is reported and retried after the
   * backoff, as a crash is. Resolves when this attempt has succeeded or failed.
   */
  async start(): Promise<void> {
    if (this.stopped) return;
    this.cancelRestart?.();
    this.cancelRestart = undefined;
    try {
      await this.startConsumer();
    } catch (error) {
      this.failed(error instanceof Error ? error : new Error(String(error)));
      return;
    }
    if (this.stopped || this.phase === 'running') return;
    // A failure reported while this start ran (the consumer crashed at once) already rescheduled.
    if (this.cancelRestart) return;
    this.phase = 'recovering';
    this.cancelHealthy?.();
    this.cancelHealthy = this.clock.setTimeout(() => this.recovered(), this.policy.healthyAfterMs);
  }

  /** The running consumer stopped on an error. */
  crashed(error: Error): void {
    this.failed(error);
  }

  /** The consumer delivered records: a restarted one has shown that it works. */
  delivered(): void {
    if (this.phase === 'recovering') this.recovered();
  }

  /**
   * `failed` while the consumer is down or restarted and unproven, unless every failure since it
   * went down was retriable and either it has been down for less than the grace or one restart
   * brought it back.
   */
  health(): ConsumerHealth {
    const failure = this.failure;
    if (this.phase === 'running' || !failure) {
      return { state: 'running', failures: this.failures };
    }
    if (failure.transient) {
      const withinGrace = this.clock.now() - failure.since < this.policy.transientGraceMs;
      // Restarted after one retriable failure, and the restart joined its group and committed:
      // what failed (a coordinator that was loading, a dropped connection) is cured. On a quiet
      // topic it proves nothing more until healthyAfterMs, but it is not down. A restart that
      // failed again, or crashed again, did not cure it.
      const curedByOneRestart = this.phase === 'recovering' && this.streak <= 1;
      if (withinGrace || curedByOneRestart) return { state: 'running', failures: this.failures };
    }
    return { state: 'failed', failures: this.failures, error: failure.error, since: failure.since };
  }

  /**
   * Whether the consumer works now: not failed, not restarted and unproven. Silence while it does
   * not work says nothing about the topic, so no partition counts as idle meanwhile.
   */
  isUp(): boolean {
    return this.phase === 'running';
  }

  /** No more restarts (the channel is closing). */
  stop(): void {
    this.stopped = true;
    this.cancelRestart?.();
    this.cancelHealthy?.();
    this.cancelRestart = undefined;
    this.cancelHealthy = undefined;
  }

  private failed(error: Error): void {
    if (this.stopped) return;
    this.failures += 1;
    this.cancelHealthy?.();
    this.cancelHealthy = undefined;
    this.failure = {
      error,
      since: this.failure?.since ?? this.clock.now(),
      transient: (this.failure?.transient ?? true) && isRetriable(error),
    };
    this.phase = 'failed';
    if (this.cancelRestart) return; // one restart is already due; it reads the latest state
    const delay = Math.min(
      this.policy.maxBackoffMs,
      this.policy.initialBackoffMs * 2 ** Math.min(this.streak, 30),
    );
    this.streak += 1;
    this.cancelRestart = this.clock.setTimeout(() => {
      this.cancelRestart = undefined;
      void this.start();
    }, delay);
    this.options.onFailure?.(error, delay);
  }

  private recovered(): void {
    this.cancelHealthy?.();
    this.cancelHealthy = undefined;
    const since = this.failure?.since;
    this.phase = 'running';
    this.failure = undefined;
    this.streak = 0;
    if (since !== undefined) this.options.onRecovered?.(this.clock.now() - since);
  }
}
