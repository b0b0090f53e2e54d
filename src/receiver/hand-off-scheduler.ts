// Hands sealed segments of one cube off to deep storage, one pass at a time, retrying a failed
// one with exponential backoff; remembers where each went and what failed, and when a handed-off
// segment's retention is over. A segment stays IMMUTABLE (held locally, in the checkpoint) until
// its hand-off succeeds: deep storage that is down delays hand-offs and loses nothing.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '../observability/logger.ts';
import { faultPoint, injectedFault } from '../observability/fault-injection.ts';
import { eachAtOnce } from './at-once.ts';
import type { DeepStorage } from './deep-storage.ts';
import { type HandOffTarget, handOffSegment } from './hand-off.ts';
import { type CommitOutcome, commitWindow, recordedHandOff } from './hand-off-commit.ts';
import type { ChannelMetrics } from './channel-metrics.ts';
import { type OffsetRange, rangesFromJson } from './offset-ranges.ts';
import type { Segment, SegmentManager } from './segments.ts';

export interface HandOffReport {
  attempts: number;
  path?: string;
  lastError?: string;
  /** When a failed hand-off is tried again (ISO-8601). */
  nextAttemptAt?: string;
  /** The window's commit record after this receiver's last commit of the window. */
  commit?: { outcome: 'committed' | 'covered' | 'behind' | 'fenced'; by: string; version: number };
}

/** Backoff between attempts of one segment: `initialMs` doubling up to `maxMs`. */
export interface HandOffRetryPolicy {
  initialMs: number;
  maxMs: number;
}

/**
 * Hand-offs of one pass under way at once. One at a time, a pass of thousands of segments (a
 * receiver that caught up on a backlog) takes a write's round trips and fsyncs per segment, which
 * overlap when several are in flight (bench:soak); more would crowd the thread pool every cube's
 * flush shares, or the object store's connections.
 */
const handOffsAtOnce = 4;

/**
 * Sealed segments waiting for their first hand-off beyond which hand-offs are behind, and ingest
 * waits (caughtUp): a receiver catching up on a backlog seals windows faster than it hands them
 * off, and would hold ever more of them, in memory and in its checkpoint (bench:soak).
 */
const maxAwaitingHandOff = 100;

/** How often a window handed off here but not known committed is looked at again. */
const recheckCommitMs = 10_000;
/**
 * A commit that finds a sibling's record holding offsets its copy lacks (`behind`) looks again
 * after each of these waits first (2026-12-05: with two replicas a set, one in five moves waited
 * out the whole recheck in Starting, 10.9 s, for a sibling's record written 11 ms after the look).
 */
const behindRetryMs = [25, 100, 250];

export const defaultHandOffRetry: HandOffRetryPolicy = { initialMs: 1_000, maxMs: 30_000 };

/** The wait after the `failures`-th failure in a row. */
export function handOffRetryDelay(policy: HandOffRetryPolicy, failures: number): number {
  return Math.min(policy.maxMs, policy.initialMs * 2 ** Math.max(0, failures - 1));
}

interface FailedHandOff {
  attempts: number;
  lastError?: string;
  /** Epoch ms before which the segment is not tried again. */
  notBefore: number;
}

export interface HandOffSchedulerOptions {
  storage: DeepStorage;
  target: HandOffTarget;
  segments: SegmentManager;
  metrics: ChannelMetrics;
  logger: Logger;
  /** How long a handed-off segment stays held (in memory and the checkpoint) after its hand-off. */
  retentionMs: number;
  /** Offsets lost right before the segment's ranges, for its manifest. */
  lostBefore: (segment: Segment) => Map<number, OffsetRange[]>;
  /** Called after each hand-off; the channel records it in its next checkpoint. */
  onHandedOff: (segment: Segment) => void;
  retry?: HandOffRetryPolicy;
  /** Epoch ms; a manual clock in unit tests. */
  now?: () => number;
}

export class HandOffScheduler {
  private readonly options: HandOffSchedulerOptions;
  /** By segment key, as the paths. */
  private readonly handOffErrors = new Map<number, FailedHandOff>();
  private readonly handOffPaths = new Map<number, string>();
  /** Segments written to deep storage whose commit has not succeeded yet (by key). */
  private readonly written = new Map<number, Segment>();
  /** Per window start: the last commit's outcome, and the commit under way (one at a time). */
  private readonly commits = new Map<number, CommitOutcome>();
  private readonly committing = new Map<number, Promise<unknown>>();
  /** Per window start: when a window not known committed was last looked at again. */
  private readonly rechecked = new Map<number, number>();
  /** The pass under way, if any. */
  private pass: Promise<void> | undefined;
  /** Aborts the writes of the pass under way when the channel closes. */
  private readonly aborter = new AbortController();
  /** Who waits for hand-offs to catch up: woken after each hand-off, and at stop. */
  private readonly caughtUpWaiters = new Set<() => void>();

  constructor(options: HandOffSchedulerOptions) {
    this.options = options;
  }

  private now(): number {
    return this.options.now?.() ?? Date.now();
  }

  private get cube(): string {
    return this.options.target.cube;
  }

  /** A hand-off recorded in a checkpoint. */
  restorePath(key: number, path: string): void {
    this.handOffPaths.set(key, path);
  }

  pathOf(key: number): string | undefined {
    return this.handOffPaths.get(key);
  }

  /** What the status says of a segment's hand-off, if anything. */
  report(key: number): HandOffReport | undefined {
    const handOff = this.handOffErrors.get(key);
    const path = this.handOffPaths.get(key);
    if (!handOff && !path) return undefined;
    const segment = this.options.segments.segments.get(key);
    const commit = segment && path ? this.commits.get(segment.windowStart) : undefined;
    return {
      attempts: handOff?.attempts ?? 1,
      ...(path ? { path } : {}),
      ...(commit
        ? {
            commit:
              commit.kind === 'committed'
                ? {
                    outcome: 'committed',
                    by: this.options.target.receiver,
                    version: commit.version,
                  }
                : { outcome: commit.kind, by: commit.by, version: commit.version },
          }
        : {}),
      ...(handOff?.lastError ? { lastError: handOff.lastError } : {}),
      ...(handOff && !path ? { nextAttemptAt: new Date(handOff.notBefore).toISOString() } : {}),
    };
  }

  /**
   * Hands off every IMMUTABLE segment whose backoff is over, a few at once; one that fails stays
   * IMMUTABLE for a later pass. A call while a pass runs waits for that pass and starts none.
   */
  handOffSealed(): Promise<void> {
    if (this.pass) return this.pass;
    if (this.aborter.signal.aborted) return Promise.resolve();
    const pass = this.runPass().finally(() => {
      this.pass = undefined;
    });
    this.pass = pass;
    return pass;
  }

  /** Aborts the pass under way (its segments stay IMMUTABLE) and waits for it to end. */
  async stop(): Promise<void> {
    this.aborter.abort();
    this.wakeCaughtUpWaiters();
    await this.pass;
  }

  /**
   * Whether more than `maxAwaitingHandOff` sealed segments wait for their first hand-off. One
   * whose hand-off failed does not count: deep storage that is down must not stop ingest (its
   * segments are held, and handed off once it is back).
   */
  behind(): boolean {
    let awaiting = 0;
    for (const s of this.options.segments.segments.values()) {
      if (s.state !== 'IMMUTABLE' || this.handOffErrors.has(s.key)) continue;
      awaiting += 1;
      if (awaiting > maxAwaitingHandOff) return true;
    }
    return false;
  }

  /**
   * Undefined when hand-offs are not behind; otherwise a promise that resolves once they are not,
   * or after `maxWaitMs`, or when the scheduler stops.
   */
  caughtUp(maxWaitMs: number): Promise<void> | undefined {
    if (!this.behind()) return undefined;
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.caughtUpWaiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, maxWaitMs);
      this.caughtUpWaiters.add(done);
    });
  }

  private wakeCaughtUpWaiters(): void {
    if (this.caughtUpWaiters.size === 0) return;
    if (!this.aborter.signal.aborted && this.behind()) return;
    for (const done of [...this.caughtUpWaiters]) done();
  }

  private async runPass(): Promise<void> {
    const held = [...this.options.segments.segments.values()];
    await eachAtOnce(held, handOffsAtOnce, (segment) => this.handOff(segment));
    await this.recheckCommits();
  }

  /**
   * Whether the window's hand-offs here are committed, by this replica's record or by a
   * sibling's covering at least as much: what coverage reports as handed off, and what retention
   * may purge.
   */
  committed(windowStart: number): boolean {
    const outcome = this.commits.get(windowStart)?.kind;
    return outcome === 'committed' || outcome === 'covered';
  }

  /**
   * Whether offsets `range` of `partition`, in this receiver's copy of a window, are committed:
   * the window is (by this copy or one covering it), or a sibling's record that this copy is
   * behind holds them. A set's data of a partition moved away is then committed, though no one
   * copy of the window covers the other's (replicas cut a window at different offsets).
   */
  committedRange(windowStart: number, partition: number, range: OffsetRange): boolean {
    if (this.committed(windowStart)) return true;
    const outcome = this.commits.get(windowStart);
    if (outcome?.kind !== 'behind') return false;
    return rangesFromJson(outcome.offsetRanges[String(partition)] ?? []).some(
      (r) => r.from <= range.from && range.to <= r.to,
    );
  }

  /**
   * Windows handed off here but not known committed — `behind` a sibling's record, or restored
   * from a checkpoint — are looked at again every `recheckCommitMs`: a sibling may have
   * committed more since, or (hand-offs of a release before commit records) nobody committed.
   */
  private async recheckCommits(): Promise<void> {
    const now = this.now();
    const due = new Set<number>();
    const held = new Set<number>();
    for (const s of this.options.segments.segments.values()) {
      held.add(s.windowStart);
      if (
        s.state === 'HANDED_OFF' &&
        !this.committed(s.windowStart) &&
        (this.rechecked.get(s.windowStart) ?? -Infinity) + recheckCommitMs <= now
      )
        due.add(s.windowStart);
    }
    // What is kept per window goes with the window's last segment (purged or fenced).
    for (const windowStart of [...this.commits.keys(), ...this.rechecked.keys()])
      if (!held.has(windowStart) && !this.committing.has(windowStart)) {
        this.commits.delete(windowStart);
        this.rechecked.delete(windowStart);
      }
    for (const windowStart of due) {
      if (this.aborter.signal.aborted) return;
      this.rechecked.set(windowStart, now);
      await this.commit(windowStart).catch((error: unknown) => {
        this.options.logger.warn('commit of a handed-off window failed; will retry', {
          cube: this.cube,
          windowStart,
          error: (error as Error).message,
        });
      });
    }
  }

  /**
   * Hands one segment off if it is IMMUTABLE and its backoff is over, as it is when its turn in
   * the pass comes; a failure is remembered with its backoff, not thrown.
   */
  private async handOff(segment: Segment): Promise<void> {
    if (this.aborter.signal.aborted || segment.state !== 'IMMUTABLE') return;
    const failed = this.handOffErrors.get(segment.key);
    if (failed && failed.notBefore > this.now()) return;
    try {
      await this.tryHandOff(segment, failed);
    } finally {
      this.wakeCaughtUpWaiters();
    }
  }

  private async tryHandOff(segment: Segment, failed: FailedHandOff | undefined): Promise<void> {
    const end = this.options.metrics.handOffTimer();
    try {
      // Test hook: a replica set whose deep storage refuses writes (inert in production).
      const fault = injectedFault(`hand-off-${this.options.target.replicaSet}`);
      if (fault) throw fault;
      const path = await handOffSegment(
        this.options.storage,
        this.options.target,
        segment,
        this.options.lostBefore(segment),
        this.aborter.signal,
      );
      this.written.set(segment.key, segment);
      faultPoint('after-hand-off');
      const committed = await this.commit(segment.windowStart);
      // Purged or replaced while it was written (the cube left): nothing to mark.
      if (this.options.segments.segments.get(segment.key) !== segment) return;
      this.options.segments.markHandedOff(segment, Date.now());
      this.handOffPaths.set(segment.key, path);
      this.handOffErrors.delete(segment.key);
      this.options.onHandedOff(segment);
      end();
      this.options.logger.info('segment handed off', {
        cube: this.cube,
        windowStart: segment.windowStart,
        path,
        commit: committed.kind,
        commitVersion: committed.version,
        ...(failed ? { attempts: failed.attempts + 1 } : {}),
      });
    } catch (error) {
      if (this.aborter.signal.aborted) return;
      const attempts = (failed?.attempts ?? 0) + 1;
      const retryInMs = handOffRetryDelay(this.options.retry ?? defaultHandOffRetry, attempts);
      const lastError = (error as Error).message;
      this.handOffErrors.set(segment.key, {
        attempts,
        lastError,
        notBefore: this.now() + retryInMs,
      });
      this.options.metrics.handOffFailed();
      this.options.logger.warn('hand-off failed; will retry', {
        cube: this.cube,
        windowStart: segment.windowStart,
        storage: this.options.storage.type,
        attempts,
        retryInMs,
        error: lastError,
      });
    }
  }

  /**
   * Commits this receiver's hand-offs of a window (every one written, held or not): one commit of
   * a window at a time here, so two generations handed off at once are listed together in one
   * version (the compare-and-set keeps it exact either way: a loser reads the winner and goes on).
   */
  private commit(windowStart: number): Promise<CommitOutcome> {
    const before = this.committing.get(windowStart) ?? Promise.resolve();
    const next = before
      .catch(() => undefined)
      .then(async () => {
        // By key: a written segment is held too until it is purged.
        const ofWindow = new Map<number, Segment>();
        for (const s of this.options.segments.segments.values())
          if (s.windowStart === windowStart && s.state === 'HANDED_OFF') ofWindow.set(s.key, s);
        for (const s of this.written.values())
          if (s.windowStart === windowStart) ofWindow.set(s.key, s);
        const mine = [...ofWindow.values()].map((s) =>
          recordedHandOff(this.options.target, s, this.options.lostBefore(s)),
        );
        const attempt = () =>
          commitWindow({
            storage: this.options.storage,
            target: this.options.target,
            windowStart,
            mine,
            signal: this.aborter.signal,
          });
        let outcome = await attempt();
        // Behind a sibling's record: the replicas of a set release and hand off the same window
        // together, and the sibling whose record holds more is then often committing what this
        // copy holds too, a few milliseconds later. Looked at again shortly, before the recheck's
        // `recheckCommitMs` (a move's targets wait for this commit).
        for (const waitMs of behindRetryMs) {
          if (outcome.kind !== 'behind' || this.aborter.signal.aborted) break;
          await sleep(waitMs, undefined, { signal: this.aborter.signal }).catch(() => undefined);
          if (this.aborter.signal.aborted) break;
          outcome = await attempt();
        }
        this.commits.set(windowStart, outcome);
        this.options.metrics.commitOutcome(outcome.kind);
        for (const [key, s] of this.written)
          if (s.windowStart === windowStart) this.written.delete(key);
        return outcome;
      });
    this.committing.set(windowStart, next);
    void next
      .finally(() => {
        if (this.committing.get(windowStart) === next) this.committing.delete(windowStart);
      })
      .catch(() => undefined);
    return next;
  }

  /** Handed-off segments whose retention is over at `now`: the channel purges them. */
  expired(now: number): Segment[] {
    const due: Segment[] = [];
    for (const s of this.options.segments.segments.values()) {
      if (
        s.state === 'HANDED_OFF' &&
        (s.handedOffAt ?? now) + this.options.retentionMs <= now &&
        // A copy not known committed stays until it is (or a sibling's covers it).
        this.committed(s.windowStart)
      )
        due.push(s);
    }
    return due;
  }

  /** Forgets a purged segment (its window's commit outcome goes at the next pass). */
  forget(key: number): void {
    this.handOffPaths.delete(key);
    this.handOffErrors.delete(key);
    this.written.delete(key);
  }
}
