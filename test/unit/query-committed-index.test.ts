// The committed index extended by new windows: the same outcome as an index of the whole view
// (pieces counted, offsets, rejected records, lost ranges, blocks), a block with no new piece
// kept as it was; and no extension where a new piece meets offsets already held.
import { CommittedIndex } from '../../src/query/committed-index.ts';
import type { CommittedWindow } from '../../src/query/committed-view.ts';

const M = 60_000;

/** Window `w` (minutes) of `set` holding partition p's offsets [from, to). */
function window(
  w: number,
  set: string,
  p: number,
  [from, to]: [number, number],
  extra: { rejected?: Record<string, number>; lost?: [number, number] } = {},
): CommittedWindow {
  const dir = `orders/window=${w * M}/replicaSet=${set}`;
  const hand = `${set}-0.e1.${w}`;
  return {
    windowStart: w * M,
    replicaSet: set,
    dir,
    handOffKeys: [`${dir}/${hand}`],
    record: {
      version: 1,
      receiver: `${set}-0`,
      replicaSet: set,
      windowStart: new Date(w * M).toISOString(),
      committedAt: new Date(0).toISOString(),
      offsetRanges: { [p]: [[String(from), String(to)]] },
      handOffs: [
        {
          dir: hand,
          offsetRanges: { [p]: [[String(from), String(to)]] },
          epochs: { [p]: 1 },
          ...(extra.rejected ? { rejected: { [p]: extra.rejected } } : {}),
          ...(extra.lost
            ? { lostRanges: { [p]: [[String(extra.lost[0]), String(extra.lost[1])]] } }
            : {}),
        },
      ],
    },
  };
}

const shape = (i: CommittedIndex) => ({
  windows: i.windows,
  handOffs: i.handOffs,
  counted: i.counted.map((r) => r.key).sort(),
  coverage: i.count.coverage,
  countedBefore: i.count.countedBefore,
  lost: i.lost,
  rejected: i.rejectedSummary(),
  blocks: i.counted.map((r) => i.blockOf(r).id),
});

// An hour of windows of partition 0 (rs-a) and partition 1 (rs-b), then the next hour's first.
const before = [
  window(0, 'rs-a', 0, [0, 10], { rejected: { bad_json: 1 } }),
  window(1, 'rs-a', 0, [10, 20]),
  window(0, 'rs-b', 1, [0, 5]),
  window(59, 'rs-b', 1, [5, 9], { lost: [9, 12] }),
];

test.each<[string, CommittedWindow[]]>([
  ['a new window in a new block', [window(60, 'rs-a', 0, [20, 30], { rejected: { too_late: 2 } })]],
  ['a new window in the last block', [window(2, 'rs-a', 0, [20, 30])]],
  [
    'windows of both sets, one with lost offsets',
    [
      window(61, 'rs-b', 1, [12, 20], { lost: [9, 12] }),
      window(60, 'rs-a', 0, [25, 30], { lost: [20, 25] }),
    ],
  ],
  ['nothing new', []],
])('%s: as the index of everything', (_, added) => {
  const base = new CommittedIndex(before, M);
  const extended = new CommittedIndex(added, M, base);
  expect(extended.extendsCleanly).toBe(true);
  expect(shape(extended)).toEqual(shape(new CommittedIndex([...before, ...added], M)));
  // The base is not changed by it.
  expect(shape(base)).toEqual(shape(new CommittedIndex(before, M)));
});

test('a block with no new piece keeps its id (and so its rollups); a block with one gets a new id', () => {
  const base = new CommittedIndex(before, M);
  const extended = new CommittedIndex([window(60, 'rs-a', 0, [20, 30])], M, base);
  const first = base.counted[0]!;
  expect(extended.blockOf(first)).toBe(base.blockOf(first));
  const later = new CommittedIndex([window(2, 'rs-a', 0, [20, 30])], M, base);
  expect(later.blockOf(first).id).not.toBe(base.blockOf(first).id);
});

test.each<[string, CommittedWindow[]]>([
  ['a copy of offsets counted already', [window(3, 'rs-a', 0, [0, 10])]],
  ['some offsets counted already', [window(3, 'rs-a', 0, [15, 25])]],
  [
    'two new pieces sharing offsets',
    [window(60, 'rs-a', 0, [20, 30]), window(61, 'rs-a', 0, [25, 35])],
  ],
])('%s: no clean extension (the index of everything is made instead)', (_, added) => {
  expect(new CommittedIndex(added, M, new CommittedIndex(before, M)).extendsCleanly).toBe(false);
});
