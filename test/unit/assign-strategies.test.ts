// The three strategies on hand-checked tables: uneven splits, fewer partitions than replica sets, an
// empty topic, one replica set, unsorted input, and sticky's reactions to a changed cube.
import type { Assignment, AssignmentInput, StrategyName } from '../../src/assign/assignment.ts';
import { countMoves } from '../../src/assign/diff.ts';
import { rangeAssign } from '../../src/assign/range.ts';
import { roundRobinAssign } from '../../src/assign/round-robin.ts';
import { stickyAssign } from '../../src/assign/sticky.ts';
import { assignPartitions } from '../../src/assign/strategy.ts';

const upTo = (count: number): number[] => Array.from({ length: count }, (_, i) => i);
const abc = ['rs-a', 'rs-b', 'rs-c'];

describe('range', () => {
  test.each<[string, AssignmentInput, Assignment]>([
    [
      'P % R != 0: the first replica sets take one more',
      { partitions: upTo(7), replicaSets: abc },
      { 'rs-a': [0, 1, 2], 'rs-b': [3, 4], 'rs-c': [5, 6] },
    ],
    [
      'even split',
      { partitions: upTo(6), replicaSets: abc },
      { 'rs-a': [0, 1], 'rs-b': [2, 3], 'rs-c': [4, 5] },
    ],
    [
      'P < R: the last replica sets stay empty',
      { partitions: upTo(2), replicaSets: abc },
      { 'rs-a': [0], 'rs-b': [1], 'rs-c': [] },
    ],
    ['P = 0', { partitions: [], replicaSets: ['rs-b', 'rs-a'] }, { 'rs-a': [], 'rs-b': [] }],
    ['one replica set', { partitions: upTo(4), replicaSets: ['rs-a'] }, { 'rs-a': [0, 1, 2, 3] }],
    [
      'unsorted input',
      { partitions: [5, 3, 0, 4, 1, 2, 6], replicaSets: ['rs-c', 'rs-a', 'rs-b'] },
      { 'rs-a': [0, 1, 2], 'rs-b': [3, 4], 'rs-c': [5, 6] },
    ],
    [
      'partition numbers with gaps are ranked, not divided',
      { partitions: [10, 2, 7], replicaSets: ['rs-b', 'rs-a'] },
      { 'rs-a': [2, 7], 'rs-b': [10] },
    ],
    [
      'names sort by code unit, not by locale',
      { partitions: upTo(3), replicaSets: ['rs-b', 'RS-Z', 'rs-a'] },
      { 'RS-Z': [0], 'rs-a': [1], 'rs-b': [2] },
    ],
    [
      'current is ignored',
      { partitions: upTo(4), replicaSets: ['rs-a', 'rs-b'], current: { 'rs-b': [0, 1, 2, 3] } },
      { 'rs-a': [0, 1], 'rs-b': [2, 3] },
    ],
  ])('%s', (_, input, expected) => {
    const result = rangeAssign(input);
    expect(result).toEqual(expected);
    // Keys in name order: the assignment is written to status, and must not churn.
    expect(Object.keys(result)).toEqual(Object.keys(expected));
  });
});

describe('roundRobin', () => {
  test.each<[string, AssignmentInput, Assignment]>([
    [
      'P % R != 0: partition i to replica set i mod R',
      { partitions: upTo(7), replicaSets: abc },
      { 'rs-a': [0, 3, 6], 'rs-b': [1, 4], 'rs-c': [2, 5] },
    ],
    ['P < R', { partitions: upTo(2), replicaSets: abc }, { 'rs-a': [0], 'rs-b': [1], 'rs-c': [] }],
    ['P = 0', { partitions: [], replicaSets: ['rs-a'] }, { 'rs-a': [] }],
    ['one replica set', { partitions: upTo(3), replicaSets: ['rs-a'] }, { 'rs-a': [0, 1, 2] }],
    [
      'unsorted input',
      { partitions: [4, 0, 6, 2, 1, 5, 3], replicaSets: ['rs-b', 'rs-c', 'rs-a'] },
      { 'rs-a': [0, 3, 6], 'rs-b': [1, 4], 'rs-c': [2, 5] },
    ],
    [
      'gaps: the i-th partition of the sorted list, not partition number i',
      { partitions: [9, 1, 4], replicaSets: ['rs-a', 'rs-b'] },
      { 'rs-a': [1, 9], 'rs-b': [4] },
    ],
  ])('%s', (_, input, expected) => expect(roundRobinAssign(input)).toEqual(expected));
});

describe('sticky', () => {
  test.each<[string, AssignmentInput, Assignment, number]>([
    [
      'no current: balanced like round robin',
      { partitions: upTo(7), replicaSets: abc },
      { 'rs-a': [0, 3, 6], 'rs-b': [1, 4], 'rs-c': [2, 5] },
      7,
    ],
    [
      'a balanced current does not move, whoever holds the extra partition',
      {
        partitions: upTo(7),
        replicaSets: abc,
        current: { 'rs-a': [5, 6], 'rs-b': [0, 1, 2], 'rs-c': [3, 4] },
      },
      { 'rs-a': [5, 6], 'rs-b': [0, 1, 2], 'rs-c': [3, 4] },
      0,
    ],
    [
      'replica sets added: each old one gives up the excess, from the top',
      {
        partitions: upTo(8),
        replicaSets: ['rs-d', 'rs-c', 'rs-b', 'rs-a'],
        current: { 'rs-a': [0, 1, 2, 3], 'rs-b': [4, 5, 6, 7] },
      },
      { 'rs-a': [0, 1], 'rs-b': [4, 5], 'rs-c': [2, 6], 'rs-d': [3, 7] },
      4,
    ],
    [
      'replica set removed: its partitions go to the least-loaded',
      {
        partitions: upTo(6),
        replicaSets: ['rs-a', 'rs-b'],
        current: { 'rs-a': [0, 1], 'rs-b': [2, 3], 'rs-c': [4, 5] },
      },
      { 'rs-a': [0, 1, 4], 'rs-b': [2, 3, 5] },
      2,
    ],
    [
      'new partitions go to the least-loaded',
      {
        partitions: upTo(6),
        replicaSets: ['rs-a', 'rs-b'],
        current: { 'rs-a': [0, 1, 2], 'rs-b': [3] },
      },
      { 'rs-a': [0, 1, 2], 'rs-b': [3, 4, 5] },
      2,
    ],
    [
      'unbalanced current: only the excess moves',
      {
        partitions: upTo(6),
        replicaSets: ['rs-a', 'rs-b'],
        current: { 'rs-a': [0, 1, 2, 3, 4, 5], 'rs-b': [] },
      },
      { 'rs-a': [0, 1, 2], 'rs-b': [3, 4, 5] },
      3,
    ],
    [
      'P < R: the holder keeps one, the other goes to the first empty replica set',
      {
        partitions: upTo(2),
        replicaSets: ['rs-d', 'rs-c', 'rs-b', 'rs-a'],
        current: { 'rs-d': [0, 1] },
      },
      { 'rs-a': [1], 'rs-b': [], 'rs-c': [], 'rs-d': [0] },
      1,
    ],
    [
      'P % R != 0: the extra partition stays with a replica set that already has it',
      {
        partitions: upTo(5),
        replicaSets: ['rs-a', 'rs-b'],
        current: { 'rs-a': [0], 'rs-b': [1, 2, 3, 4] },
      },
      { 'rs-a': [0, 4], 'rs-b': [1, 2, 3] },
      1,
    ],
    [
      'P = 0',
      { partitions: [], replicaSets: ['rs-a'], current: { 'rs-a': [0] } },
      { 'rs-a': [] },
      0,
    ],
    [
      'one replica set takes everything',
      { partitions: upTo(3), replicaSets: ['rs-a'], current: { 'rs-x': [0, 1] } },
      { 'rs-a': [0, 1, 2] },
      3,
    ],
    [
      'partitions the topic lacks are dropped from current',
      {
        partitions: upTo(4),
        replicaSets: ['rs-a', 'rs-b'],
        current: { 'rs-a': [0, 1, 8, 9], 'rs-b': [2, 3] },
      },
      { 'rs-a': [0, 1], 'rs-b': [2, 3] },
      0,
    ],
    [
      'a partition listed twice stays with its first live holder by name',
      {
        partitions: upTo(3),
        replicaSets: ['rs-a', 'rs-b'],
        current: { 'rs-gone': [2], 'rs-b': [0, 1, 2], 'rs-a': [1] },
      },
      { 'rs-a': [1], 'rs-b': [0, 2] },
      0,
    ],
  ])('%s', (_, input, expected, moves) => {
    const result = stickyAssign(input);
    expect(result).toEqual(expected);
    expect(countMoves(input.current ?? {}, result)).toBe(moves);
  });

  test('the result does not depend on the order of the input', () => {
    const input = {
      partitions: upTo(9),
      replicaSets: ['rs-a', 'rs-b', 'rs-c', 'rs-d'],
      current: { 'rs-a': [0, 1, 2, 3, 4], 'rs-e': [5, 6], 'rs-b': [7] },
    };
    const shuffled = {
      partitions: [8, 3, 1, 0, 6, 2, 7, 5, 4],
      replicaSets: ['rs-d', 'rs-b', 'rs-c', 'rs-a'],
      current: { 'rs-b': [7], 'rs-e': [6, 5], 'rs-a': [4, 2, 0, 3, 1] },
    };
    expect(JSON.stringify(stickyAssign(shuffled))).toBe(JSON.stringify(stickyAssign(input)));
  });
});

test.each<[StrategyName, Assignment]>([
  ['range', { 'rs-a': [0, 1, 2], 'rs-b': [3, 4] }],
  ['roundRobin', { 'rs-a': [0, 2, 4], 'rs-b': [1, 3] }],
  ['sticky', { 'rs-a': [1, 2, 3], 'rs-b': [0, 4] }],
])('assignPartitions(%s) runs that strategy', (strategy, expected) => {
  const input = {
    partitions: upTo(5),
    replicaSets: ['rs-a', 'rs-b'],
    current: { 'rs-a': [1, 2, 3] },
  };
  expect(assignPartitions(strategy, input)).toEqual(expected);
});

test('no replica sets: nothing can be assigned, and no strategy hangs', () => {
  for (const strategy of ['range', 'roundRobin', 'sticky'] as const)
    expect(assignPartitions(strategy, { partitions: upTo(3), replicaSets: [] })).toEqual({});
});
