// The reassignment plan: only partitions that change owner move, sorted by partition.
import type { Assignment, Move } from '../../src/assign/assignment.ts';
import { countMoves, diffAssignments } from '../../src/assign/diff.ts';

test.each<[string, Assignment, Assignment, Move[]]>([
  ['identical', { 'rs-a': [0, 1], 'rs-b': [2] }, { 'rs-b': [2], 'rs-a': [1, 0] }, []],
  ['both empty', {}, {}, []],
  [
    'nothing applied yet: every partition is new',
    {},
    { 'rs-b': [1], 'rs-a': [2, 0] },
    [
      { partition: 0, to: 'rs-a' },
      { partition: 1, to: 'rs-b' },
      { partition: 2, to: 'rs-a' },
    ],
  ],
  [
    'one partition changes owner, the others stay',
    { 'rs-a': [0, 1, 2], 'rs-b': [3] },
    { 'rs-a': [0, 1], 'rs-b': [3, 2] },
    [{ partition: 2, from: 'rs-a', to: 'rs-b' }],
  ],
  [
    'a swap is two moves, sorted by partition',
    { 'rs-a': [5], 'rs-b': [1] },
    { 'rs-a': [1], 'rs-b': [5] },
    [
      { partition: 1, from: 'rs-b', to: 'rs-a' },
      { partition: 5, from: 'rs-a', to: 'rs-b' },
    ],
  ],
  [
    'from a removed replica set',
    { 'rs-gone': [0], 'rs-a': [1] },
    { 'rs-a': [0, 1], 'rs-b': [] },
    [{ partition: 0, from: 'rs-gone', to: 'rs-a' }],
  ],
  [
    'a new partition has no from',
    { 'rs-a': [0] },
    { 'rs-a': [0], 'rs-b': [1] },
    [{ partition: 1, to: 'rs-b' }],
  ],
  ['a partition only in current is not a move', { 'rs-a': [0, 7] }, { 'rs-a': [0] }, []],
  [
    'a partition listed twice in current stays if one holder is the desired owner',
    { 'rs-a': [0, 1], 'rs-b': [0, 1] },
    { 'rs-b': [0], 'rs-c': [1] },
    [{ partition: 1, from: 'rs-a', to: 'rs-c' }],
  ],
  [
    'replica set names that are Object.prototype members are ordinary names',
    { constructor: [0] },
    { toString: [0], constructor: [1] },
    [
      { partition: 0, from: 'constructor', to: 'toString' },
      { partition: 1, to: 'constructor' },
    ],
  ],
])('%s', (_, current, desired, moves) => {
  expect(diffAssignments(current, desired)).toStrictEqual(moves);
  expect(countMoves(current, desired)).toBe(moves.length);
});
