// Which partitions a replica set keeps uncommitted data of without owning them (moved away within
// its open windows): a set holding any is not failed over (reconciler, FailoverBlocked).
import { partitionsReleasedUncommitted } from '../../src/operator/reconciler.ts';

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
