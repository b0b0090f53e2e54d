// Explicit placement (`spec.pins`): which pins are honoured, and why the others are not. Problems are
// returned, never thrown: the operator turns them into a Degraded condition and keeps assigning.
import {
  compareNames,
  sortedNames,
  sortedPartitions,
  type AssignmentInput,
  type ReplicaSetName,
} from './assignment.ts';

export interface ResolvedPins {
  /** Pinned partition → its replica set; only pins that can be honoured. */
  owners: Map<number, ReplicaSetName>;
  /** One human-readable reason per problem, naming the replica set and partition. */
  problems: string[];
}

/**
 * A pin naming an unknown replica set, or a partition the topic lacks, is ignored. A partition
 * pinned to several replica sets honours none of them: the strategy places it until one pin is left;
 * the same partition listed twice under one replica set is still honoured, but reported.
 */
export function resolvePins(input: AssignmentInput): ResolvedPins {
  const replicaSets = new Set(input.replicaSets);
  const partitions = new Set(input.partitions);
  const problems: string[] = [];
  const pinnedTo = new Map<number, ReplicaSetName[]>();
  const pins = Object.entries(input.pins ?? {}).sort(([a], [b]) => compareNames(a, b));

  for (const [replicaSet, listed] of pins) {
    if (!replicaSets.has(replicaSet)) {
      problems.push(
        `pins name replica set '${replicaSet}' (partitions ${describePartitions(sortedPartitions(listed))}), ` +
          `which is not one of the cube's replica sets: ${sortedNames(replicaSets).join(', ')}`,
      );
      continue;
    }
    const seen = new Set<number>();
    for (const partition of [...listed].sort((a, b) => a - b)) {
      if (seen.has(partition)) {
        problems.push(`partition ${partition} is pinned to '${replicaSet}' more than once`);
        continue;
      }
      seen.add(partition);
      if (!partitions.has(partition)) {
        problems.push(
          `partition ${partition} is pinned to '${replicaSet}' but the topic has no partition ` +
            `${partition} (it has ${describeTopic(input.partitions)})`,
        );
        continue;
      }
      const list = pinnedTo.get(partition);
      if (list === undefined) pinnedTo.set(partition, [replicaSet]);
      else list.push(replicaSet);
    }
  }

  const owners = new Map<number, ReplicaSetName>();
  for (const partition of sortedPartitions(pinnedTo.keys())) {
    const list = pinnedTo.get(partition) ?? [];
    const [only] = list;
    if (list.length === 1 && only !== undefined) owners.set(partition, only);
    else
      problems.push(
        `partition ${partition} is pinned to more than one replica set (${list.join(', ')}); ` +
          `none of these pins is honoured until only one is left`,
      );
  }
  return { owners, problems };
}

/** The reasons the pins of `input` cannot all be honoured; empty when they can. */
export function validatePins(input: AssignmentInput): string[] {
  return resolvePins(input).problems;
}

function describeTopic(partitions: number[]): string {
  const sorted = sortedPartitions(partitions);
  if (sorted.length === 0) return 'no partitions';
  const noun = sorted.length === 1 ? 'partition' : 'partitions';
  return `${sorted.length} ${noun}: ${describePartitions(sorted)}`;
}

/** `0-5, 8, 10-11`: readable in a condition message even for a topic with hundreds of partitions. */
function describePartitions(sorted: number[]): string {
  const runs: string[] = [];
  let start: number | undefined;
  let end = 0;
  for (const partition of sorted) {
    if (start !== undefined && partition === end + 1) {
      end = partition;
      continue;
    }
    if (start !== undefined) runs.push(start === end ? `${start}` : `${start}-${end}`);
    start = partition;
    end = partition;
  }
  if (start !== undefined) runs.push(start === end ? `${start}` : `${start}-${end}`);
  return runs.join(', ');
}
