// The journal's moves read by side: partitions by source set, by target set, and the stop offsets
// a drain or a release sends.
import type { ReassignJournal } from '../../api/cube-assignment.ts';

/** The moving partitions by source replica set (moves without a source left out). */
export function bySource(journal: Pick<ReassignJournal, 'moves'>): Map<string, number[]> {
  const out = new Map<string, number[]>();
  for (const m of journal.moves) {
    if (m.from === undefined) continue;
    out.set(m.from, [...(out.get(m.from) ?? []), m.partition]);
  }
  return out;
}

/** The moving partitions by target replica set. */
export function byTarget(journal: Pick<ReassignJournal, 'moves'>): Map<string, number[]> {
  const out = new Map<string, number[]>();
  for (const m of journal.moves) out.set(m.to, [...(out.get(m.to) ?? []), m.partition]);
  return out;
}

/** The move's sources, but for those lost in Starting (journal.lostSets): fenced instead. */
export function liveSources(
  journal: Pick<ReassignJournal, 'moves' | 'lostSets'>,
): Map<string, number[]> {
  const lost = new Set(journal.lostSets?.replicaSets ?? []);
  return new Map([...bySource(journal)].filter(([rs]) => !lost.has(rs)));
}

/** The journal's stop offsets of `partitions`, as a drain or a release sends them. */
export function stopsOf(
  journal: Pick<ReassignJournal, 'stopOffsets'>,
  partitions: number[],
): Record<string, string> {
  return Object.fromEntries(
    partitions.map((p) => [String(p), journal.stopOffsets?.[String(p)] ?? '0']),
  );
}

/**
 * Where a moving partition's target starts: the stop offset, or for an offset reset
 * (journal.reset) the reset's target, the sources having stopped at the stop offset.
 */
export function startOf(
  journal: Pick<ReassignJournal, 'stopOffsets' | 'reset'>,
  partition: number,
): string {
  return (
    journal.reset?.targets[String(partition)] ?? journal.stopOffsets?.[String(partition)] ?? '0'
  );
}

/**
 * Of an offset reset's partitions (journal.reset), those a replica already holds under the epoch
 * the reset starts (its report's epoch past status.epochs): Starting restarted them there before
 * an operator stopped. Its source and target are the same replica set, so a release repeated on
 * them would release the new epoch. Empty for any other journal.
 */
export function restartedByReset(
  journal: Pick<ReassignJournal, 'reset'>,
  epochs: Record<string, number> | undefined,
  reported: readonly { partition: number; epoch: number }[],
  partitions: readonly number[],
): number[] {
  if (!journal.reset) return [];
  return reported
    .filter(
      (p) => partitions.includes(p.partition) && p.epoch > (epochs?.[String(p.partition)] ?? 0),
    )
    .map((p) => p.partition);
}
