// Planning, pure: from a cube's spec, what is applied now, the topic's partitions and the replica
// sets that have ready receivers, the desired assignment, the per-partition moves, and the
// problems to report as a Degraded condition. No I/O, table-tested.
import { assignPartitions } from '../assign/strategy.ts';
import { validatePins } from '../assign/pins.ts';
import { diffAssignments } from '../assign/diff.ts';
import type { Assignment, Move } from '../assign/assignment.ts';
import type { AssignmentStrategy } from '../api/cube-assignment.ts';

export interface PlanInput {
  strategy: AssignmentStrategy;
  replicaSets: string[];
  pins?: Record<string, number[]> | undefined;
  /** status.assignment, or undefined before the first assignment. */
  current: Assignment | undefined;
  /** The topic's partitions, or undefined when the topic is missing. */
  partitions: number[] | undefined;
  /** Replica sets of the spec that have at least one ready receiver. */
  availableReplicaSets: Set<string>;
}

export interface Problem {
  /** CamelCase condition reason. */
  reason: string;
  message: string;
}

export interface Plan {
  desired: Assignment;
  moves: Move[];
  problems: Problem[];
}

export function planAssignment(input: PlanInput): Plan {
  const problems: Problem[] = [];
  if (input.partitions === undefined) {
    return {
      desired: input.current ?? {},
      moves: [],
      problems: [
        { reason: 'TopicNotFound', message: 'the source topic does not exist on the brokers' },
      ],
    };
  }
  const missing = input.replicaSets.filter((rs) => !input.availableReplicaSets.has(rs));
  if (missing.length > 0) {
    problems.push({
      reason: 'ReplicaSetUnavailable',
      message: `replica set${missing.length > 1 ? 's' : ''} ${missing.join(', ')} ha${missing.length > 1 ? 've' : 's'} no ready receiver pod (label streamcube.io/replica-set); partitions are placed on the others`,
    });
  }
  // A replica set that holds partitions now stays in the plan while its pods are away: moving
  // its partitions needs its receivers (pause, drain), and failover is a separate, later step.
  const holding = new Set(
    Object.entries(input.current ?? {})
      .filter(([, ps]) => ps.length > 0)
      .map(([rs]) => rs),
  );
  const live = input.replicaSets.filter(
    (rs) => input.availableReplicaSets.has(rs) || holding.has(rs),
  );
  const pinProblems = validatePins({
    partitions: input.partitions,
    replicaSets: input.replicaSets,
    ...(input.pins ? { pins: input.pins } : {}),
  });
  for (const message of pinProblems) problems.push({ reason: 'InvalidPin', message });
  if (live.length === 0) {
    problems.push({
      reason: 'NoReplicaSetAvailable',
      message: 'no replica set of the cube has a ready receiver',
    });
    return { desired: input.current ?? {}, moves: [], problems };
  }
  const livePins = input.pins
    ? Object.fromEntries(Object.entries(input.pins).filter(([rs]) => live.includes(rs)))
    : undefined;
  const current = input.current ?? {};
  const desired = assignPartitions(input.strategy, {
    partitions: input.partitions,
    replicaSets: live,
    current,
    ...(livePins ? { pins: livePins } : {}),
  });
  return { desired, moves: diffAssignments(current, desired), problems };
}
