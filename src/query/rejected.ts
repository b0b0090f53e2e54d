// How many of the offsets an answer accounts for were rejected records (too late, malformed, …):
// offsets counted once, but whose events no row holds. Each counted piece says it per partition
// and reason (its segment counted them as it consumed); offsets pending a segment on a receiver say
// it too. Pure. A piece or pending run that does not say (written before they were counted) makes
// its partitions' count not known rather than guessed.
import { type OffsetRange, addRange } from '../receiver/offset-ranges.ts';
import type { Piece } from './merge.ts';

/** Rejected records by reason. */
export type ReasonCounts = Record<string, number>;

/** Offsets a receiver consumed that sit in no segment yet, and the rejected records among them. */
export interface PendingRun {
  partition: number;
  ranges: OffsetRange[];
  /** Absent: the receiver does not know. */
  rejected?: ReasonCounts;
}

export interface PartitionRejected {
  /** Records rejected among the partition's accounted offsets, by reason, as far as known. */
  byReason: ReasonCounts;
  /** false: a counted piece or a pending run of the partition did not say. */
  known: boolean;
}

const overlaps = (a: OffsetRange[], b: OffsetRange[]): boolean =>
  a.some((x) => b.some((y) => x.from < y.to && y.from < x.to && x.from < x.to));
const inside = (a: OffsetRange[], held: OffsetRange[]): boolean =>
  a.every((x) => x.to <= x.from || held.some((h) => h.from <= x.from && x.to <= h.to));

/**
 * Per partition, the rejected records among the offsets of the `counted` pieces (each offset in
 * one of them) and of the `pending` runs. A run whose offsets a counted piece or an earlier run
 * holds already is another replica's view of them: left out when all are held, and the count not
 * known when only some are (a run's count cannot be split by offset).
 */
export function countRejected(
  counted: Pick<Piece<unknown>, 'ranges' | 'rejected'>[],
  pending: PendingRun[] = [],
): Map<number, PartitionRejected> {
  const out = new Map<number, PartitionRejected>();
  const of = (p: number): PartitionRejected => {
    let r = out.get(p);
    if (!r) out.set(p, (r = { byReason: {}, known: true }));
    return r;
  };
  const add = (p: number, counts: ReasonCounts): void => {
    const r = of(p);
    for (const [reason, n] of Object.entries(counts))
      if (n > 0) r.byReason[reason] = (r.byReason[reason] ?? 0) + n;
  };
  const accounted = new Map<number, OffsetRange[]>();
  for (const piece of counted)
    for (const [p, ranges] of piece.ranges) {
      const acc = accounted.get(p) ?? [];
      for (const r of ranges) addRange(acc, r.from, r.to);
      accounted.set(p, acc);
      if (!piece.rejected) of(p).known = false;
      else add(p, piece.rejected.get(p) ?? {});
    }
  for (const run of pending) {
    if (run.ranges.every((r) => r.to <= r.from)) continue;
    const held = accounted.get(run.partition) ?? [];
    if (inside(run.ranges, held)) continue;
    if (overlaps(run.ranges, held) || !run.rejected) of(run.partition).known = false;
    else add(run.partition, run.rejected);
    for (const r of run.ranges) addRange(held, r.from, r.to);
    accounted.set(run.partition, held);
  }
  return out;
}

/** The total of rejected records over every partition. */
export const totalRejected = (counts: Iterable<PartitionRejected>): number =>
  [...counts].reduce((n, c) => n + Object.values(c.byReason).reduce((a, b) => a + b, 0), 0);
