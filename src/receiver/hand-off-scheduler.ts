// Hands sealed segments of one cube off to deep storage, one pass at a time, retrying a failed
// one on the next pass; remembers where each went and what failed, and when a handed-off segment's
// retention is over.
import type { Logger } from '../observability/logger.ts';
import { faultPoint } from '../observability/fault-injection.ts';
import { type HandOffTarget, handOffSegment } from './hand-off.ts';
import type { ChannelMetrics } from './channel-metrics.ts';
import type { OffsetRange } from './offset-ranges.ts';
import type { Segment, SegmentManager } from './segments.ts';

export interface HandOffReport {
  attempts: number;
  path?: string;
  lastError?: string;
}

export interface HandOffSchedulerOptions {
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
}

export class HandOffScheduler {
  private readonly options: HandOffSchedulerOptions;
  private readonly handOffErrors = new Map<number, { attempts: number; lastError?: string }>();
  private readonly handOffPaths = new Map<number, string>();
  private handingOff = false;

  constructor(options: HandOffSchedulerOptions) {
    this.options = options;
  }

  private get cube(): string {
    return this.options.target.cube;
  }

  /** A hand-off recorded in a checkpoint. */
  restorePath(windowStart: number, path: string): void {
    this.handOffPaths.set(windowStart, path);
  }

  pathOf(windowStart: number): string | undefined {
    return this.handOffPaths.get(windowStart);
  }

  /** What the status says of a segment's hand-off, if anything. */
  report(windowStart: number): HandOffReport | undefined {
    const handOff = this.handOffErrors.get(windowStart);
    const path = this.handOffPaths.get(windowStart);
    if (!handOff && !path) return undefined;
    return {
      attempts: handOff?.attempts ?? 1,
      ...(path ? { path } : {}),
      ...(handOff?.lastError ? { lastError: handOff.lastError } : {}),
    };
  }

  /** Hands off every IMMUTABLE segment; one that fails stays IMMUTABLE for the next pass. */
  handOffSealed(): void {
    if (this.handingOff) return;
    this.handingOff = true;
    try {
      for (const segment of this.options.segments.segments.values()) {
        if (segment.state !== 'IMMUTABLE') continue;
        const end = this.options.metrics.handOffTimer();
        try {
          const path = handOffSegment(
            this.options.target,
            segment,
            this.options.lostBefore(segment),
          );
          faultPoint('after-hand-off');
          this.options.segments.markHandedOff(segment, Date.now());
          this.handOffPaths.set(segment.windowStart, path);
          this.handOffErrors.delete(segment.windowStart);
          this.options.onHandedOff(segment);
          end();
          this.options.logger.info('segment handed off', {
            cube: this.cube,
            windowStart: segment.windowStart,
            path,
          });
        } catch (error) {
          const e = this.handOffErrors.get(segment.windowStart) ?? { attempts: 0 };
          e.attempts += 1;
          e.lastError = (error as Error).message;
          this.handOffErrors.set(segment.windowStart, e);
          this.options.metrics.handOffFailed();
          this.options.logger.warn('hand-off failed; will retry', {
            cube: this.cube,
            windowStart: segment.windowStart,
            error: e.lastError,
          });
        }
      }
    } finally {
      this.handingOff = false;
    }
  }

  /** Handed-off segments whose retention is over at `now`: the channel purges them. */
  expired(now: number): Segment[] {
    const due: Segment[] = [];
    for (const s of this.options.segments.segments.values()) {
      if (s.state === 'HANDED_OFF' && (s.handedOffAt ?? now) + this.options.retentionMs <= now)
        due.push(s);
    }
    return due;
  }

  /** Forgets a purged segment. */
  forget(windowStart: number): void {
    this.handOffPaths.delete(windowStart);
    this.handOffErrors.delete(windowStart);
  }
}
