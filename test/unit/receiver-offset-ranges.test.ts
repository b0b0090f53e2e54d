// Offset ranges: addRange keeps a partition's coverage sorted, disjoint and merged; tilingProblems
// finds every gap and overlap of segments' ranges over a partition's log.
import fc from 'fast-check';
import {
  type OffsetRange,
  addRange,
  rangesFromJson,
  rangesToJson,
  tilingProblems,
} from '../../src/receiver/offset-ranges.ts';

const r = (from: number, to: number): OffsetRange => ({ from: BigInt(from), to: BigInt(to) });
const build = (adds: [number, number][]): OffsetRange[] => {
  const ranges: OffsetRange[] = [];
  for (const [from, to] of adds) addRange(ranges, BigInt(from), BigInt(to));
  return ranges;
};

describe('addRange', () => {
  test.each<[string, [number, number][], [number, number][]]>([
    ['one range', [[0, 5]], [[0, 5]]],
    ['an empty range is ignored', [[3, 3]], []],
    ['a reversed range is ignored', [[5, 3]], []],
    [
      'adjacent single offsets merge',
      [
        [0, 1],
        [1, 2],
        [2, 3],
      ],
      [[0, 3]],
    ],
    [
      'a range touching the end merges',
      [
        [0, 5],
        [5, 9],
      ],
      [[0, 9]],
    ],
    [
      'a range inside the last one changes nothing',
      [
        [0, 10],
        [3, 4],
      ],
      [[0, 10]],
    ],
    [
      'an overlapping range extends the last one',
      [
        [0, 10],
        [8, 12],
      ],
      [[0, 12]],
    ],
    [
      'a gap keeps two ranges',
      [
        [0, 5],
        [7, 9],
      ],
      [
        [0, 5],
        [7, 9],
      ],
    ],
    [
      'a range before all others is sorted first',
      [
        [10, 12],
        [0, 2],
      ],
      [
        [0, 2],
        [10, 12],
      ],
    ],
    [
      'a range touching the start merges',
      [
        [10, 12],
        [5, 10],
      ],
      [[5, 12]],
    ],
    [
      'a range filling a gap joins both sides',
      [
        [0, 5],
        [7, 9],
        [5, 7],
      ],
      [[0, 9]],
    ],
    [
      'a range spanning several merges them all',
      [
        [0, 2],
        [4, 6],
        [8, 10],
        [1, 9],
      ],
      [[0, 10]],
    ],
    [
      'a range inside a middle one changes nothing',
      [
        [0, 2],
        [4, 6],
        [8, 10],
        [4, 5],
      ],
      [
        [0, 2],
        [4, 6],
        [8, 10],
      ],
    ],
    [
      'a range between two, touching neither',
      [
        [0, 2],
        [8, 10],
        [4, 6],
      ],
      [
        [0, 2],
        [4, 6],
        [8, 10],
      ],
    ],
    [
      'a range covering everything',
      [
        [2, 3],
        [5, 6],
        [0, 10],
      ],
      [[0, 10]],
    ],
  ])('%s', (_, adds, expected) => {
    expect(build(adds)).toEqual(expected.map(([from, to]) => r(from, to)));
  });

  test('offsets beyond 2^53 stay exact', () => {
    const big = 2n ** 62n;
    const ranges: OffsetRange[] = [];
    addRange(ranges, big, big + 1n);
    addRange(ranges, big + 1n, big + 2n);
    expect(ranges).toEqual([{ from: big, to: big + 2n }]);
    expect(rangesToJson(ranges)).toEqual([['4611686018427387904', '4611686018427387906']]);
  });

  test('the result is the union of the added ranges, sorted, disjoint and not touching', () => {
    const span = fc
      .tuple(fc.nat(60), fc.nat(8))
      .map(([from, len]): [number, number] => [from, from + len]);
    fc.assert(
      fc.property(fc.array(span, { maxLength: 30 }), (adds) => {
        const ranges = build(adds);
        const covered = new Set<number>();
        for (const [from, to] of adds) for (let o = from; o < to; o++) covered.add(o);
        const fromRanges = new Set<number>();
        for (const { from, to } of ranges)
          for (let o = Number(from); o < Number(to); o++) fromRanges.add(o);
        expect([...fromRanges].sort((a, b) => a - b)).toEqual([...covered].sort((a, b) => a - b));
        for (let i = 0; i < ranges.length; i++) {
          expect(ranges[i]!.from < ranges[i]!.to).toBe(true);
          // Strictly after the previous end: touching ranges must have been merged.
          if (i > 0) expect(ranges[i]!.from > ranges[i - 1]!.to).toBe(true);
        }
      }),
    );
  });
});

test('ranges survive a round trip through JSON', () => {
  const ranges = [r(0, 5), r(7, 9)];
  expect(rangesToJson(ranges)).toEqual([
    ['0', '5'],
    ['7', '9'],
  ]);
  expect(rangesFromJson(rangesToJson(ranges))).toEqual(ranges);
});

describe('tilingProblems', () => {
  const problems = (ranges: OffsetRange[], start: number, end: number): string[] =>
    tilingProblems(ranges, BigInt(start), BigInt(end)).map((p) => `${p.kind} [${p.from}, ${p.to})`);

  test.each<[string, OffsetRange[], number, number, string[]]>([
    ['one range covering the interval', [r(0, 10)], 0, 10, []],
    ['ranges from several segments, in any order', [r(5, 10), r(0, 3), r(3, 5)], 0, 10, []],
    ['an empty interval with no range', [], 7, 7, []],
    ['no range at all', [], 0, 10, ['gap [0, 10)']],
    ['a gap at the start', [r(2, 10)], 0, 10, ['gap [0, 2)']],
    ['a gap at the end', [r(0, 8)], 0, 10, ['gap [8, 10)']],
    ['a gap in the middle', [r(0, 4), r(6, 10)], 0, 10, ['gap [4, 6)']],
    ['two gaps', [r(1, 4), r(6, 9)], 0, 10, ['gap [0, 1)', 'gap [4, 6)', 'gap [9, 10)']],
    ['a range covered twice', [r(0, 10), r(0, 10)], 0, 10, ['overlap [0, 10)']],
    ['a partial overlap', [r(0, 6), r(4, 10)], 0, 10, ['overlap [4, 6)']],
    ['a range inside another', [r(0, 10), r(3, 5)], 0, 10, ['overlap [3, 5)']],
    // Each range reports what it shares with the ranges starting before it.
    [
      'a range straddling two others',
      [r(0, 4), r(4, 8), r(2, 6), r(8, 10)],
      0,
      10,
      ['overlap [2, 4)', 'overlap [4, 6)'],
    ],
    [
      'a range inside two others',
      [r(0, 10), r(2, 8), r(4, 6)],
      0,
      10,
      ['overlap [2, 8)', 'overlap [4, 6)'],
    ],
    ['a gap and an overlap', [r(0, 5), r(3, 6), r(8, 10)], 0, 10, ['overlap [3, 5)', 'gap [6, 8)']],
    // Coverage outside [start, end) is offsets accounted that the log does not hold there.
    ['coverage past the end', [r(0, 12)], 0, 10, ['overlap [10, 12)']],
    ['coverage before the start', [r(0, 10)], 2, 10, ['overlap [0, 2)']],
    ['a range before the start only', [r(0, 2), r(5, 10)], 5, 10, ['overlap [0, 2)']],
  ])('%s', (_, ranges, start, end, expected) => {
    expect(problems(ranges, start, end)).toEqual(expected);
  });

  test('a tiling cut into random pieces, shuffled, has no problem; dropping or repeating a piece does', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.integer({ min: 1, max: 99 }), { maxLength: 20 }),
        fc.nat(),
        fc.nat(),
        (cuts, seed, pick) => {
          const points = [0, ...cuts.sort((a, b) => a - b), 100];
          const pieces = points.slice(1).map((to, i) => r(points[i]!, to));
          const shuffled = [...pieces].sort(
            (a, b) =>
              ((Number(a.from) * 7919 + seed) % 101) - ((Number(b.from) * 7919 + seed) % 101),
          );
          expect(problems(shuffled, 0, 100)).toEqual([]);
          const victim = pieces[pick % pieces.length]!;
          const without = shuffled.filter((p) => p !== victim);
          expect(problems(without, 0, 100)).toEqual([`gap [${victim.from}, ${victim.to})`]);
          expect(problems([...shuffled, victim], 0, 100)).toEqual([
            `overlap [${victim.from}, ${victim.to})`,
          ]);
        },
      ),
    );
  });
});
