// Offsets a cube never read because Kafka deleted them (retention, deleteRecords) before this
// receiver got to them: the client found its position below the partition's log start and had to
// jump to it. Kept per partition for the cube's life on this receiver (checkpointed, like the
// rejected counts), reported in its status and never tiled as consumed.
import { maxListedLostRanges } from '../protocol/admin-api.ts';
import { type OffsetRange, type RangeJson, rangesFromJson, rangesToJson } from './offset-ranges.ts';

export interface LostOffsetsJson {
  /** Offsets lost in all, as a decimal string. */
  total: string;
  /** The latest ranges, oldest first. */
  ranges: RangeJson[];
}

/** Ranges kept per partition (checkpointed), for the segments that follow them. */
const keptLostRanges = 100;

export class LostOffsets {
  private readonly byPartition = new Map<number, { total: bigint; ranges: OffsetRange[] }>();

  /** Records [from, to) as lost; returns how many offsets that is (0 for an empty range). */
  record(partition: number, from: bigint, to: bigint): bigint {
    if (to <= from) return 0n;
    const entry = this.byPartition.get(partition) ?? { total: 0n, ranges: [] };
    this.byPartition.set(partition, entry);
    const last = entry.ranges[entry.ranges.length - 1];
    if (last && last.to === from) last.to = to;
    else entry.ranges.push({ from, to });
    if (entry.ranges.length > keptLostRanges) entry.ranges.shift();
    entry.total += to - from;
    return to - from;
  }

  /** What a status shows: the total and the latest ranges. */
  of(partition: number): LostOffsetsJson | undefined {
    const entry = this.byPartition.get(partition);
    return (
      entry && {
        total: entry.total.toString(),
        ranges: rangesToJson(entry.ranges.slice(-maxListedLostRanges)),
      }
    );
  }

  /**
   * The lost ranges a segment's offset ranges continue from: reading went on at a lost range's
   * end, so the segment holding that offset names the range, and the ranges of the segments with
   * theirs tile the log.
   */
  before(segmentRanges: ReadonlyMap<number, readonly OffsetRange[]>): Map<number, OffsetRange[]> {
    const found = new Map<number, OffsetRange[]>();
    for (const [p, ranges] of segmentRanges) {
      const lost = (this.byPartition.get(p)?.ranges ?? []).filter((l) =>
        ranges.some((r) => r.from <= l.to && l.to < r.to),
      );
      if (lost.length > 0) found.set(p, lost);
    }
    return found;
  }

  toJson(): Record<string, LostOffsetsJson> {
    return Object.fromEntries(
      [...this.byPartition].map(([p, e]) => [
        String(p),
        { total: e.total.toString(), ranges: rangesToJson(e.ranges) },
      ]),
    );
  }

  restore(json: Record<string, LostOffsetsJson> | undefined): void {
    for (const [p, { total, ranges }] of Object.entries(json ?? {})) {
      this.byPartition.set(Number(p), { total: BigInt(total), ranges: rangesFromJson(ranges) });
    }
  }
}
