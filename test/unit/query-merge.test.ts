// The query service's merge: committed windows and live segments become one answer in which every
// offset counts once, decided from the offsets and epochs alone, with per-partition coverage that
// says where it has a gap and why.
import { resetAccounting, resetRangeReason } from '../../src/api/reset-ranges.ts';
import { type Piece, mergePieces, predatesTheCube, subtractRanges } from '../../src/query/merge.ts';
import type { OffsetRange } from '../../src/receiver/offset-ranges.ts';

const r = (from: number, to: number): OffsetRange => ({ from: BigInt(from), to: BigInt(to) });

/** A piece whose rows are its own name: the merge's answer says which pieces count. */
function piece(
  kind: Piece<string>['kind'],
  source: string,
  ranges: Record<number, [number, number][]>,
  epoch = 1,
  windowStart = 0,
): Piece<string> {
  const map = new Map(
    Object.entries(ranges).map(([p, list]) => [Number(p), list.map(([a, b]) => r(a, b))]),
  );
  return {
    kind,
    source,
    replicaSet: source.split(':')[0]!,
    windowStart,
    ranges: map,
    epochs: new Map([...map.keys()].map((p) => [p, epoch])),
    rows: source,
  };
}

const ends = (e: Record<number, number>) =>
  new Map(Object.entries(e).map(([p, end]) => [Number(p), { end: BigInt(end) }]));

interface Case {
  name: string;
  pieces: Piece<string>[];
  bounds: ReturnType<typeof ends>;
  counted: string[];
  complete: boolean;
  missing?: Record<number, [string, string | undefined][]>;
  duplicates?: number;
}

const cases: Case[] = [
  {
    name: 'committed and live windows side by side: both count',
    pieces: [
      piece('committed', 'rs-a:w0', { 0: [[0, 100]], 1: [[0, 50]] }),
      piece('live', 'rs-a:w1', { 0: [[100, 130]], 1: [[50, 60]] }),
    ],
    bounds: ends({ 0: 130, 1: 60 }),
    counted: ['rs-a:w0', 'rs-a:w1'],
    complete: true,
  },
  {
    name: 'a live segment committed meanwhile (read live, then in the record): counted once, as committed',
    pieces: [
      piece('live', 'rs-a-0:w0', { 0: [[0, 100]] }),
      piece('committed', 'rs-a:w0', { 0: [[0, 100]] }),
      piece('live', 'rs-a-0:w1', { 0: [[100, 120]] }),
    ],
    bounds: ends({ 0: 120 }),
    counted: ['rs-a:w0', 'rs-a-0:w1'],
    complete: true,
    duplicates: 1,
  },
  {
    name: 'a move: source and target both hold the window, at offsets either side of the stop',
    pieces: [
      piece('committed', 'rs-a:w0', { 2: [[0, 40]] }, 1),
      piece('live', 'rs-a-0:w0', { 2: [[40, 70]] }, 1),
      piece('live', 'rs-b-0:w0', { 2: [[70, 90]] }, 2),
    ],
    bounds: ends({ 2: 90 }),
    counted: ['rs-a:w0', 'rs-b-0:w0', 'rs-a-0:w0'],
    complete: true,
  },
  {
    name: 'a fence: a copy read past the stop under the old epoch loses to the new owner',
    pieces: [
      piece('live', 'rs-b-0:w0', { 2: [[70, 90]] }, 2),
      piece('live', 'rs-a-1:w0', { 2: [[70, 80]] }, 1),
      piece('committed', 'rs-a:w0', { 2: [[0, 70]] }, 1),
    ],
    bounds: ends({ 2: 90 }),
    counted: ['rs-a:w0', 'rs-b-0:w0'],
    complete: true,
    duplicates: 1,
  },
  {
    name: 'a fenced copy holding more than the new owner: refused, its own offsets reported missing',
    pieces: [
      piece('live', 'rs-b-0:w0', { 2: [[75, 90]] }, 2),
      piece('live', 'rs-a-1:w0', { 2: [[70, 80]] }, 1),
      piece('committed', 'rs-a:w0', { 2: [[0, 70]] }, 1),
    ],
    bounds: ends({ 2: 90 }),
    counted: ['rs-a:w0', 'rs-b-0:w0'],
    complete: false,
    missing: { 2: [['70', '75']] },
  },
  {
    name: 'a gap between committed and live data: incomplete, the gap named',
    pieces: [
      piece('committed', 'rs-a:w0', { 0: [[0, 100]] }),
      piece('live', 'rs-a-0:w2', { 0: [[150, 200]] }),
    ],
    bounds: ends({ 0: 200 }),
    counted: ['rs-a:w0', 'rs-a-0:w2'],
    complete: false,
    missing: { 0: [['100', '150']] },
  },
  {
    name: 'the live position past every piece: the offsets in between are missing',
    pieces: [piece('committed', 'rs-a:w0', { 0: [[0, 100]] })],
    bounds: ends({ 0: 120 }),
    counted: ['rs-a:w0'],
    complete: false,
    missing: { 0: [['100', '120']] },
  },
  {
    name: 'two committed copies overlapping in part (never written; refused all the same)',
    pieces: [
      piece('committed', 'rs-a:w0', { 0: [[0, 100]] }, 2),
      piece('committed', 'rs-b:w0', { 0: [[90, 120]] }, 1),
    ],
    bounds: ends({ 0: 120 }),
    counted: ['rs-a:w0'],
    complete: false,
    missing: { 0: [['100', '120']] },
  },
];

test.each(cases)('$name', (c) => {
  const merged = mergePieces({ pieces: c.pieces, bounds: c.bounds });
  expect(merged.counted.map((p) => p.rows).sort()).toEqual([...c.counted].sort());
  expect(merged.complete).toBe(c.complete);
  if (c.duplicates !== undefined) expect(merged.duplicates).toBe(c.duplicates);
  const missing = Object.fromEntries(
    merged.partitions
      .filter((p) => p.missing.length > 0)
      .map((p) => [p.partition, p.missing.map((m) => [m.from, m.to])]),
  );
  const expected = Object.fromEntries(
    Object.entries(c.missing ?? {}).filter(([, list]) => list.length > 0),
  );
  expect(missing).toEqual(expected);
  // Whatever counts holds every offset once.
  for (const p of merged.partitions) {
    const all = merged.counted.flatMap((x) => x.ranges.get(p.partition) ?? []);
    const sum = all.reduce((n, x) => n + (x.to - x.from), 0n);
    const covered = p.covered.reduce((n, [a, b]) => n + (BigInt(b) - BigInt(a)), 0n);
    expect(sum).toBe(covered);
  }
});

test('a replica set that could not be read: its partitions are incomplete, with the reason, even without a visible gap', () => {
  const merged = mergePieces({
    pieces: [
      piece('committed', 'rs-a:w0', { 0: [[0, 100]] }),
      piece('live', 'rs-b-0:w0', { 1: [[0, 5]] }),
    ],
    bounds: ends({ 0: 100, 1: 5 }),
    unavailable: [{ partitions: [0], reason: 'replica set rs-a: no ready receiver' }],
  });
  expect(merged.complete).toBe(false);
  expect(merged.partitions.map((p) => [p.partition, p.complete, p.missing])).toEqual([
    [0, false, [{ from: '100', reason: 'replica set rs-a: no ready receiver' }]],
    [1, true, []],
  ]);
});

test('deep storage unreachable: nothing is complete', () => {
  const merged = mergePieces({
    pieces: [piece('live', 'rs-a-0:w5', { 0: [[500, 510]] })],
    bounds: ends({ 0: 510 }),
    unavailable: [{ partitions: 'all', reason: 'deep storage: connect ECONNREFUSED' }],
  });
  expect(merged.complete).toBe(false);
  expect(merged.partitions[0]!.missing[0]!.reason).toMatch(/deep storage/);
});

test('where the epoch began bounds the coverage: offsets before the first piece are missing', () => {
  const merged = mergePieces({
    pieces: [piece('live', 'rs-b-0:w0', { 3: [[20, 30]] }, 2)],
    bounds: new Map([[3, { start: 10n, end: 30n }]]),
  });
  expect(merged.partitions[0]).toMatchObject({
    from: '10',
    to: '30',
    complete: false,
    missing: [{ from: '10', to: '20' }],
  });
});

test('pending offsets (no event, no segment yet) are accounted, not counted', () => {
  const merged = mergePieces({
    pieces: [piece('live', 'rs-a-0:w0', { 0: [[0, 10]] })],
    pending: new Map([[0, [r(10, 11)]]]),
    bounds: ends({ 0: 11 }),
  });
  expect(merged.complete).toBe(true);
  expect(merged.partitions[0]!.covered).toEqual([['0', '11']]);
});

test.each([
  { ranges: [r(0, 10)], minus: [r(2, 4), r(6, 8)], out: [r(0, 2), r(4, 6), r(8, 10)] },
  { ranges: [r(0, 10)], minus: [r(0, 10)], out: [] },
  { ranges: [r(0, 5), r(7, 9)], minus: [r(3, 8)], out: [r(0, 3), r(8, 9)] },
  { ranges: [r(5, 9)], minus: [], out: [r(5, 9)] },
])('subtractRanges %#', ({ ranges, minus, out }) => {
  expect(subtractRanges(ranges, minus)).toEqual(out);
});

describe('offsets reset on purpose', () => {
  // Partition 0 read [0, 100) under epoch 1, was reset back to 40 (epoch 2, replay 1) and read
  // [40, 130); then reset forward from 130 to 200 (epoch 3, still replay 1) and read [200, 220).
  const accounting = resetAccounting([
    {
      id: 'back',
      to: 'given offsets',
      result: 'Applied',
      at: '2026-01-01T00:00:00.000Z',
      partitions: [{ partition: 0, from: '100', to: '40', epoch: 2 }],
    },
    {
      id: 'fwd',
      to: 'latest',
      result: 'Applied',
      at: '2026-01-01T00:01:00.000Z',
      partitions: [{ partition: 0, from: '130', to: '200', epoch: 3 }],
    },
  ]);
  const resets = accounting.ranges.map((x) => ({ ...x, reason: resetRangeReason(x) }));
  const pieces = [
    piece('committed', 'rs-a:old', { 0: [[0, 100]] }, 1),
    piece('committed', 'rs-a:replay', { 0: [[40, 130]] }, 2),
    piece('live', 'rs-a:after', { 0: [[200, 220]] }, 3),
  ];

  test.each([
    ['with the resets: every copy counts, skipped and re-read said so', true],
    ['without: the replay conflicts and the skipped offsets are missing', false],
  ])('%s', (_name, known) => {
    const merged = mergePieces({
      pieces,
      bounds: new Map([[0, { start: 0n, end: 220n }]]),
      ...(known ? { replayOf: accounting.replayOf, resets } : {}),
    });
    if (known) {
      expect(merged.counted.map((p) => p.rows).sort()).toEqual([
        'rs-a:after',
        'rs-a:old',
        'rs-a:replay',
      ]);
      expect(merged.conflicts).toEqual([]);
      expect(merged.complete).toBe(true);
      expect(merged.partitions[0]!.resets).toEqual([
        { from: '40', to: '100', reason: 're-read after reset back' },
        { from: '130', to: '200', reason: 'skipped by reset fwd' },
      ]);
    } else {
      expect(merged.conflicts).toHaveLength(1);
      expect(merged.complete).toBe(false);
      expect(merged.partitions[0]!.missing.map((m) => [m.from, m.to])).toEqual([
        ['0', '40'],
        ['130', '200'],
      ]);
    }
  });
});

describe('predatesTheCube', () => {
  const r = (from: number, to: number) => ({ from: BigInt(from), to: BigInt(to) });
  const began = new Map([
    [0, 10n],
    [1, 0n],
  ]);
  test.each<[string, Map<number, { from: bigint; to: bigint }[]>, boolean]>([
    ['all before the beginning', new Map([[0, [r(0, 10)]]]), true],
    ['one offset at the beginning', new Map([[0, [r(0, 11)]]]), false],
    ['a partition whose beginning is not known', new Map([[2, [r(0, 1)]]]), false],
    [
      'one partition before, one after',
      new Map([
        [0, [r(0, 5)]],
        [1, [r(0, 1)]],
      ]),
      false,
    ],
    ['nothing held', new Map([[0, [r(3, 3)]]]), false],
  ])('%s: %s', (_, ranges, expected) => {
    expect(predatesTheCube(ranges, began)).toBe(expected);
  });
  test('no beginning known: never', () => {
    expect(predatesTheCube(new Map([[0, [r(0, 1)]]]), undefined)).toBe(false);
  });
});
