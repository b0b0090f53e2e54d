// The operator's planner, pure: from the spec, the applied assignment, the topic and the replica sets
// with ready receivers, what the cube should look like, which partitions move, and what to report.
import type { Assignment, Move } from '../../src/assign/assignment.ts';
import { planAssignment, type PlanInput } from '../../src/operator/planner.ts';

const upTo = (count: number): number[] => Array.from({ length: count }, (_, i) => i);
const reasons = (input: PlanInput): string[] => planAssignment(input).problems.map((p) => p.reason);

interface Case {
  name: string;
  input: PlanInput;
  desired: Assignment;
  moves: Move[];
  problems: string[];
  /** A text the first problem's message holds. */
  message?: string;
}

const both = new Set(['rs-a', 'rs-b']);

test.each<Case>([
  {
    name: 'initial assignment: every partition is a move without a source',
    input: {
      strategy: 'range',
      replicaSets: ['rs-a', 'rs-b'],
      current: undefined,
      partitions: upTo(4),
      availableReplicaSets: both,
    },
    desired: { 'rs-a': [0, 1], 'rs-b': [2, 3] },
    moves: [
      { partition: 0, to: 'rs-a' },
      { partition: 1, to: 'rs-a' },
      { partition: 2, to: 'rs-b' },
      { partition: 3, to: 'rs-b' },
    ],
    problems: [],
  },
  {
    name: 'nothing changed: no move',
    input: {
      strategy: 'sticky',
      replicaSets: ['rs-a', 'rs-b'],
      current: { 'rs-a': [0, 2], 'rs-b': [1, 3] },
      partitions: upTo(4),
      availableReplicaSets: both,
    },
    desired: { 'rs-a': [0, 2], 'rs-b': [1, 3] },
    moves: [],
    problems: [],
  },
  {
    name: 'a replica set added: sticky moves only its share, from the top',
    input: {
      strategy: 'sticky',
      replicaSets: ['rs-a', 'rs-b', 'rs-c'],
      current: { 'rs-a': [0, 1, 2], 'rs-b': [3, 4, 5] },
      partitions: upTo(6),
      availableReplicaSets: new Set(['rs-a', 'rs-b', 'rs-c']),
    },
    desired: { 'rs-a': [0, 1], 'rs-b': [3, 4], 'rs-c': [2, 5] },
    moves: [
      { partition: 2, from: 'rs-a', to: 'rs-c' },
      { partition: 5, from: 'rs-b', to: 'rs-c' },
    ],
    problems: [],
  },
  {
    name: 'a replica set removed from the spec: its partitions move, the others stay',
    input: {
      strategy: 'sticky',
      replicaSets: ['rs-b'],
      current: { 'rs-a': [0, 1], 'rs-b': [2, 3] },
      partitions: upTo(4),
      availableReplicaSets: both,
    },
    desired: { 'rs-b': [0, 1, 2, 3] },
    moves: [
      { partition: 0, from: 'rs-a', to: 'rs-b' },
      { partition: 1, from: 'rs-a', to: 'rs-b' },
    ],
    problems: [],
  },
  {
    name: 'a pin moves its partition and balance gives one back',
    input: {
      strategy: 'sticky',
      replicaSets: ['rs-a', 'rs-b'],
      pins: { 'rs-a': [3] },
      current: { 'rs-a': [0, 1], 'rs-b': [2, 3] },
      partitions: upTo(4),
      availableReplicaSets: both,
    },
    desired: { 'rs-a': [0, 3], 'rs-b': [1, 2] },
    moves: [
      { partition: 1, from: 'rs-a', to: 'rs-b' },
      { partition: 3, from: 'rs-b', to: 'rs-a' },
    ],
    problems: [],
  },
  {
    name: 'pins already honoured: no move',
    input: {
      strategy: 'range',
      replicaSets: ['rs-a', 'rs-b'],
      pins: { 'rs-b': [0, 1] },
      current: { 'rs-a': [2, 3], 'rs-b': [0, 1] },
      partitions: upTo(4),
      availableReplicaSets: both,
    },
    desired: { 'rs-a': [2, 3], 'rs-b': [0, 1] },
    moves: [],
    problems: [],
  },
  {
    name: 'a replica set of the spec without ready pods: planned over the others',
    input: {
      strategy: 'range',
      replicaSets: ['rs-a', 'rs-b', 'rs-missing'],
      current: undefined,
      partitions: upTo(4),
      availableReplicaSets: both,
    },
    desired: { 'rs-a': [0, 1], 'rs-b': [2, 3] },
    moves: [
      { partition: 0, to: 'rs-a' },
      { partition: 1, to: 'rs-a' },
      { partition: 2, to: 'rs-b' },
      { partition: 3, to: 'rs-b' },
    ],
    problems: ['ReplicaSetUnavailable'],
  },
  {
    name: 'a holder without ready pods keeps its partitions when a replica set is added',
    input: {
      strategy: 'sticky',
      replicaSets: ['rs-a', 'rs-b'],
      current: { 'rs-a': [0, 1, 2, 3] },
      partitions: upTo(4),
      availableReplicaSets: new Set(['rs-b']),
    },
    desired: { 'rs-a': [0, 1, 2, 3], 'rs-b': [] },
    moves: [],
    problems: ['ReplicaSetUnavailable'],
  },
  {
    name: 'range: nothing moves to or from a holder without ready pods',
    input: {
      strategy: 'range',
      replicaSets: ['rs-a', 'rs-b'],
      current: { 'rs-a': [2, 3], 'rs-b': [0, 1] },
      partitions: upTo(4),
      availableReplicaSets: new Set(['rs-b']),
    },
    desired: { 'rs-a': [2, 3], 'rs-b': [0, 1] },
    moves: [],
    problems: ['ReplicaSetUnavailable'],
  },
  {
    name: 'a holder lost (away past spec.failoverAfter) has its partitions placed on the others: a failover',
    input: {
      strategy: 'sticky',
      replicaSets: ['rs-a', 'rs-b', 'rs-c'],
      current: { 'rs-a': [0, 1], 'rs-b': [2], 'rs-c': [3] },
      partitions: upTo(4),
      availableReplicaSets: new Set(['rs-b', 'rs-c']),
      lostReplicaSets: new Set(['rs-a']),
    },
    desired: { 'rs-b': [0, 2], 'rs-c': [1, 3] },
    moves: [
      { partition: 0, from: 'rs-a', to: 'rs-b' },
      { partition: 1, from: 'rs-a', to: 'rs-c' },
    ],
    problems: ['ReplicaSetLost'],
  },
  {
    name: 'a set back after a failover, a replica still holding partitions it no longer owns: given none until they are handed over',
    input: {
      strategy: 'sticky',
      replicaSets: ['rs-a', 'rs-b', 'rs-c'],
      current: { 'rs-a': [], 'rs-b': [0, 2], 'rs-c': [1, 3] },
      partitions: upTo(4),
      availableReplicaSets: new Set(['rs-a', 'rs-b', 'rs-c']),
      convergingReplicaSets: new Set(['rs-a']),
    },
    desired: { 'rs-b': [0, 2], 'rs-c': [1, 3] },
    moves: [],
    problems: ['ReplicaSetConverging'],
  },
  {
    name: 'a holder away, not lost yet, keeps its partitions and is told when it fails over',
    input: {
      strategy: 'sticky',
      replicaSets: ['rs-a', 'rs-b'],
      current: { 'rs-a': [0, 1], 'rs-b': [2, 3] },
      partitions: upTo(4),
      availableReplicaSets: new Set(['rs-b']),
      failoverAt: new Map([['rs-a', Date.parse('2026-12-02T05:00:00Z')]]),
    },
    desired: { 'rs-a': [0, 1], 'rs-b': [2, 3] },
    moves: [],
    problems: ['ReplicaSetUnavailable'],
    message: 'fail over to the other replica sets at 2026-12-02T05:00:00.000Z (spec.failoverAfter)',
  },
  {
    name: 'new partitions go to the replica sets that can start them, not to a holder that is away',
    input: {
      strategy: 'sticky',
      replicaSets: ['rs-a', 'rs-b'],
      current: { 'rs-a': [0, 1], 'rs-b': [2, 3] },
      partitions: upTo(6),
      availableReplicaSets: new Set(['rs-b']),
    },
    desired: { 'rs-a': [0, 1], 'rs-b': [2, 3, 4, 5] },
    moves: [
      { partition: 4, to: 'rs-b' },
      { partition: 5, to: 'rs-b' },
    ],
    problems: ['ReplicaSetUnavailable'],
  },
  {
    name: 'a holder dropped from the spec and away keeps its partitions until it is back',
    input: {
      strategy: 'sticky',
      replicaSets: ['rs-b'],
      current: { 'rs-a': [0, 1], 'rs-b': [2, 3] },
      partitions: upTo(4),
      availableReplicaSets: new Set(['rs-b']),
    },
    desired: { 'rs-a': [0, 1], 'rs-b': [2, 3] },
    moves: [],
    problems: ['ReplicaSetUnavailable'],
  },
  {
    name: 'a pin of a partition held by a replica set that is away waits',
    input: {
      strategy: 'sticky',
      replicaSets: ['rs-a', 'rs-b'],
      pins: { 'rs-b': [0] },
      current: { 'rs-a': [0, 1], 'rs-b': [2, 3] },
      partitions: upTo(4),
      availableReplicaSets: new Set(['rs-b']),
    },
    desired: { 'rs-a': [0, 1], 'rs-b': [2, 3] },
    moves: [],
    problems: ['ReplicaSetUnavailable'],
  },
  {
    name: 'the topic is missing: no move, whatever else changed',
    input: {
      strategy: 'sticky',
      replicaSets: ['rs-a', 'rs-b', 'rs-c'],
      current: { 'rs-a': [0, 1], 'rs-b': [2, 3] },
      partitions: undefined,
      availableReplicaSets: new Set(['rs-a', 'rs-b', 'rs-c']),
    },
    desired: { 'rs-a': [0, 1], 'rs-b': [2, 3] },
    moves: [],
    problems: ['TopicNotFound'],
  },
  {
    name: 'no replica set has a ready receiver: no move',
    input: {
      strategy: 'sticky',
      replicaSets: ['rs-a', 'rs-b'],
      current: undefined,
      partitions: upTo(4),
      availableReplicaSets: new Set(['rs-other']),
    },
    desired: {},
    moves: [],
    problems: ['ReplicaSetUnavailable', 'NoReplicaSetAvailable'],
  },
  {
    name: 'the only replica set holds partitions but is away: nothing new is planned onto it',
    input: {
      strategy: 'sticky',
      replicaSets: ['rs-a'],
      current: { 'rs-a': [0, 1] },
      partitions: upTo(4),
      availableReplicaSets: new Set(),
    },
    desired: { 'rs-a': [0, 1] },
    moves: [],
    problems: ['ReplicaSetUnavailable', 'NoReplicaSetAvailable'],
  },
  {
    name: 'pins that cannot be honoured are reported and the rest is planned',
    input: {
      strategy: 'range',
      replicaSets: ['rs-a', 'rs-b'],
      pins: { 'rs-a': [9], 'rs-x': [1] },
      current: undefined,
      partitions: upTo(4),
      availableReplicaSets: both,
    },
    desired: { 'rs-a': [0, 1], 'rs-b': [2, 3] },
    moves: [
      { partition: 0, to: 'rs-a' },
      { partition: 1, to: 'rs-a' },
      { partition: 2, to: 'rs-b' },
      { partition: 3, to: 'rs-b' },
    ],
    problems: ['InvalidPin', 'InvalidPin'],
  },
])('$name', ({ input, desired, moves, problems, message }) => {
  const plan = planAssignment(input);
  expect(plan.desired).toEqual(desired);
  expect(plan.moves).toEqual(moves);
  expect(plan.problems.map((p) => p.reason)).toEqual(problems);
  if (message) expect(plan.problems[0]?.message).toContain(message);
});

test('a pin to a replica set that is away is not honoured; the partition goes to the others', () => {
  const plan = planAssignment({
    strategy: 'sticky',
    replicaSets: ['rs-a', 'rs-b'],
    pins: { 'rs-a': [0] },
    current: undefined,
    partitions: upTo(4),
    availableReplicaSets: new Set(['rs-b']),
  });
  expect(plan.desired).toEqual({ 'rs-b': [0, 1, 2, 3] });
  expect(plan.moves.every((m) => m.to === 'rs-b' && m.from === undefined)).toBe(true);
});

test('problem messages name what is wrong', () => {
  const [away] = planAssignment({
    strategy: 'sticky',
    replicaSets: ['rs-a', 'rs-b', 'rs-c'],
    current: undefined,
    partitions: upTo(2),
    availableReplicaSets: new Set(['rs-a']),
  }).problems;
  expect(away?.message).toMatch(/replica sets rs-b, rs-c have no ready receiver pod/);
  expect(away?.message).toContain('streamcube.io/replica-set');

  const [stranded] = planAssignment({
    strategy: 'sticky',
    replicaSets: ['rs-b'],
    current: { 'rs-a': [3, 1], 'rs-b': [0, 2] },
    partitions: upTo(4),
    availableReplicaSets: new Set(['rs-b']),
  }).problems;
  expect(stranded?.message).toMatch(
    /replica set rs-a \(no longer in spec.replicaSets\) holds partitions 1, 3 but has no ready receiver pod/,
  );

  const [pin] = planAssignment({
    strategy: 'sticky',
    replicaSets: ['rs-a'],
    pins: { 'rs-a': [7] },
    current: undefined,
    partitions: upTo(2),
    availableReplicaSets: new Set(['rs-a']),
  }).problems;
  expect(pin?.reason).toBe('InvalidPin');
  expect(pin?.message).toMatch(/partition 7 is pinned to 'rs-a' but the topic has no partition 7/);
});

test('a holder that comes back gets its share again (sticky)', () => {
  const input: PlanInput = {
    strategy: 'sticky',
    replicaSets: ['rs-a', 'rs-b'],
    current: { 'rs-a': [0, 1], 'rs-b': [2, 3, 4, 5] },
    partitions: upTo(6),
    availableReplicaSets: both,
  };
  const plan = planAssignment(input);
  expect(plan.desired).toEqual({ 'rs-a': [0, 1, 5], 'rs-b': [2, 3, 4] });
  expect(plan.moves).toEqual([{ partition: 5, from: 'rs-b', to: 'rs-a' }]);
  expect(reasons(input)).toEqual([]);
});

test('a partition the topic no longer has is not planned, and not a move', () => {
  const plan = planAssignment({
    strategy: 'sticky',
    replicaSets: ['rs-a'],
    current: { 'rs-a': [0, 1, 2] },
    partitions: upTo(2),
    availableReplicaSets: new Set(['rs-a']),
  });
  expect(plan.desired).toEqual({ 'rs-a': [0, 1] });
  expect(plan.moves).toEqual([]);
});

test('32 partitions from rs-a to rs-b: 32 moves, as the reassign benchmark does', () => {
  const plan = planAssignment({
    strategy: 'sticky',
    replicaSets: ['rs-b'],
    current: { 'rs-a': upTo(32) },
    partitions: upTo(32),
    availableReplicaSets: both,
  });
  expect(plan.desired).toEqual({ 'rs-b': upTo(32) });
  expect(plan.moves).toEqual(upTo(32).map((p) => ({ partition: p, from: 'rs-a', to: 'rs-b' })));
});
