// The vocabulary of partition assignment (DESIGN.md §5): what a strategy reads and returns, and the
// one canonical order of replica sets and partitions that makes every strategy deterministic.

export type ReplicaSetName = string;

/** Replica set → sorted partitions; every replica set of the input appears as a key (maybe with []). */
export type Assignment = Record<ReplicaSetName, number[]>;

export const strategyNames = ['range', 'roundRobin', 'sticky'] as const;
export type StrategyName = (typeof strategyNames)[number];

export interface AssignmentInput {
  /** The topic's partitions, any order, unique. */
  partitions: number[];
  /** The cube's replica sets, any order, unique, non-empty. */
  replicaSets: ReplicaSetName[];
  /** What is applied now; may mention replica sets or partitions that no longer exist. */
  current?: Assignment;
  /** Explicit placement; overrides the strategy. */
  pins?: Record<ReplicaSetName, number[]>;
}

/** One partition changing owner; `from` is absent for a partition nobody consumes yet. */
export interface Move {
  partition: number;
  from?: ReplicaSetName;
  to: ReplicaSetName;
}

/** Code-unit order, as Kafka sorts member ids: the result must not depend on the host's locale. */
export function compareNames(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

export function sortedNames(names: Iterable<ReplicaSetName>): ReplicaSetName[] {
  return [...new Set(names)].sort(compareNames);
}

export function sortedPartitions(partitions: Iterable<number>): number[] {
  return [...new Set(partitions)].sort((a, b) => a - b);
}

/**
 * Partition → the replica sets listing it, sorted by name. Reads own keys only: replica set names
 * are DNS labels, and `constructor` is one.
 */
export function holdersByPartition(assignment: Assignment): Map<number, ReplicaSetName[]> {
  const holders = new Map<number, ReplicaSetName[]>();
  for (const [replicaSet, partitions] of Object.entries(assignment)) {
    for (const partition of new Set(partitions)) {
      const list = holders.get(partition);
      if (list === undefined) holders.set(partition, [replicaSet]);
      else list.push(replicaSet);
    }
  }
  for (const list of holders.values()) list.sort(compareNames);
  return holders;
}

/** Builds the returned shape: keys in name order (stable JSON), partitions ascending. */
export function assignmentFromOwners(
  replicaSets: readonly ReplicaSetName[],
  owners: ReadonlyMap<number, ReplicaSetName>,
): Assignment {
  const byReplicaSet = new Map<ReplicaSetName, number[]>(replicaSets.map((r) => [r, []]));
  for (const [partition, owner] of owners) byReplicaSet.get(owner)?.push(partition);
  const assignment: Assignment = {};
  for (const replicaSet of sortedNames(replicaSets)) {
    assignment[replicaSet] = (byReplicaSet.get(replicaSet) ?? []).sort((a, b) => a - b);
  }
  return assignment;
}
