// Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection package does
// it: a lease counts as held while its record keeps changing, timed by the local clock (never by
// the holder's timestamps, so clock skew between machines does not matter), updates are guarded by
// resourceVersion, and a leader that stops releases the lease so a successor takes over at once.
import {
  ApiException,
  Observable,
  V1MicroTime,
  type ConfigurationOptions,
  type CoordinationV1Api,
  type ObservableMiddleware,
  type V1Lease,
} from '@kubernetes/client-node';
import type { Gauge, Registry } from 'prom-client';
import { sharedGauge } from '../../observability/metrics.ts';
import { systemClock, type Clock } from './clock.ts';
import { describeError, silentLogger, type RuntimeLogger } from './logger.ts';

export interface LeaderElectionCallbacks {
  /**
   * This process leads from now on; `signal` aborts when it stops leading (lease lost or
   * `stop()`). Return the promise of the work started here: a graceful `stop()` waits for it
   * before releasing the lease, so a successor never overlaps with it. `term` is the Lease's
   * leaseTransitions as this process took it: it grows with every change of holder, so a later
   * leader's term is higher (receivers fence calls by it).
   */
  onStartedLeading(signal: AbortSignal, term: number): void | Promise<void>;
  /** Called once after leading ended (not when this process never led). */
  onStoppedLeading?(): void;
  /** The lease holder changed (this process included). */
  onNewLeader?(identity: string): void;
}

export interface LeaderElectorOptions {
  api: CoordinationV1Api;
  namespace: string;
  /** Name of the Lease object; also the `name` label of `leader_election_master_status`. */
  name: string;
  /** Unique per process (e.g. pod name plus a random suffix). */
  identity: string;
  callbacks: LeaderElectionCallbacks;
  registry: Registry;
  /** How long a lease holds without renewal, in whole seconds' worth of ms; default 15 000. */
  leaseDurationMs?: number;
  /** How long the leader keeps retrying a renewal before it gives up leading; default 10 000. */
  renewDeadlineMs?: number;
  /** Time between attempts; default 2 000. */
  retryPeriodMs?: number;
  logger?: RuntimeLogger;
  clock?: Clock;
}

interface LeaseRecord {
  holderIdentity: string;
  leaseDurationSeconds: number;
  acquireTime: V1MicroTime | undefined;
  renewTime: V1MicroTime | undefined;
  leaseTransitions: number;
}

// client-go's JitterFactor: acquisition attempts are spread over [retry, 2.2·retry].
const jitterFactor = 1.2;

export class LeaderElector {
  private readonly api: CoordinationV1Api;
  private readonly namespace: string;
  private readonly name: string;
  private readonly identity: string;
  private readonly callbacks: LeaderElectionCallbacks;
  private readonly leaseDurationMs: number;
  private readonly renewDeadlineMs: number;
  private readonly retryPeriodMs: number;
  private readonly logger: RuntimeLogger;
  private readonly clock: Clock;
  private readonly masterStatus: Gauge<'name'>;

  /** The Lease as last read or written; its resourceVersion guards the next update. */
  private lease: V1Lease | undefined;
  private observed: LeaseRecord | undefined;
  private observedResourceVersion: string | undefined;
  /** Local time at which the observed record last changed. */
  private observedTime = 0;
  private reportedLeader = '';
  private leading: AbortController | undefined;
  private readonly stopping = new AbortController();
  private releaseOnStop = true;
  private running: Promise<void> | undefined;

  constructor(options: LeaderElectorOptions) {
    this.api = options.api;
    this.namespace = options.namespace;
    this.name = options.name;
    this.identity = options.identity;
    this.callbacks = options.callbacks;
    this.leaseDurationMs = options.leaseDurationMs ?? 15_000;
    this.renewDeadlineMs = options.renewDeadlineMs ?? 10_000;
    this.retryPeriodMs = options.retryPeriodMs ?? 2_000;
    this.logger = options.logger ?? silentLogger;
    this.clock = options.clock ?? systemClock;
    if (this.identity === '') throw new Error('leader election: identity must not be empty');
    if (!Number.isInteger(this.leaseDurationMs / 1000) || this.leaseDurationMs < 1000) {
      throw new Error(
        `leader election: leaseDurationMs must be whole seconds (a Lease holds seconds), got ${this.leaseDurationMs}`,
      );
    }
    if (this.leaseDurationMs <= this.renewDeadlineMs) {
      throw new Error('leader election: leaseDurationMs must be greater than renewDeadlineMs');
    }
    if (this.renewDeadlineMs <= jitterFactor * this.retryPeriodMs || this.retryPeriodMs <= 0) {
      throw new Error(
        `leader election: renewDeadlineMs must be greater than ${jitterFactor} × retryPeriodMs`,
      );
    }
    this.masterStatus = sharedGauge(options.registry, {
      name: 'leader_election_master_status',
      help: 'Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master',
      labelNames: ['name'],
    });
    this.masterStatus.set({ name: this.name }, 0);
  }

  /**
   * Campaigns for the lease, leads while it holds it, and resolves when this elector is done:
   * after `stop()`, or once leadership is lost (an elector does not campaign again; the usual
   * answer to a lost lease is to exit the process).
   */
  run(): Promise<void> {
    this.running ??= this.campaign();
    return this.running;
  }

  /**
   * Stops campaigning or leading and waits until done. With `release` (the default) a leader
   * first waits for the work `onStartedLeading` returned, then clears the lease's holder so a
   * successor takes over at once; without it the lease simply expires, as if the process died.
   */
  async stop(options: { release?: boolean } = {}): Promise<void> {
    if (!this.stopping.signal.aborted) {
      this.releaseOnStop = options.release ?? true;
      this.stopping.abort();
    }
    await this.running;
  }

  /** True between `onStartedLeading` and the abort of its signal. */
  isLeader(): boolean {
    return this.leading !== undefined;
  }

  /** The holder of the lease as last observed ('' when none). */
  leader(): string {
    return this.reportedLeader;
  }

  private async campaign(): Promise<void> {
    this.logger.info('campaigning for leader lease', this.describe());
    while (!this.stopping.signal.aborted) {
      const acquired = await this.tryAcquireOrRenew(this.renewDeadlineMs);
      this.reportTransition();
      if (acquired) {
        await this.lead();
        return;
      }
      await this.sleep(this.retryPeriodMs * (1 + Math.random() * jitterFactor));
    }
  }

  private async lead(): Promise<void> {
    this.logger.info('acquired leader lease', this.describe());
    if (this.stopping.signal.aborted) {
      // Acquired by the attempt that was in flight when stop() came: hand it straight back.
      if (this.releaseOnStop) await this.release();
      return;
    }
    const leading = new AbortController();
    this.leading = leading;
    this.masterStatus.set({ name: this.name }, 1);
    let work: Promise<void> | undefined;
    try {
      const started = this.callbacks.onStartedLeading(
        leading.signal,
        this.observed?.leaseTransitions ?? 0,
      );
      if (started !== undefined) {
        work = started.catch((error: unknown) => this.logFailure('leader work failed', error));
      }
    } catch (error) {
      this.logFailure('onStartedLeading failed', error);
    }
    await this.keepRenewing();

    const stopped = this.stopping.signal.aborted;
    this.leading = undefined;
    this.masterStatus.set({ name: this.name }, 0);
    leading.abort(new Error(stopped ? 'leader election stopped' : 'leader lease lost'));
    if (stopped) {
      await work;
      if (this.releaseOnStop) await this.release();
    } else {
      this.logger.error('lost leader lease: failed to renew it within the renew deadline', {
        ...this.describe(),
        renewDeadlineMs: this.renewDeadlineMs,
      });
    }
    try {
      this.callbacks.onStoppedLeading?.();
    } catch (error) {
      this.logFailure('onStoppedLeading failed', error);
    }
  }

  /** Renews every retry period; returns when stopped or when a renewal missed its deadline. */
  private async keepRenewing(): Promise<void> {
    while (!this.stopping.signal.aborted) {
      const deadline = this.clock.now() + this.renewDeadlineMs;
      let renewed: boolean;
      for (;;) {
        renewed = await this.tryAcquireOrRenew(deadline - this.clock.now());
        if (renewed || this.stopping.signal.aborted) break;
        // Another holder took the lease (this process was stopped or cut off past the lease):
        // nothing will give it back, so leading ends now, not at the renew deadline.
        if (this.observed !== undefined && !this.holdsLease()) break;
        const remaining = deadline - this.clock.now();
        if (remaining <= 0) break;
        await this.sleep(Math.min(this.retryPeriodMs, remaining));
        if (deadline - this.clock.now() <= 0) break;
      }
      this.reportTransition();
      if (!renewed) return;
      await this.sleep(this.retryPeriodMs);
    }
  }

  /**
   * One attempt to take or keep the lease (client-go's tryAcquireOrRenew). The calls it makes are
   * cut off after `deadlineMs`, not by `stop()`: an update the server applied must not be missed.
   */
  private async tryAcquireOrRenew(deadlineMs: number): Promise<boolean> {
    if (deadlineMs <= 0) return false;
    const deadline = new AbortController();
    const cancelDeadline = this.clock.setTimeout(
      () => deadline.abort(new Error(`lease call exceeded ${Math.round(deadlineMs)} ms`)),
      deadlineMs,
    );
    const options = abortWith(deadline.signal);
    try {
      return await this.acquireOrRenew(options);
    } finally {
      cancelDeadline();
    }
  }

  private async acquireOrRenew(options: ConfigurationOptions): Promise<boolean> {
    const now = this.clock.now();
    const wallNow = new V1MicroTime();
    const leaseDurationSeconds = this.leaseDurationMs / 1000;

    // The leader renews from its cached copy; a conflict means the lease changed under it.
    if (this.holdsLease() && this.isLeaseValid(now) && this.lease !== undefined && this.observed) {
      try {
        await this.writeLease(
          this.lease,
          {
            ...this.observed,
            holderIdentity: this.identity,
            leaseDurationSeconds,
            renewTime: wallNow,
          },
          options,
        );
        return true;
      } catch (error) {
        this.logger.debug('optimistic lease renewal failed; reading the lease', {
          ...this.describe(),
          error: describeError(error),
        });
      }
    }

    const desired: LeaseRecord = {
      holderIdentity: this.identity,
      leaseDurationSeconds,
      acquireTime: wallNow,
      renewTime: wallNow,
      leaseTransitions: 0,
    };
    let current: V1Lease;
    try {
      current = await this.api.readNamespacedLease(
        { name: this.name, namespace: this.namespace },
        options,
      );
    } catch (error) {
      if (!hasStatus(error, 404)) {
        this.logger.warn('reading the leader lease failed', {
          ...this.describe(),
          error: describeError(error),
        });
        return false;
      }
      try {
        this.remember(
          await this.api.createNamespacedLease(
            {
              namespace: this.namespace,
              body: {
                metadata: { name: this.name, namespace: this.namespace },
                spec: leaseSpec(desired),
              },
            },
            options,
          ),
        );
        return true;
      } catch (createError) {
        // 409: another candidate created it first.
        this.logSoft('creating the leader lease failed', createError);
        return false;
      }
    }

    this.lease = current;
    const record = recordOf(current);
    if (current.metadata?.resourceVersion !== this.observedResourceVersion) {
      this.observed = record;
      this.observedResourceVersion = current.metadata?.resourceVersion;
      this.observedTime = this.clock.now();
    }
    if (record.holderIdentity !== '' && this.isLeaseValid(now) && !this.holdsLease()) return false;

    if (this.holdsLease()) {
      desired.acquireTime = record.acquireTime;
      desired.leaseTransitions = record.leaseTransitions;
    } else {
      desired.leaseTransitions = record.leaseTransitions + 1;
    }
    try {
      await this.writeLease(current, desired, options);
      return true;
    } catch (error) {
      // 409: another candidate updated it first; this attempt lost the race.
      this.logSoft('updating the leader lease failed', error);
      return false;
    }
  }

  /** Clears the holder (lease duration 1 s, as client-go does) so that a successor need not wait. */
  private async release(): Promise<void> {
    if (!this.holdsLease() || this.lease === undefined || this.observed === undefined) return;
    const now = new V1MicroTime();
    const deadline = AbortSignal.timeout(this.renewDeadlineMs);
    try {
      await this.writeLease(
        this.lease,
        {
          holderIdentity: '',
          leaseDurationSeconds: 1,
          acquireTime: now,
          renewTime: now,
          leaseTransitions: this.observed.leaseTransitions,
        },
        abortWith(deadline),
      );
      this.reportTransition();
      this.logger.info('released leader lease', this.describe());
    } catch (error) {
      this.logger.warn('releasing the leader lease failed; it will expire instead', {
        ...this.describe(),
        error: describeError(error),
      });
    }
  }

  private async writeLease(
    base: V1Lease,
    record: LeaseRecord,
    options: ConfigurationOptions,
  ): Promise<void> {
    const updated = await this.api.replaceNamespacedLease(
      {
        name: this.name,
        namespace: this.namespace,
        body: { ...base, spec: leaseSpec(record) },
      },
      options,
    );
    this.remember(updated);
  }

  private remember(lease: V1Lease): void {
    this.lease = lease;
    this.observed = recordOf(lease);
    this.observedResourceVersion = lease.metadata?.resourceVersion;
    this.observedTime = this.clock.now();
  }

  private holdsLease(): boolean {
    return this.observed?.holderIdentity === this.identity;
  }

  private isLeaseValid(now: number): boolean {
    return (
      this.observed !== undefined &&
      this.observedTime + this.observed.leaseDurationSeconds * 1000 > now
    );
  }

  private reportTransition(): void {
    const holder = this.observed?.holderIdentity ?? '';
    if (holder === this.reportedLeader) return;
    this.reportedLeader = holder;
    if (holder === '') return;
    this.logger.info('new leader observed', { ...this.describe(), leader: holder });
    try {
      this.callbacks.onNewLeader?.(holder);
    } catch (error) {
      this.logFailure('onNewLeader failed', error);
    }
  }

  private logFailure(message: string, error: unknown): void {
    this.logger.error(message, { ...this.describe(), error: describeError(error) });
  }

  private logSoft(message: string, error: unknown): void {
    const fields = { ...this.describe(), error: describeError(error) };
    if (hasStatus(error, 409)) this.logger.debug(message, fields);
    else this.logger.warn(message, fields);
  }

  private sleep(ms: number): Promise<void> {
    const signal = this.stopping.signal;
    if (signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const wake = (): void => {
        cancel();
        signal.removeEventListener('abort', wake);
        resolve();
      };
      const cancel = this.clock.setTimeout(wake, ms);
      signal.addEventListener('abort', wake, { once: true });
    });
  }

  private describe(): Record<string, unknown> {
    return { lease: `${this.namespace}/${this.name}`, identity: this.identity };
  }
}

function leaseSpec(record: LeaseRecord): NonNullable<V1Lease['spec']> {
  return {
    holderIdentity: record.holderIdentity,
    leaseDurationSeconds: record.leaseDurationSeconds,
    acquireTime: record.acquireTime,
    renewTime: record.renewTime,
    leaseTransitions: record.leaseTransitions,
  };
}

function recordOf(lease: V1Lease): LeaseRecord {
  const spec = lease.spec ?? {};
  return {
    holderIdentity: spec.holderIdentity ?? '',
    leaseDurationSeconds: spec.leaseDurationSeconds ?? 0,
    acquireTime: microTime(spec.acquireTime),
    renewTime: microTime(spec.renewTime),
    leaseTransitions: spec.leaseTransitions ?? 0,
  };
}

// The generated client leaves MicroTime fields of a response as strings (V1MicroTime is no model
// it knows), while a request needs a V1MicroTime to be written with microseconds.
function microTime(value: unknown): V1MicroTime | undefined {
  if (value instanceof Date) return new V1MicroTime(value.getTime());
  if (typeof value === 'string' && !Number.isNaN(Date.parse(value))) {
    return new V1MicroTime(Date.parse(value));
  }
  return undefined;
}

function hasStatus(error: unknown, code: number): boolean {
  return error instanceof ApiException && error.code === code;
}

/** Request options that cut the call off when `signal` aborts. */
function abortWith(signal: AbortSignal): ConfigurationOptions {
  const middleware: ObservableMiddleware = {
    pre: (context) => {
      context.setSignal(signal);
      return new Observable(Promise.resolve(context));
    },
    post: (response) => new Observable(Promise.resolve(response)),
  };
  return { middleware: [middleware], middlewareMergeStrategy: 'append' };
}
