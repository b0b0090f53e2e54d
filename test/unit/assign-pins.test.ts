// Pins: pinned partitions go to their replica set whatever the strategy, the rest balance the totals,
// and pins that cannot be honoured are ignored and reported with a reason naming what is wrong.
import type { Assignment, AssignmentInput, StrategyName } from '../../src/assign/assignment.ts';
import { validatePins } from '../../src/assign/pins.ts';
import { assignPartitions } from '../../src/assign/strategy.ts';

const upTo = (count: number): number[] => Array.from({ length: count }, (_, i) => i);
const strategies: StrategyName[] = ['range', 'roundRobin', 'sticky'];

test.each<[StrategyName, AssignmentInput, Assignment]>([
  [
    'range',
    { partitions: upTo(6), replicaSets: ['rs-a', 'rs-b'], pins: { 'rs-b': [0] } },
    { 'rs-a': [1, 2, 3], 'rs-b': [0, 4, 5] },
  ],
  [
    'roundRobin',
    { partitions: upTo(6), replicaSets: ['rs-a', 'rs-b'], pins: { 'rs-b': [0] } },
    { 'rs-a': [1, 3, 5], 'rs-b': [0, 2, 4] },
  ],
  [
    'sticky',
    {
      partitions: upTo(6),
      replicaSets: ['rs-a', 'rs-b'],
      current: { 'rs-a': [0, 1, 2], 'rs-b': [3, 4, 5] },
      pins: { 'rs-b': [0] },
    },
    // 0 moves to its pin, and rs-b gives one back so that the totals stay 3 and 3.
    { 'rs-a': [1, 2, 5], 'rs-b': [0, 3, 4] },
  ],
  [
    'roundRobin',
    // rs-a is full with its pins: the ring skips it.
    { partitions: upTo(6), replicaSets: ['rs-a', 'rs-b', 'rs-c'], pins: { 'rs-a': [4, 5] } },
    { 'rs-a': [4, 5], 'rs-b': [0, 2], 'rs-c': [1, 3] },
  ],
])('%s: a pin overrides the strategy and totals stay balanced', (strategy, input, expected) =>
  expect(assignPartitions(strategy, input)).toEqual(expected),
);

test.each(strategies)(
  '%s: a replica set pinned beyond its share takes no unpinned partition',
  (strategy) => {
    const input = {
      partitions: upTo(6),
      replicaSets: ['rs-c', 'rs-b', 'rs-a'],
      current: { 'rs-a': [4, 5] },
      pins: { 'rs-a': [0, 1, 2, 3] },
    };
    expect(assignPartitions(strategy, input)).toEqual({
      'rs-a': [0, 1, 2, 3],
      'rs-b': [4],
      'rs-c': [5],
    });
  },
);

test.each(strategies)('%s: pins that cannot be honoured are ignored', (strategy) => {
  const input = {
    partitions: upTo(4),
    replicaSets: ['rs-a', 'rs-b'],
    // rs-x is unknown, 9 is not in the topic, 1 is pinned to two replica sets: only 3 → rs-a holds.
    pins: { 'rs-x': [0], 'rs-a': [1, 9, 3], 'rs-b': [1] },
  };
  const result = assignPartitions(strategy, input);
  expect(result['rs-a']).toContain(3);
  expect(result['rs-b']).toHaveLength(2);
  expect([...(result['rs-a'] ?? []), ...(result['rs-b'] ?? [])].sort()).toEqual(upTo(4));
});

test('a conflicting pin leaves a sticky partition where it is', () => {
  const input = {
    partitions: upTo(2),
    replicaSets: ['rs-a', 'rs-b'],
    current: { 'rs-b': [0], 'rs-a': [1] },
    pins: { 'rs-a': [0], 'rs-b': [0] },
  };
  expect(assignPartitions('sticky', input)).toEqual({ 'rs-a': [1], 'rs-b': [0] });
});

describe('validatePins', () => {
  const base = { partitions: upTo(6), replicaSets: ['rs-b', 'rs-a'] };

  test.each<[string, AssignmentInput['pins']]>([
    ['no pins', undefined],
    ['empty pins', {}],
    ['valid pins', { 'rs-a': [0, 5], 'rs-b': [1] }],
    ['a replica set pinned nothing', { 'rs-a': [] }],
  ])('%s: no problem', (_, pins) => expect(validatePins({ ...base, pins })).toEqual([]));

  test.each<[string, AssignmentInput['pins'], string[]]>([
    [
      'unknown replica set',
      { 'rs-x': [3, 0, 1, 2], 'rs-a': [5] },
      [
        "pins name replica set 'rs-x' (partitions 0-3), which is not one of the cube's replica sets: rs-a, rs-b",
      ],
    ],
    [
      'partitions the topic lacks',
      { 'rs-b': [7, -1, 2] },
      [
        "partition -1 is pinned to 'rs-b' but the topic has no partition -1 (it has 6 partitions: 0-5)",
        "partition 7 is pinned to 'rs-b' but the topic has no partition 7 (it has 6 partitions: 0-5)",
      ],
    ],
    [
      'a partition pinned to two replica sets',
      { 'rs-b': [4], 'rs-a': [4, 0] },
      [
        'partition 4 is pinned to more than one replica set (rs-a, rs-b); none of these pins is honoured until only one is left',
      ],
    ],
    [
      'a partition pinned twice to one replica set',
      { 'rs-a': [2, 2] },
      ["partition 2 is pinned to 'rs-a' more than once"],
    ],
    [
      'several problems, in name then partition order',
      { 'rs-z': [1], 'rs-b': [9, 0], 'rs-a': [0] },
      [
        "partition 9 is pinned to 'rs-b' but the topic has no partition 9 (it has 6 partitions: 0-5)",
        "pins name replica set 'rs-z' (partitions 1), which is not one of the cube's replica sets: rs-a, rs-b",
        'partition 0 is pinned to more than one replica set (rs-a, rs-b); none of these pins is honoured until only one is left',
      ],
    ],
  ])('%s', (_, pins, reasons) => expect(validatePins({ ...base, pins })).toEqual(reasons));

  test('the topic is described compactly when it has gaps or no partitions', () => {
    expect(
      validatePins({
        partitions: [0, 1, 2, 5, 7, 8],
        replicaSets: ['rs-a'],
        pins: { 'rs-a': [3] },
      }),
    ).toEqual([
      "partition 3 is pinned to 'rs-a' but the topic has no partition 3 (it has 6 partitions: 0-2, 5, 7-8)",
    ]);
    expect(validatePins({ partitions: [], replicaSets: ['rs-a'], pins: { 'rs-a': [0] } })).toEqual([
      "partition 0 is pinned to 'rs-a' but the topic has no partition 0 (it has no partitions)",
    ]);
  });
});
