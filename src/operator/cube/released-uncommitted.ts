// Partitions a replica set no longer owns of which it keeps data not committed yet (moved away
// within its windows still open). A failover re-reads only the partitions a lost set owns, and
// the fence keeps its copies of those from being committed: so a set keeping such data is not
// failed over (FailoverBlocked) until that data is committed.
import type { CubeSummary } from '../../protocol/admin-api.ts';
import { keptUncommitted } from '../reassign/index.ts';

/**
 * Partitions `owned` lacks of which any of the reports keeps offsets not handed off and committed
 * (coverage kept beyond handedOff): a set's data of partitions moved away, still to be committed.
 */
export function partitionsReleasedUncommitted(
  reports: Pick<CubeSummary, 'coverage' | 'partitions'>[],
  owned: readonly number[],
): number[] {
  const out = new Set<number>();
  for (const report of reports) {
    const released = Object.keys(report.coverage ?? {})
      .map(Number)
      .filter((p) => !owned.includes(p));
    for (const p of keptUncommitted(report.coverage, released)) out.add(p);
  }
  return [...out].sort((a, b) => a - b);
}

/**
 * The merge patch of status.releasedUncommitted: what this process observed of a replica set
 * (`observed`, by set) replaces what status says; a set it has not observed (gone since before it
 * led) keeps what status says, and a set neither listed nor assigned any more is dropped.
 * Undefined when nothing changes.
 */
export function releasedUncommittedPatch(
  previous: Readonly<Record<string, readonly number[]>> | undefined,
  observed: ReadonlyMap<string, readonly number[]>,
  sets: ReadonlySet<string>,
): Record<string, number[] | null> | undefined {
  const patch: Record<string, number[] | null> = {};
  for (const rs of new Set([...Object.keys(previous ?? {}), ...observed.keys()])) {
    const before = previous?.[rs];
    const after = sets.has(rs) ? (observed.get(rs) ?? before) : undefined;
    const same =
      (before ?? []).length === (after ?? []).length &&
      (before ?? []).every((p, i) => after?.[i] === p);
    if (same) continue;
    patch[rs] = after?.length ? [...after] : null;
  }
  return Object.keys(patch).length > 0 ? patch : undefined;
}
