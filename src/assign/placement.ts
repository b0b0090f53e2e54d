// What every strategy starts from: replica sets and partitions in canonical order, pinned partitions
// already placed, and how many unpinned partitions each replica set should take for balance.
import {
  sortedNames,
  sortedPartitions,
  type AssignmentInput,
  type ReplicaSetName,
} from './assignment.ts';
import { resolvePins } from './pins.ts';

export interface Placement {
  /** Sorted by name. */
  replicaSets: ReplicaSetName[];
  /** Partitions the strategy places, ascending. */
  unpinned: number[];
  /** Partition → owner; holds the honoured pins, strategies add the rest. */
  owners: Map<number, ReplicaSetName>;
  /** Honoured pins per replica set. */
  pinnedCounts: Map<ReplicaSetName, number>;
}

export function startPlacement(input: AssignmentInput): Placement {
  const replicaSets = sortedNames(input.replicaSets);
  const owners = resolvePins(input).owners;
  const pinnedCounts = new Map<ReplicaSetName, number>(replicaSets.map((r) => [r, 0]));
  for (const owner of owners.values()) pinnedCounts.set(owner, (pinnedCounts.get(owner) ?? 0) + 1);
  const unpinned = sortedPartitions(input.partitions).filter((p) => !owners.has(p));
  return { replicaSets, unpinned, owners, pinnedCounts };
}

/** The balanced share of unpinned partitions, before the strategy picks who takes one more. */
export interface WaterLevel {
  /** Unpinned partitions each replica set takes to reach the level L. */
  base: Map<ReplicaSetName, number>;
  /** How many of `eligible` take one more (to L + 1); fewer than `eligible.length`. */
  extra: number;
  /** Replica sets at or below L with their pins, by name: the only ones that may go to L + 1. */
  eligible: ReplicaSetName[];
}

/**
 * Balance counts the TOTAL per replica set, pins included: unpinned partitions fill the
 * least-loaded replica sets first (water-filling). The outcome is a level L where every replica set
 * that takes unpinned partitions ends with L or L + 1 in total, and one that takes none already holds
 * at least L pinned ones. Without pins this is the floor/ceil split of P / R.
 */
export function waterLevel(placement: Placement): WaterLevel {
  const pinned = placement.replicaSets.map((r) => placement.pinnedCounts.get(r) ?? 0);
  const unpinned = placement.unpinned.length;
  const fill = (level: number): number =>
    pinned.reduce((sum, count) => sum + Math.max(0, level - count), 0);
  // fill(low) ≤ unpinned < fill(high): the level is the largest one the unpinned partitions reach.
  let low = pinned.length === 0 ? 0 : Math.min(...pinned);
  let high = low + unpinned + 1;
  while (high - low > 1) {
    const middle = Math.floor((low + high) / 2);
    if (fill(middle) <= unpinned) low = middle;
    else high = middle;
  }
  const level = low;
  const base = new Map<ReplicaSetName, number>();
  for (const replicaSet of placement.replicaSets) {
    base.set(replicaSet, Math.max(0, level - (placement.pinnedCounts.get(replicaSet) ?? 0)));
  }
  const eligible = placement.replicaSets.filter(
    (r) => (placement.pinnedCounts.get(r) ?? 0) <= level,
  );
  return { base, extra: unpinned - fill(level), eligible };
}

/**
 * Unpinned partitions per replica set: the base, plus one for the first `level.extra` replica sets
 * of `extraOrder` (an ordering of `level.eligible` chosen by the strategy).
 */
export function quotas(
  level: WaterLevel,
  extraOrder: readonly ReplicaSetName[],
): Map<ReplicaSetName, number> {
  const result = new Map(level.base);
  for (const replicaSet of extraOrder.slice(0, level.extra)) {
    result.set(replicaSet, (result.get(replicaSet) ?? 0) + 1);
  }
  return result;
}
