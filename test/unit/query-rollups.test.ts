// The query service's speed-ups change no answer: the committed view merged once and forked per
// answer counts what one merge of every piece counts; rollups of whole hours answer what the
// windows they hold answer, for any time range and granularity.
import fc from 'fast-check';
import { CommittedViewCache } from '../../src/query/committed-cache.ts';
import type { CommittedBlock, CommittedRef } from '../../src/query/committed-index.ts';
import {
  type Piece,
  PieceCount,
  finishMerge,
  mergePieces,
  piecePreference,
} from '../../src/query/merge.ts';
import { rollupRuns } from '../../src/query/rollups.ts';
import type { Segment } from '../../src/receiver/segments.ts';
import { MemoryDeepStorage } from '../support/memory-deep-storage.ts';
import { commitSegments, oneReceiverService, oneSetCube } from '../support/query-fixtures.ts';
import { schemaOf } from '../support/schemas.ts';

const M = 60_000;
const H = 60 * M;

const arbitraryPiece = fc
  .record({
    kind: fc.constantFrom<Piece<string>['kind']>('committed', 'live'),
    epoch: fc.integer({ min: 0, max: 2 }),
    window: fc.integer({ min: 0, max: 3 }),
    partition: fc.integer({ min: 0, max: 1 }),
    from: fc.integer({ min: 0, max: 30 }),
    length: fc.integer({ min: 1, max: 12 }),
  })
  .map((x, i = 0): Piece<string> => ({
    kind: x.kind,
    source: `${x.kind} ${x.window} ${x.partition} ${x.from} ${x.length} ${x.epoch} ${i}`,
    replicaSet: 'rs-a',
    windowStart: x.window * M,
    ranges: new Map([[x.partition, [{ from: BigInt(x.from), to: BigInt(x.from + x.length) }]]]),
    epochs: new Map([[x.partition, x.epoch]]),
    rows: `${x.kind} ${x.window}`,
  }));

test('the committed pieces merged first, then forked and offered the live ones: the same as one merge', () => {
  fc.assert(
    fc.property(fc.array(arbitraryPiece, { maxLength: 12 }), (pieces) => {
      const bounds = new Map([
        [0, { start: 0n, end: 40n }],
        [1, { start: 0n, end: 40n }],
      ]);
      const committed = pieces.filter((p) => p.kind === 'committed').sort(piecePreference);
      const live = pieces.filter((p) => p.kind === 'live').sort(piecePreference);
      const prefix = new PieceCount<string>().offer(committed);
      const fork = prefix.fork().offer(live);
      const forked = finishMerge(fork, { bounds });
      // The prefix is left as it was: another answer forks it again.
      expect(finishMerge(prefix.fork().offer(live), { bounds })).toEqual(forked);
      // The fork holds only the pieces it counted itself, after those counted before it.
      expect(fork.countedBefore).toBe(prefix.counted.length);
      expect({ ...forked, counted: [...prefix.counted, ...forked.counted] }).toEqual(
        mergePieces({ pieces, bounds }),
      );
    }),
  );
});

/** Blocks of an hour holding the given window starts (in minutes). */
function blocksOf(minutes: number[]): {
  pieces: CommittedRef[];
  blockOf: (p: CommittedRef) => CommittedBlock;
} {
  const blocks = new Map<number, CommittedBlock>();
  const pieces = minutes.map((m): CommittedRef => {
    const piece: CommittedRef = { windowStart: m * M, windowEnd: (m + 1) * M, key: `w${m}` };
    const start = Math.floor((m * M) / H) * H;
    const block = blocks.get(start) ?? { start, pieces: [], id: String(start) };
    block.pieces.push(piece);
    blocks.set(start, block);
    return piece;
  });
  return { pieces, blockOf: (p) => blocks.get(Math.floor(p.windowStart / H) * H)! };
}

const minutes = (from: number, to: number): number[] =>
  Array.from({ length: to - from }, (_, i) => from + i);

test.each([
  {
    name: 'whole hours, one bucket',
    selected: [0, 180],
    granularity: undefined,
    runs: ['b', 'b', 'b'],
  },
  { name: 'whole hours, by the hour', selected: [0, 120], granularity: H, runs: ['b', 'b'] },
  { name: 'by the day', selected: [0, 120], granularity: 24 * H, runs: ['b', 'b'] },
  {
    name: 'by the minute: no block fits a bucket',
    selected: [0, 2],
    granularity: M,
    runs: ['p', 'p'],
  },
  {
    name: 'by 30 minutes: an hour is two buckets',
    selected: [58, 62],
    granularity: 30 * M,
    runs: ['p', 'p', 'p', 'p'],
  },
  {
    name: 'a range from mid-hour',
    selected: [59, 180],
    granularity: undefined,
    runs: ['p', 'b', 'b'],
  },
  { name: 'a range to mid-hour', selected: [0, 61], granularity: undefined, runs: ['b', 'p'] },
])('runs of $name', ({ selected, granularity, runs }) => {
  const { pieces, blockOf } = blocksOf(minutes(0, 180));
  const got = rollupRuns(pieces.slice(selected[0], selected[1]), blockOf, granularity);
  expect(got.map((r) => (r.block ? 'b' : 'p'))).toEqual(runs);
  expect(got.flatMap((r) => r.pieces)).toEqual(pieces.slice(selected[0], selected[1]));
});

test('a block of one window is read as a piece: there is nothing to roll up', () => {
  const { pieces, blockOf } = blocksOf([0, 60, 61]);
  expect(rollupRuns(pieces, blockOf, undefined).map((r) => r.pieces.length)).toEqual([1, 2]);
});

// Revenue in quarters: exact in binary, so a float sum does not depend on the order it was added
// in (a scaled sum's units would be written differently by segments of before and after units).
const schema = schemaOf(
  ['country'],
  { events: 'count', revenue: 'sum(price)', dearest: 'max(price)' },
  { window: '1m' },
);
const windows = 150;
/** Window w of partition 0: offsets [10w, 10w + 10); 'de' w + 1 events, 'fr' 2. */
const segmentOf = (w: number): Segment => ({
  key: w * M,
  windowStart: w * M,
  windowEnd: (w + 1) * M,
  state: 'IMMUTABLE',
  rows: new Map([
    ['de', { dimensions: ['de'], values: [w + 1, (w + 1) * 0.25, w] }],
    ['fr', { dimensions: ['fr'], values: [2, 0.5, 1] }],
  ]),
  delta: new Map(),
  ranges: new Map([[0, [{ from: BigInt(w * 10), to: BigInt(w * 10 + 10) }]]]),
  epochs: new Map([[0, 1]]),
});

/** What the windows answer, counted here from their definition. */
function expected(from: number, to: number, bucket: number | undefined, country?: string) {
  const out = new Map<string, [number, number, number]>();
  for (let w = 0; w < windows; w++) {
    if ((w + 1) * M <= from || w * M >= to) continue;
    const time =
      bucket === undefined ? '' : new Date(Math.floor((w * M) / bucket) * bucket).toISOString();
    for (const [c, events, quarters, max] of [
      ['de', w + 1, w + 1, w],
      ['fr', 2, 2, 1],
    ] as const) {
      if (country !== undefined && c !== country) continue;
      const g = out.get(time) ?? [0, 0, -Infinity];
      out.set(time, [g[0] + events, g[1] + quarters, Math.max(g[2], max)]);
    }
  }
  return [...out].map(([time, [events, quarters, max]]) => [
    ...(bucket === undefined ? [] : [time]),
    events,
    quarters / 4,
    max,
  ]);
}

test('answers from rollups equal the windows they hold, asked cold and warm, for any range and granularity', async () => {
  const storage = new MemoryDeepStorage();
  for (let w = 0; w < windows; w++) await commitSegments(storage, schema, [segmentOf(w)]);
  const cache = new CommittedViewCache({ maxBytes: 1 << 24, listMaxAgeMs: 60_000 });
  const service = oneReceiverService({
    cube: oneSetCube(schema, { partitions: [{ partition: 0, position: String(windows * 10) }] }),
    storage,
    cache,
    answer: () => ({ columns: [], rows: [], offsetRanges: {}, segments: 0, pieces: [], held: {} }),
  });
  const questions = [
    { from: 0, to: windows * M, granularity: 'all' },
    { from: 0, to: windows * M, granularity: '1h' },
    { from: 30 * M, to: 140 * M, granularity: 'all' },
    { from: 30 * M + 1, to: 125 * M - 1, granularity: '1h' },
    { from: 59 * M, to: 121 * M, granularity: '2m' },
    { from: 0, to: windows * M, granularity: 'all', country: 'de' },
    { from: 0, to: windows * M, granularity: 'all', country: 'fr' },
  ];
  for (const round of ['cold', 'warm'])
    for (const q of questions) {
      const answer = await service.answer('shop', 'orders', {
        from: q.from,
        to: q.to,
        granularity: q.granularity,
        ...(q.country ? { filters: { country: { in: [q.country] } } } : {}),
      });
      const bucket = q.granularity === 'all' ? undefined : q.granularity === '1h' ? H : 2 * M;
      expect({ round, q, complete: answer.complete, rows: answer.rows }).toEqual({
        round,
        q,
        complete: true,
        rows: expected(q.from, q.to, bucket, q.country),
      });
    }
});
