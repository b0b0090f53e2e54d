// Which segments a release seals: those holding offsets of a released partition, an empty range
// list holding none.
import { holdsAnyOf } from '../../src/receiver/segment-upkeep.ts';

const ranges = new Map([
  [0, [{ from: 0n, to: 5n }]],
  [1, []],
]);

test.each([
  { released: [0], holds: true },
  { released: [2, 0], holds: true },
  { released: [1], holds: false },
  { released: [2], holds: false },
  { released: [], holds: false },
])('a segment holding offsets of partition 0 only, released $released: $holds', (c) => {
  expect(holdsAnyOf({ ranges }, c.released)).toBe(c.holds);
});
