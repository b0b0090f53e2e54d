// Keeps one cube's segments: seals windows every partition has passed and those a release leaves
// behind, purges handed-off segments past their retention, and fences the excess of a release.
import type { Logger } from '../observability/logger.ts';
import type { ChannelMetrics } from './channel-metrics.ts';
import type { CheckpointWriter } from './checkpoint-writer.ts';
import type { HandOffScheduler } from './hand-off-scheduler.ts';
import { type PartitionState, isIdle } from './partition-state.ts';
import type { PartitionTable } from './partition-table.ts';
import type { Segment, SegmentManager } from './segments.ts';

/** Whether the segment holds offsets of any of `partitions`. */
export function holdsAnyOf(
  segment: Pick<Segment, 'ranges'>,
  partitions: readonly number[],
): boolean {
  return partitions.some((p) => (segment.ranges.get(p)?.length ?? 0) > 0);
}

export interface SegmentUpkeepOptions {
  cube: string;
  segments: SegmentManager;
  partitions: PartitionTable;
  handOffs: Pick<HandOffScheduler, 'committed' | 'expired' | 'forget'>;
  checkpoints: Pick<CheckpointWriter, 'markChanged' | 'forget'>;
  metrics: Pick<ChannelMetrics, 'segmentFenced'>;
  logger: Logger;
  idleTimeoutMs: number;
  /** Whether the consumer works: one that is down or just restarted delivers nothing. */
  consumerUp: () => boolean;
}

export class SegmentUpkeep {
  private readonly options: SegmentUpkeepOptions;

  constructor(options: SegmentUpkeepOptions) {
    this.options = options;
  }

  private get log(): Logger {
    return this.options.logger;
  }

  /** Seals the windows every assigned partition has passed, an idle one counting as passed. */
  sealReadyWindows(): void {
    const { segments, partitions, idleTimeoutMs } = this.options;
    const owned = partitions.assigned().map((p) => p.partition);
    if (owned.length === 0) return;
    const now = Date.now();
    // A consumer that is down or just restarted delivers nothing: its partitions are not silent.
    const consumerUp = this.options.consumerUp();
    const idle = (p: number): boolean => {
      const ps = partitions.get(p);
      return !ps || (consumerUp && isIdle(ps, now, idleTimeoutMs));
    };
    for (const segment of segments.sealableWindows(owned, idle)) {
      segments.seal(segment);
      this.options.checkpoints.markChanged();
      this.log.info('window sealed', {
        cube: this.options.cube,
        windowStart: new Date(segment.windowStart).toISOString(),
      });
    }
  }

  /**
   * Seals every ACTIVE segment holding offsets of partitions just released, so that this
   * replica's data of them is handed off and committed now rather than when their windows close
   * (the windows stay open for the partitions kept: their later events open the next
   * generation). Data of a partition moved away that its old set has not committed is what keeps
   * that set from being failed over; sealed at the release, it is committed within a hand-off.
   */
  sealReleased(partitions: number[]): boolean {
    const { segments } = this.options;
    let sealed = false;
    for (const segment of [...segments.segments.values()]) {
      if (segment.state !== 'ACTIVE') continue;
      if (!holdsAnyOf(segment, partitions)) continue;
      segments.seal(segment);
      this.options.checkpoints.markChanged();
      sealed = true;
      this.log.info('window sealed at a release', {
        cube: this.options.cube,
        windowStart: new Date(segment.windowStart).toISOString(),
        partitions,
      });
    }
    return sealed;
  }

  /** Seals every ACTIVE segment: the cube is sealed. */
  sealAll(): void {
    const { segments } = this.options;
    for (const s of segments.segments.values()) if (s.state === 'ACTIVE') segments.seal(s);
  }

  /** Handed-off segments past their retention leave memory and, at the next flush, the disk. */
  purgeExpired(): void {
    for (const segment of this.options.handOffs.expired(Date.now())) {
      this.options.segments.purge(segment);
      this.forget(segment);
      this.options.checkpoints.markChanged();
    }
  }

  /**
   * The partition ran past the offset its next owner starts from (`stopOffset`), under an epoch
   * that is over: every segment holding any of its offsets from there on is dropped, never handed
   * off, so the excess is never committed twice. The replica's copy of those windows goes with
   * them (its siblings, which the move stopped in time, hold theirs). A handed-off copy no commit
   * record names is dropped too (a fenced replica set's: a fence keeps it so); one committed
   * already cannot be taken back: that is logged as an error.
   */
  fenceExcess(ps: PartitionState): void {
    const { cube, segments, handOffs } = this.options;
    const stop = ps.stopOffset;
    if (stop === null) return;
    for (const segment of segments.holdingFrom(ps.partition, stop)) {
      // A handed-off copy no commit record names (a fenced replica set's) is never the data.
      if (segment.state === 'HANDED_OFF' && handOffs.committed(segment.windowStart)) {
        this.log.error('a handed-off segment holds offsets past a stop offset', {
          cube,
          partition: ps.partition,
          epoch: ps.epoch,
          stopOffset: stop.toString(),
          windowStart: new Date(segment.windowStart).toISOString(),
        });
        continue;
      }
      segments.discard(segment);
      this.forget(segment);
      this.options.metrics.segmentFenced();
    }
    this.options.checkpoints.markChanged();
    this.log.warn('partition released past its stop offset: segments holding the excess fenced', {
      cube,
      partition: ps.partition,
      epoch: ps.epoch,
      stopOffset: stop.toString(),
      position: ps.position.toString(),
    });
  }

  /** What is kept beside a segment no longer held: its hand-off and its fragments. */
  private forget(segment: Segment): void {
    this.options.handOffs.forget(segment.key);
    this.options.checkpoints.forget(segment.key);
  }
}
