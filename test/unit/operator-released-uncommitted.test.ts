// Which partitions a replica set keeps uncommitted data of without owning them (moved away within
// its open windows): a set holding any is not failed over (reconciler, FailoverBlocked).
import {
  partitionsReleasedUncommitted,
  releasedUncommittedPatch,
} from '../../src/operator/cube/index.ts';
import { releasedByMoves } from '../../src/operator/reassign/index.ts';

const report = (
  coverage: Record<string, { kept: [string, string][]; handedOff: [string, string][] }>,
) => ({
  partitions: [],
  coverage,
});

test.each([
  { name: 'no coverage reported', reports: [{ partitions: [] }], owned: [0], expected: [] },
  {
    name: 'an owned partition with data not committed: not released',
    reports: [report({ '0': { kept: [['0', '10']], handedOff: [] } })],
    owned: [0],
    expected: [],
  },
  {
    name: 'a partition moved away, all it kept committed',
    reports: [report({ '2': { kept: [['0', '10']], handedOff: [['0', '10']] } })],
    owned: [0],
    expected: [],
  },
  {
    name: 'a partition moved away, part of what it kept not committed',
    reports: [
      report({
        '2': {
          kept: [
            ['0', '10'],
            ['20', '30'],
          ],
          handedOff: [['0', '10']],
        },
      }),
    ],
    owned: [0],
    expected: [2],
  },
  {
    name: 'one replica committed, its sibling not yet: the set still holds it',
    reports: [
      report({ '3': { kept: [['0', '10']], handedOff: [['0', '10']] } }),
      report({ '3': { kept: [['0', '12']], handedOff: [['0', '10']] } }),
    ],
    owned: [],
    expected: [3],
  },
])('$name', ({ reports, owned, expected }) => {
  expect(partitionsReleasedUncommitted(reports, owned)).toEqual(expected);
});

// What is kept in status.releasedUncommitted, for a leader that never saw the set.
test.each<{
  name: string;
  previous: Record<string, number[]> | undefined;
  observed: Record<string, number[]>;
  sets: string[];
  expected: Record<string, number[] | null> | undefined;
}>([
  {
    name: 'nothing known, nothing observed: no patch',
    previous: undefined,
    observed: {},
    sets: ['rs-a'],
    expected: undefined,
  },
  {
    name: 'observed holding a partition: written',
    previous: undefined,
    observed: { 'rs-a': [2] },
    sets: ['rs-a', 'rs-b'],
    expected: { 'rs-a': [2] },
  },
  {
    name: 'observed as before: no patch',
    previous: { 'rs-a': [2] },
    observed: { 'rs-a': [2] },
    sets: ['rs-a'],
    expected: undefined,
  },
  {
    name: 'observed committed since: deleted',
    previous: { 'rs-a': [2] },
    observed: { 'rs-a': [] },
    sets: ['rs-a'],
    expected: { 'rs-a': null },
  },
  {
    name: 'not observed by this process (gone since before it led): kept as status says',
    previous: { 'rs-a': [2, 3] },
    observed: { 'rs-b': [] },
    sets: ['rs-a', 'rs-b'],
    expected: undefined,
  },
  {
    name: 'a set neither listed nor assigned any more: dropped',
    previous: { 'rs-a': [2], 'rs-c': [1] },
    observed: { 'rs-a': [2] },
    sets: ['rs-a'],
    expected: { 'rs-c': null },
  },
  {
    name: 'observed holding more: replaced',
    previous: { 'rs-a': [2] },
    observed: { 'rs-a': [2, 3] },
    sets: ['rs-a'],
    expected: { 'rs-a': [2, 3] },
  },
])('status patch: $name', ({ previous, observed, sets, expected }) => {
  expect(
    releasedUncommittedPatch(previous, new Map(Object.entries(observed)), new Set(sets)),
  ).toEqual(expected);
});

// Written with a move's completion: the sources left with partitions keep the moved ones' data,
// when the targets started before it was committed (startedUncommitted); else it was committed.
test.each<{
  name: string;
  previous?: Record<string, number[]>;
  moves: { partition: number; from?: string; to: string }[];
  failover?: boolean;
  uncommitted?: boolean;
  lost?: string[];
  assignment: Record<string, number[]>;
  expected: Record<string, number[]> | undefined;
}>([
  {
    name: 'a first placement: no source',
    moves: [{ partition: 0, to: 'rs-a' }],
    assignment: { 'rs-a': [0] },
    expected: undefined,
  },
  {
    name: 'a source left without partitions is sealed: nothing kept',
    moves: [{ partition: 0, from: 'rs-a', to: 'rs-b' }],
    assignment: { 'rs-b': [0] },
    expected: undefined,
  },
  {
    name: 'a source left with partitions keeps the moved one, added to what status says',
    previous: { 'rs-a': [3] },
    moves: [
      { partition: 1, from: 'rs-a', to: 'rs-b' },
      { partition: 0, from: 'rs-a', to: 'rs-b' },
    ],
    uncommitted: true,
    assignment: { 'rs-a': [2], 'rs-b': [0, 1] },
    expected: { 'rs-a': [0, 1, 3] },
  },
  {
    name: 'the targets started once the moved data was committed: nothing kept uncommitted',
    previous: { 'rs-a': [3] },
    moves: [{ partition: 0, from: 'rs-a', to: 'rs-b' }],
    assignment: { 'rs-a': [2], 'rs-b': [0] },
    expected: undefined,
  },
  {
    name: 'a source lost in Starting is fenced: left out',
    moves: [
      { partition: 0, from: 'rs-a', to: 'rs-c' },
      { partition: 1, from: 'rs-b', to: 'rs-c' },
    ],
    uncommitted: true,
    lost: ['rs-a'],
    assignment: { 'rs-a': [2], 'rs-b': [3], 'rs-c': [0, 1] },
    expected: { 'rs-b': [1] },
  },
  {
    name: 'a failover: its sources are fenced',
    moves: [{ partition: 0, from: 'rs-a', to: 'rs-b' }],
    failover: true,
    assignment: { 'rs-a': [1], 'rs-b': [0] },
    expected: undefined,
  },
])(
  'with a completion: $name',
  ({ previous, moves, failover, uncommitted, lost, assignment, expected }) => {
    expect(
      releasedByMoves(
        previous,
        {
          moves,
          ...(failover ? { failover: { replicaSets: ['rs-a'] } } : {}),
          ...(uncommitted ? { startedUncommitted: true } : {}),
          ...(lost ? { lostSets: { replicaSets: lost } } : {}),
        },
        assignment,
      ),
    ).toEqual(expected);
  },
);
