// Planning, pure: from a cube's spec, what is applied now, the topic's partitions and the replica
// sets that have ready receivers, the desired assignment, the per-partition moves, and the
// problems to report as a Degraded condition. No I/O, table-tested.
import { assignPartitions } from '../assign/strategy.ts';
import { validatePins } from '../assign/pins.ts';
import { diffAssignments } from '../assign/diff.ts';
import {
  assignmentFromOwners,
  holdersByPartition,
  sortedNames,
  type Assignment,
  type Move,
} from '../assign/assignment.ts';
import type { AssignmentStrategy } from '../api/cube-assignment.ts';
import { replicaSetLabel } from './discovery.ts';

export interface PlanInput {
  strategy: AssignmentStrategy;
  replicaSets: string[];
  pins?: Record<string, number[]> | undefined;
  /** status.assignment, or undefined before the first assignment. */
  current: Assignment | undefined;
  /** The topic's partitions, or undefined when the topic is missing. */
  partitions: number[] | undefined;
  /** Replica sets that have at least one ready receiver (of the spec or not). */
  availableReplicaSets: Set<string>;
  /**
   * Replica sets without a ready receiver for longer than spec.failoverAfter: their partitions
   * are placed on the others (a failover), not kept waiting for them.
   */
  lostReplicaSets?: ReadonlySet<string>;
  /** Replica sets without a ready receiver, not lost yet: when they are (epoch ms). */
  failoverAt?: ReadonlyMap<string, number>;
  /**
   * Replica sets that own nothing of the cube while a replica of theirs still holds partitions of
   * it (back after a failover, or from a move it missed): given nothing until convergence has
   * released those, since a partition assigned over an epoch not handed over yet would share
   * segments with that epoch's fenced data.
   */
  convergingReplicaSets?: ReadonlySet<string>;
}

export interface Problem {
  /** CamelCase condition reason. */
  reason: string;
  message: string;
  /**
   * The Event's text when the message carries figures that change with every observation (an
   * Event is recorded when the text changes); the message itself otherwise.
   */
  event?: string;
  /** A problem with the data, not with consumption: the cube stays Ready. */
  keepsReady?: boolean;
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
  const current = input.current ?? {};
  const converging = input.convergingReplicaSets ?? new Set<string>();
  const available = input.replicaSets.filter(
    (rs) => input.availableReplicaSets.has(rs) && !converging.has(rs),
  );
  // A replica set that holds partitions now keeps them while its pods are away: moving them needs
  // its receivers (pause, drain), and failover is a separate, later step. Nothing new goes to it.
  const topic = new Set(input.partitions);
  const stranded = new Map<number, string>();
  const lost = input.lostReplicaSets ?? new Set<string>();
  for (const [partition, holders] of holdersByPartition(current)) {
    if (!topic.has(partition) || holders.some((rs) => input.availableReplicaSets.has(rs))) continue;
    if (holders.every((rs) => lost.has(rs))) continue;
    stranded.set(partition, holders[0]!);
  }
  const strandedHolders = sortedNames(stranded.values());
  // Lost sets that hold partitions: those fail over (their own problem, below).
  const lostHolders = new Map<string, number[]>();
  for (const [partition, holders] of holdersByPartition(current))
    for (const rs of holders)
      if (topic.has(partition) && lost.has(rs) && !input.availableReplicaSets.has(rs))
        lostHolders.set(
          rs,
          [...(lostHolders.get(rs) ?? []), partition].sort((a, b) => a - b),
        );
  const idle = input.replicaSets.filter(
    (rs) =>
      !input.availableReplicaSets.has(rs) && !strandedHolders.includes(rs) && !lostHolders.has(rs),
  );
  if (idle.length > 0) {
    problems.push({
      reason: 'ReplicaSetUnavailable',
      message: `replica set${idle.length > 1 ? 's' : ''} ${idle.join(', ')} ha${idle.length > 1 ? 've' : 's'} no ready receiver pod (label ${replicaSetLabel}); partitions are placed on the others`,
      // It holds nothing: every partition is read by the others (a set failed over, one not
      // started yet), so the cube is Ready and Degraded says what is missing.
      keepsReady: true,
    });
  }
  for (const rs of strandedHolders) {
    const held = [...stranded].filter(([, owner]) => owner === rs).map(([p]) => p);
    const at = input.failoverAt?.get(rs);
    const until =
      at === undefined
        ? 'they stay there until it is back'
        : `they stay there until it is back, or fail over to the other replica sets at ${new Date(at).toISOString()} (spec.failoverAfter)`;
    problems.push({
      reason: 'ReplicaSetUnavailable',
      message: `replica set ${rs}${input.replicaSets.includes(rs) ? '' : ' (no longer in spec.replicaSets)'} holds partition${held.length > 1 ? 's' : ''} ${held.sort((a, b) => a - b).join(', ')} but has no ready receiver pod (label ${replicaSetLabel}); ${until}`,
    });
  }
  const waiting = input.replicaSets.filter((rs) => converging.has(rs));
  if (waiting.length > 0)
    problems.push({
      reason: 'ReplicaSetConverging',
      message: `replica set${waiting.length > 1 ? 's' : ''} ${waiting.join(', ')} own${waiting.length > 1 ? '' : 's'} no partition while a replica still holds some it no longer owns: given partitions once they are handed over`,
      keepsReady: true,
    });
  for (const [rs, held] of lostHolders) {
    problems.push({
      reason: 'ReplicaSetLost',
      message: `replica set ${rs} has had no ready receiver pod for longer than spec.failoverAfter: partition${held.length > 1 ? 's' : ''} ${held.join(', ')} ${
        available.length > 0
          ? `fail${held.length > 1 ? '' : 's'} over to the other replica sets`
          : `wait${held.length > 1 ? '' : 's'} for it: no other replica set of spec.replicaSets has a ready receiver to fail over to`
      }`,
    });
  }
  const pinProblems = validatePins({
    partitions: input.partitions,
    replicaSets: input.replicaSets,
    ...(input.pins ? { pins: input.pins } : {}),
  });
  for (const message of pinProblems) problems.push({ reason: 'InvalidPin', message });
  if (available.length === 0) {
    problems.push({
      reason: 'NoReplicaSetAvailable',
      message: 'no replica set of the cube has a ready receiver',
    });
    return { desired: current, moves: [], problems };
  }
  // The strategy places what is not stranded over the replica sets that can take partitions;
  // a pin of a stranded partition waits, like the partition.
  const placeable = input.partitions.filter((p) => !stranded.has(p));
  const livePins = input.pins
    ? Object.fromEntries(
        Object.entries(input.pins)
          .filter(([rs]) => available.includes(rs))
          .map(([rs, ps]) => [rs, ps.filter((p) => !stranded.has(p))]),
      )
    : undefined;
  const placed = assignPartitions(input.strategy, {
    partitions: placeable,
    replicaSets: available,
    current,
    ...(livePins ? { pins: livePins } : {}),
  });
  const owners = new Map<number, string>(stranded);
  for (const [rs, ps] of Object.entries(placed)) for (const p of ps) owners.set(p, rs);
  const desired = assignmentFromOwners([...available, ...strandedHolders], owners);
  return { desired, moves: diffAssignments(current, desired), problems };
}
