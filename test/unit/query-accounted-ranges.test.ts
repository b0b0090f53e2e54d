// Offsets an answer accounts for without counting them: a lost range explains only the part of a
// partition's gaps it names; a gap no source names stays missing, and a range that counted pieces
// hold is no gap at all. A cube reading from the earliest offset of a log that started past 0
// never had the offsets before it.
import {
  type AccountedRanges,
  addAccounted,
  deletedBeforeTheCube,
  explainGaps,
  lostInStatus,
} from '../../src/query/accounted-ranges.ts';
import type { CubeAssignment } from '../../src/api/cube-assignment.ts';
import type { OffsetRange } from '../../src/receiver/offset-ranges.ts';

const r = (from: number, to: number): OffsetRange => ({ from: BigInt(from), to: BigInt(to) });

test.each<{
  name: string;
  gaps: [number, number][];
  lost: [number, number][];
  explained: [string, string][];
  left: [number, number][];
}>([
  { name: 'no gap: nothing to explain', gaps: [], lost: [[100, 250]], explained: [], left: [] },
  {
    name: 'a gap exactly lost',
    gaps: [[100, 250]],
    lost: [[100, 250]],
    explained: [['100', '250']],
    left: [],
  },
  {
    name: 'a gap wider than the lost range: the rest stays missing, on both sides',
    gaps: [[90, 260]],
    lost: [[100, 250]],
    explained: [['100', '250']],
    left: [
      [90, 100],
      [250, 260],
    ],
  },
  {
    name: 'a lost range wider than the gap (a sibling read part of it): only the gap is lost',
    gaps: [[150, 200]],
    lost: [[100, 250]],
    explained: [['150', '200']],
    left: [],
  },
  {
    name: 'two gaps, one lost range each, and a gap no source names',
    gaps: [
      [10, 20],
      [30, 40],
      [50, 60],
    ],
    lost: [
      [10, 20],
      [50, 60],
    ],
    explained: [
      ['10', '20'],
      ['50', '60'],
    ],
    left: [[30, 40]],
  },
  {
    name: 'no lost range: every gap missing',
    gaps: [[0, 5]],
    lost: [],
    explained: [],
    left: [[0, 5]],
  },
])('$name', ({ gaps, lost, explained, left }) => {
  const accounted = addAccounted(
    new Map(),
    'retention',
    new Map([[0, lost.map(([a, b]) => r(a, b))]]),
  );
  const out = explainGaps(
    gaps.map(([a, b]) => r(a, b)),
    accounted.get(0),
  );
  expect(out.explained).toEqual(explained.map(([from, to]) => ({ from, to, reason: 'retention' })));
  expect(out.left).toEqual(left.map(([a, b]) => r(a, b)));
});

test('ranges from JSON and from a Map add up, merged per partition', () => {
  const accounted: AccountedRanges = new Map();
  addAccounted(accounted, 'retention', { '0': [['100', '150']], '2': [['5', '6']] });
  addAccounted(accounted, 'retention', new Map([[0, [r(150, 250), r(300, 310)]]]));
  addAccounted(accounted, 'retention', undefined);
  expect(accounted).toEqual(
    new Map([
      [0, new Map([['retention', [r(100, 250), r(300, 310)]]])],
      [2, new Map([['retention', [r(5, 6)]]])],
    ]),
  );
});

test("the cube's status: each partition's lost ranges, rows without them skipped", () => {
  const cube = {
    status: {
      partitions: [
        {
          partition: 0,
          replicaSet: 'rs-a',
          lostOffsets: '150',
          lostRanges: [{ from: '100', to: '250' }],
        },
        { partition: 1, replicaSet: 'rs-a' },
      ],
    },
  } as unknown as CubeAssignment;
  expect(lostInStatus(cube)).toEqual(new Map([[0, [r(100, 250)]]]));
  expect(lostInStatus({ status: undefined })).toEqual(new Map());
});

test.each<[string, 'earliest' | 'latest', object, Record<number, [number, number]>]>([
  [
    'earliest: before where each partition was first placed',
    'earliest',
    {
      firstOffsets: { '0': '40', '1': '0' },
      epochs: { '0': 3, '1': 1 },
      epochStarts: { '0': '900' },
    },
    { 0: [0, 40] },
  ],
  [
    'a cube of before firstOffsets: epochStarts while in its first epoch, nothing after a move',
    'earliest',
    { epochs: { '0': 1, '1': 2 }, epochStarts: { '0': '40', '1': '900' } },
    { 0: [0, 40] },
  ],
  ["latest: never the cube's to read", 'latest', { firstOffsets: { '0': '40' } }, {}],
  ['no status yet', 'earliest', {}, {}],
])('%s', (_, startingOffsets, status, expected) => {
  const cube = { spec: { source: { startingOffsets } }, status } as unknown as CubeAssignment;
  expect(deletedBeforeTheCube(cube)).toEqual(
    new Map(Object.entries(expected).map(([p, [a, b]]) => [Number(p), [r(a, b)]])),
  );
});
