// Round robin (Kafka's RoundRobinAssignor): partition i of the sorted list goes to replica set
// i mod R in name order. With pins, a replica set whose balanced share is full is skipped.
import { assignmentFromOwners, type Assignment, type AssignmentInput } from './assignment.ts';
import { quotas, startPlacement, waterLevel } from './placement.ts';

export function roundRobinAssign(input: AssignmentInput): Assignment {
  const placement = startPlacement(input);
  const level = waterLevel(placement);
  const remaining = quotas(level, level.eligible);
  const ring = placement.replicaSets;
  let turn = 0;
  for (const partition of placement.unpinned) {
    // At most one lap: the shares add up to the unpinned partitions, so one has room. Bounded
    // anyway, so that a broken share fails loudly instead of hanging the operator.
    let replicaSet: string | undefined;
    for (let step = 0; step < ring.length && replicaSet === undefined; step++, turn++) {
      const candidate = ring[turn % ring.length];
      if (candidate !== undefined && (remaining.get(candidate) ?? 0) > 0) replicaSet = candidate;
    }
    if (replicaSet === undefined) {
      if (ring.length === 0) return {};
      throw new Error(`round robin: no replica set has room for partition ${partition}`);
    }
    placement.owners.set(partition, replicaSet);
    remaining.set(replicaSet, (remaining.get(replicaSet) ?? 0) - 1);
  }
  return assignmentFromOwners(placement.replicaSets, placement.owners);
}
