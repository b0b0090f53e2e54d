// Sticky (Kafka's StickyAssignor, the default): as balanced as range, and every partition stays
// where it is unless balance requires a move, with the fewest moves possible.
import {
  assignmentFromOwners,
  compareNames,
  sortedPartitions,
  type Assignment,
  type AssignmentInput,
  type ReplicaSetName,
} from './assignment.ts';
import { quotas, startPlacement, waterLevel } from './placement.ts';

/**
 * Moves = partitions without a live owner + Σ max(0, kept − share) over replica sets. The balanced
 * shares are fixed except for which eligible replica sets take one more; giving those to the ones
 * holding more than their base saves one move each, so they go first.
 *
 * A partition listed by several replica sets of `current` stays with the first live one by name.
 * Partitions over a replica set's share are released from the top (highest numbers); released,
 * orphaned and new partitions go, ascending, to the least-loaded replica set with room left.
 */
export function stickyAssign(input: AssignmentInput): Assignment {
  const placement = startPlacement(input);
  const { replicaSets, owners } = placement;
  if (replicaSets.length === 0) return {};
  const current = input.current ?? {};
  const unpinned = new Set(placement.unpinned);

  const kept = new Map<ReplicaSetName, number[]>();
  const claimed = new Set<number>();
  for (const replicaSet of replicaSets) {
    const listed = Object.hasOwn(current, replicaSet) ? (current[replicaSet] ?? []) : [];
    const mine = sortedPartitions(listed).filter((p) => unpinned.has(p) && !claimed.has(p));
    for (const partition of mine) claimed.add(partition);
    kept.set(replicaSet, mine);
  }

  const level = waterLevel(placement);
  const surplus = (r: ReplicaSetName): number =>
    (kept.get(r)?.length ?? 0) - (level.base.get(r) ?? 0);
  const extraOrder = [...level.eligible].sort(
    (a, b) => surplus(b) - surplus(a) || compareNames(a, b),
  );
  const shares = quotas(level, extraOrder);

  const homeless = placement.unpinned.filter((p) => !claimed.has(p));
  const load = new Map(placement.pinnedCounts);
  const room = new Map<ReplicaSetName, number>();
  for (const replicaSet of replicaSets) {
    const share = shares.get(replicaSet) ?? 0;
    const mine = kept.get(replicaSet) ?? [];
    for (const partition of mine.slice(0, share)) owners.set(partition, replicaSet);
    homeless.push(...mine.slice(share));
    const stays = Math.min(share, mine.length);
    load.set(replicaSet, (load.get(replicaSet) ?? 0) + stays);
    room.set(replicaSet, share - stays);
  }

  for (const partition of homeless.sort((a, b) => a - b)) {
    let target: ReplicaSetName | undefined;
    for (const replicaSet of replicaSets) {
      if ((room.get(replicaSet) ?? 0) === 0) continue;
      if (target === undefined || (load.get(replicaSet) ?? 0) < (load.get(target) ?? 0)) {
        target = replicaSet;
      }
    }
    // The shares add up to the unpinned partitions, so there is always room somewhere.
    if (target === undefined)
      throw new Error(`sticky: no replica set has room for partition ${partition}`);
    owners.set(partition, target);
    load.set(target, (load.get(target) ?? 0) + 1);
    room.set(target, (room.get(target) ?? 0) - 1);
  }
  return assignmentFromOwners(replicaSets, owners);
}
