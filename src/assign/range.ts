// Range (Kafka's RangeAssignor): sorted partitions cut into contiguous runs over the replica sets in
// name order; the first ones take one partition more when the split is uneven.
import { assignmentFromOwners, type Assignment, type AssignmentInput } from './assignment.ts';
import { quotas, startPlacement, waterLevel } from './placement.ts';

export function rangeAssign(input: AssignmentInput): Assignment {
  const placement = startPlacement(input);
  const level = waterLevel(placement);
  const shares = quotas(level, level.eligible);
  let next = 0;
  for (const replicaSet of placement.replicaSets) {
    const share = shares.get(replicaSet) ?? 0;
    for (const partition of placement.unpinned.slice(next, next + share)) {
      placement.owners.set(partition, replicaSet);
    }
    next += share;
  }
  return assignmentFromOwners(placement.replicaSets, placement.owners);
}
