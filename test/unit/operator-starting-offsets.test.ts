// Where partitions without a previous owner start: `startingOffsets` for the partitions a cube
// starts with, the log start for partitions added to the topic afterwards (KYLIN-4683).
import { type StartingOffsets, startingOffsetRules } from '../../src/operator/topic-metadata.ts';

interface Case {
  name: string;
  spec: StartingOffsets;
  fresh: number[];
  epochs: Record<string, number> | undefined;
  expected: Record<number, StartingOffsets>;
}

test.each<Case>([
  {
    name: 'a new cube: every partition by the spec (latest)',
    spec: 'latest',
    fresh: [0, 1, 2],
    epochs: undefined,
    expected: { 0: 'latest', 1: 'latest', 2: 'latest' },
  },
  {
    name: 'a new cube: every partition by the spec (earliest)',
    spec: 'earliest',
    fresh: [0, 1],
    epochs: {},
    expected: { 0: 'earliest', 1: 'earliest' },
  },
  {
    name: 'partitions added to the topic of a started latest cube start at their log start',
    spec: 'latest',
    fresh: [4, 5],
    epochs: { '0': 1, '1': 2, '2': 1, '3': 1 },
    expected: { 4: 'earliest', 5: 'earliest' },
  },
  {
    name: 'a partition the cube held before keeps the spec rule',
    spec: 'latest',
    fresh: [1, 4],
    epochs: { '0': 1, '1': 2 },
    expected: { 1: 'latest', 4: 'earliest' },
  },
])('$name', ({ spec, fresh, epochs, expected }) => {
  expect(Object.fromEntries(startingOffsetRules(spec, fresh, epochs))).toEqual(expected);
});
