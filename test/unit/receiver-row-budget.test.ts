// Rows per window are bounded per partition (row-budget.ts): a partition may bring at most
// maxRowsPerWindow distinct rows into a window under its epoch. The decision depends on the
// partition's own records only: two replicas that interleave the partitions differently, and a
// replica restored from its fragments, reject exactly the same records.
import { cubeSchema } from '../../src/api/cube.ts';
import {
  checkpointVersion,
  fragmentRow,
  rowOfFragment,
  unitMeasures,
} from '../../src/receiver/checkpoint.ts';
import { CubeStore } from '../../src/receiver/cube-store.ts';
import type { ParsedEvent } from '../../src/receiver/event.ts';
import { PartitionRowKeys, defaultMaxRowsPerWindow } from '../../src/receiver/row-budget.ts';
import { SegmentManager } from '../../src/receiver/segments.ts';
import { testSchema } from '../support/events.ts';
import { scratchDirs } from '../support/scratch-dirs.ts';

const scratch = scratchDirs();

const T0 = Date.UTC(2026, 0, 1);
const MIN = 60_000;
const schema = cubeSchema.parse({
  ...testSchema,
  window: '10m',
  allowedLateness: '1m',
  maxRowsPerWindow: 3,
});

interface Rec {
  partition: number;
  offset: bigint;
  event: ParsedEvent;
}

/** `n` records of `partition` in the first window, cycling over `keys` distinct countries. */
function records(partition: number, n: number, keys: number, from = 0): Rec[] {
  return Array.from({ length: n }, (_, i) => ({
    partition,
    offset: BigInt(from + i),
    event: {
      time: T0 + ((from + i) % 9) * MIN,
      dimensions: [`c${(partition * 7 + from + i) % keys}`, 'web'],
      values: [1, 1],
    },
  }));
}

/** Applies the records; returns the refused ones as `partition@offset reason`. */
function apply(m: SegmentManager, recs: Rec[], epoch = 1): string[] {
  const refused: string[] = [];
  for (const r of recs) {
    const result = m.accept(r.partition, epoch, r.offset, r.event);
    if (!result.ok) refused.push(`${r.partition}@${r.offset} ${result.reason}`);
  }
  return refused.sort();
}

/** Two partitions' records merged in another order, each partition's own order kept. */
function interleave(a: Rec[], b: Rec[], pattern: number[]): Rec[] {
  const out: Rec[] = [];
  let i = 0;
  let j = 0;
  let k = 0;
  while (i < a.length || j < b.length) {
    const fromA = j >= b.length || (i < a.length && pattern[k++ % pattern.length] === 0);
    out.push(fromA ? a[i++]! : b[j++]!);
  }
  return out;
}

const p0 = records(0, 40, 6);
const p1 = records(1, 40, 5);

test('the rule: a key new to the window is refused once the partition brought the most; known keys still count', () => {
  const keys = new PartitionRowKeys(2);
  expect(keys.admits(1, T0, 'a')).toBe(true);
  expect(keys.admits(1, T0, 'b')).toBe(true);
  expect(keys.admits(1, T0, 'c')).toBe(false);
  expect(keys.admits(1, T0, 'a')).toBe(true);
  // Another window, and another epoch (a new owner's offsets), count from nothing.
  expect(keys.admits(1, T0 + 10 * MIN, 'c')).toBe(true);
  expect(keys.admits(2, T0, 'c')).toBe(true);
  expect(keys.count(T0)).toBe(1);
  expect(defaultMaxRowsPerWindow).toBe(100_000);
});

test('two interleavings of the partitions refuse the same records, and hold the same rows', () => {
  const sequential = new SegmentManager(schema);
  const alternating = new SegmentManager(schema);
  const bursty = new SegmentManager(schema);
  const refusedSequential = apply(sequential, [...p0, ...p1]);
  const refusedAlternating = apply(alternating, interleave(p0, p1, [0, 1]));
  const refusedBursty = apply(bursty, interleave(p0, p1, [1, 1, 1, 0, 1, 0, 0, 0, 0]));
  expect(refusedSequential.length).toBeGreaterThan(0);
  expect(refusedSequential.every((r) => r.endsWith('too_many_rows'))).toBe(true);
  expect(refusedAlternating).toEqual(refusedSequential);
  expect(refusedBursty).toEqual(refusedSequential);
  const rows = (m: SegmentManager) => [...m.segments.get(T0)!.rows.keys()].sort();
  expect(rows(alternating)).toEqual(rows(sequential));
  expect(rows(bursty)).toEqual(rows(sequential));
  // Each partition brought 3 rows; together they hold more than one partition may bring.
  expect(sequential.rowsBroughtBy(0, T0)).toBe(3);
  expect(sequential.rowsBroughtBy(1, T0)).toBe(3);
  expect(sequential.segments.get(T0)!.rows.size).toBeGreaterThan(3);
  expect(sequential.segments.get(T0)!.rejected!.get(0)).toBeDefined();
});

test('a replica restored from its fragments refuses what one that never stopped refuses', async () => {
  const whole = new SegmentManager(schema);
  const refusedWhole = apply(whole, interleave(p0, p1, [0, 1]));

  // The first halves, flushed to fragments; then a restart: the checkpoint's epochs, the
  // segment, its rows read back; then the second halves.
  const before = new SegmentManager(schema);
  const first = interleave(p0.slice(0, 15), p1.slice(0, 15), [0, 1]);
  const refusedBefore = apply(before, first);
  const store = new CubeStore(scratch('streamcube-row-budget-'));
  const segment = before.segments.get(T0)!;
  // As the checkpoint writer writes and reads them.
  const units = unitMeasures(schema);
  await store.writeFragments([
    {
      name: 'f1',
      rows: Array.from(before.takeDelta(segment).values(), (r) => fragmentRow(r, units)),
    },
  ]);
  const readBack = () =>
    store.readFragment('f1').map((r) => rowOfFragment(r, schema, checkpointVersion));

  const after = new SegmentManager(schema);
  for (const p of [0, 1]) after.restoreRowKeysEpoch(p, 1);
  const restored = after.restoreSegment({
    key: segment.key,
    windowStart: segment.windowStart,
    windowEnd: segment.windowEnd,
    state: segment.state,
    ranges: segment.ranges,
    epochs: segment.epochs,
  });
  after.restoreRows(restored, readBack());
  expect(after.rowsBroughtBy(0, T0)).toBe(before.rowsBroughtBy(0, T0));
  expect(after.rowsBroughtBy(1, T0)).toBe(before.rowsBroughtBy(1, T0));
  const refusedAfter = apply(after, interleave(p0.slice(15), p1.slice(15), [1, 0]));
  expect([...refusedBefore, ...refusedAfter].sort()).toEqual(refusedWhole);

  // Without the fragments' record of who brought each row, the restored replica would take
  // rows the other refused: the test can fail.
  const forgetful = new SegmentManager(schema);
  const bare = forgetful.restoreSegment({ ...restored, ranges: new Map(), epochs: new Map() });
  forgetful.restoreRows(
    bare,
    readBack().map(({ dimensions, values }) => ({ dimensions, values })),
  );
  expect(apply(forgetful, interleave(p0.slice(15), p1.slice(15), [1, 0]))).not.toEqual(
    refusedAfter,
  );
});

test('rows restored under an older epoch do not count against the partition now', () => {
  const m = new SegmentManager(schema);
  m.restoreRowKeysEpoch(0, 2);
  const s = m.restoreSegment({
    key: T0,
    windowStart: T0,
    windowEnd: T0 + 10 * MIN,
    state: 'ACTIVE',
    ranges: new Map(),
    epochs: new Map(),
  });
  m.restoreRows(
    s,
    ['x', 'y', 'z'].map((c) => ({
      dimensions: [c, 'web'],
      values: [1, 1],
      touchedBy: new Map([[0, 1]]),
    })),
  );
  expect(m.rowsBroughtBy(0, T0)).toBe(0);
  expect(apply(m, records(0, 3, 3), 2)).toEqual([]);
});

test('a window is forgotten once the partition passed it: its later records are too late anyway', () => {
  const m = new SegmentManager(schema);
  apply(m, records(0, 9, 3));
  expect(m.rowsBroughtBy(0, T0)).toBe(3);
  m.accept(0, 1, 100n, { time: T0 + 11 * MIN, dimensions: ['late', 'web'], values: [1, 1] });
  expect(m.rowsBroughtBy(0, T0)).toBe(0);
  expect(
    m.accept(0, 1, 101n, { time: T0, dimensions: ['c0', 'web'], values: [1, 1] }),
  ).toMatchObject({ ok: false, reason: 'too_late' });
});
