// SegmentManager: event time to window, aggregation per dimension key, per-partition watermarks
// and lateness, sealing, and where every consumed offset (accepted or not) is accounted.
import { cubeSchema, type CubeSchema } from '../../src/api/cube.ts';
import type { ParsedEvent } from '../../src/receiver/event.ts';
import type { OffsetRange } from '../../src/receiver/offset-ranges.ts';
import {
  type Row,
  type Segment,
  SegmentManager,
  combine,
  generationOf,
} from '../../src/receiver/segments.ts';
import { schemaOf } from '../support/schemas.ts';

const H = 3_600_000;
const MIN = 60_000;
const T0 = Date.UTC(2026, 0, 1);

const schema: CubeSchema = schemaOf(
  ['country'],
  { events: 'count', revenue: 'sum(price)', cheapest: 'min(price)', dearest: 'max(price)' },
  { window: '1h', allowedLateness: '10m' },
);

const ev = (time: number, country = 'de', price = 1): ParsedEvent => ({
  time,
  dimensions: [country],
  values: [1, price, price, price],
});

/** Offset ranges as [from, to] number pairs, easier to read in expectations. */
const pairs = (ranges: OffsetRange[] | undefined): [number, number][] =>
  (ranges ?? []).map((r) => [Number(r.from), Number(r.to)]);

const rangesOf = (segment: Segment | undefined, partition: number): [number, number][] =>
  pairs(segment?.ranges.get(partition));

/** Rows as `key → values`, independent of insertion order. */
const rowsOf = (rows: Segment['rows']): Record<string, Row['values']> =>
  Object.fromEntries([...rows.values()].map((r) => [r.dimensions.join('|'), r.values]));

describe('windows', () => {
  const m = new SegmentManager(schema);
  test.each<[string, number, number]>([
    ['start of a window', T0, T0],
    ['inside a window', T0 + 30 * MIN, T0],
    ['last millisecond of a window', T0 + H - 1, T0],
    ['end of a window is the next start', T0 + H, T0 + H],
    ['epoch zero', 0, 0],
    ['just before epoch zero', -1, -H],
    ['an hour before epoch zero', -H, -H],
  ])('%s', (_, time, start) => expect(m.windowOf(time)).toBe(start));

  test('windows of 15 minutes', () => {
    const q = new SegmentManager({ ...schema, window: '15m', allowedLateness: '0s' });
    expect(q.windowOf(T0 + 44 * MIN)).toBe(T0 + 30 * MIN);
    expect(q.windowMs).toBe(15 * MIN);
    expect(q.latenessMs).toBe(0);
  });

  test('a window that is not positive is refused', () => {
    expect(() => new SegmentManager({ ...schema, window: '0s' })).toThrow(/window 0s/);
  });

  test('accepted events land in the segment of their window, [start, end) ACTIVE', () => {
    const s = new SegmentManager(schema);
    expect(s.accept(0, 1, 0n, ev(T0 + 5 * MIN))).toEqual({ ok: true, windowStart: T0 });
    expect(s.accept(0, 1, 1n, ev(T0 + H + 5))).toEqual({ ok: true, windowStart: T0 + H });
    expect(s.accept(0, 1, 2n, ev(T0 + 59 * MIN))).toEqual({ ok: true, windowStart: T0 });
    expect([...s.segments.values()].map((g) => [g.windowStart, g.windowEnd, g.state])).toEqual([
      [T0, T0 + H, 'ACTIVE'],
      [T0 + H, T0 + 2 * H, 'ACTIVE'],
    ]);
    expect(rangesOf(s.segments.get(T0), 0)).toEqual([
      [0, 1],
      [2, 3],
    ]);
    expect(rangesOf(s.segments.get(T0 + H), 0)).toEqual([[1, 2]]);
  });
});

describe('aggregation', () => {
  test('count, sum, min and max per dimension key, in rows and in the delta', () => {
    const s = new SegmentManager(schema);
    const input: [string, number][] = [
      ['de', 3],
      ['fr', 10],
      ['de', -2],
      ['de', 7.5],
      ['fr', 10],
      ['', 4],
    ];
    input.forEach(([country, price], i) =>
      s.accept(i % 2, 1, BigInt(i), ev(T0 + i, country, price)),
    );
    const segment = s.segments.get(T0)!;
    const expected = {
      de: [3, 8.5, -2, 7.5],
      fr: [2, 20, 10, 10],
      '': [1, 4, 4, 4],
    };
    expect(rowsOf(segment.rows)).toEqual(expected);
    expect(rowsOf(segment.delta)).toEqual(expected);
    expect(s.rowCount(segment)).toBe(3);
  });

  test('dimension values that would collide if joined naively stay apart', () => {
    const s = new SegmentManager({ ...schema, dimensions: ['a', 'b'] });
    const tuples: [string, string][] = [
      ['x,y', 'z'],
      ['x', 'y,z'],
      ['x|y', ''],
      ['x', ''],
      ['', 'x'],
      ['', ''],
      // NUL separates values in row keys: values holding NUL must not meet other rows.
      ['x\u0000', ''],
      ['x', '\u0000'],
      ['x\u0000y', 'z'],
      ['x', 'y\u0000z'],
      ['\u0000', '\u0000'],
      ['\u0000["x","y"]', ''],
      ['["x', 'y"]'],
    ];
    tuples.forEach(([a, b], i) =>
      s.accept(0, 1, BigInt(i), { time: T0, dimensions: [a, b], values: [1, i, i, i] }),
    );
    // Each tuple once more: every row counts 2, and holds its own tuple.
    tuples.forEach(([a, b], i) =>
      s.accept(0, 1, BigInt(tuples.length + i), {
        time: T0,
        dimensions: [a, b],
        values: [1, i, i, i],
      }),
    );
    const rows = [...s.segments.get(T0)!.rows.values()];
    expect(rows.map((r) => [r.dimensions, r.values])).toEqual(
      tuples.map((t, i) => [t, [2, 2 * i, i, i]]),
    );
  });

  test('a single dimension holding NUL and one without stay apart', () => {
    const s = new SegmentManager(schema);
    for (const [i, country] of ['\u0000', '', '\u0000\u0000', '"\u0000"', '["\\u0000"]'].entries())
      s.accept(0, 1, BigInt(i), ev(T0, country, i));
    expect(s.segments.get(T0)!.rows.size).toBe(5);
  });

  test('the delta restarts when the caller swaps it out after a flush; rows keep the totals', () => {
    const s = new SegmentManager(schema);
    s.accept(0, 1, 0n, ev(T0, 'de', 5));
    const segment = s.segments.get(T0)!;
    expect(rowsOf(s.takeDelta(segment))).toEqual({ de: [1, 5, 5, 5] });
    s.accept(0, 1, 1n, ev(T0, 'de', 1));
    expect(rowsOf(segment.delta)).toEqual({ de: [1, 1, 1, 1] });
    expect(rowsOf(segment.rows)).toEqual({ de: [2, 6, 1, 5] });
  });

  test('rows do not share their value arrays with events or with the delta', () => {
    const s = new SegmentManager(schema);
    const first = ev(T0, 'de', 5);
    s.accept(0, 1, 0n, first);
    s.accept(0, 1, 1n, ev(T0, 'de', 1));
    expect(first.values).toEqual([1, 5, 5, 5]);
    const segment = s.segments.get(T0)!;
    const [row] = [...segment.rows.values()];
    const [deltaRow] = [...segment.delta.values()];
    expect(row!.values).not.toBe(deltaRow!.values);
  });

  test.each<['count' | 'sum' | 'min' | 'max', number, number, number]>([
    ['count', 3, 1, 4],
    ['sum', 2.5, -4, -1.5],
    ['min', 2, -3, -3],
    ['min', -3, 2, -3],
    ['max', 2, -3, 2],
    ['max', -3, 2, 2],
  ])('combine(%s, %d, %d) = %d', (fn, a, b, expected) => expect(combine(fn, a, b)).toBe(expected));

  test('restoreRows merges rows read back from fragments into a restored segment', () => {
    const s = new SegmentManager(schema);
    const segment = s.restoreSegment({
      key: T0,
      windowStart: T0,
      windowEnd: T0 + H,
      state: 'ACTIVE',
      ranges: new Map([[0, [{ from: 0n, to: 3n }]]]),
      epochs: new Map([[0, 2]]),
    });
    s.restoreRows(segment, [
      { dimensions: ['de'], values: [2, 10, 4, 6] },
      { dimensions: ['fr'], values: [1, 1, 1, 1] },
    ]);
    s.restoreRows(segment, [{ dimensions: ['de'], values: [1, 3, 3, 3] }]);
    expect(s.segments.get(T0)).toBe(segment);
    expect(rowsOf(segment.rows)).toEqual({ de: [3, 13, 3, 6], fr: [1, 1, 1, 1] });
    // Restored data was flushed already: nothing to write again.
    expect(segment.delta.size).toBe(0);
    // Later events of the partition merge into the same rows.
    s.accept(0, 2, 3n, ev(T0 + 1, 'de', 1));
    expect(rowsOf(segment.rows).de).toEqual([4, 14, 1, 6]);
    expect(rangesOf(segment, 0)).toEqual([[0, 4]]);
  });

  test('rowCount of a handed-off segment is the count recorded at hand-off', () => {
    const s = new SegmentManager(schema);
    s.accept(0, 1, 0n, ev(T0));
    s.accept(0, 1, 1n, ev(T0, 'fr'));
    const segment = s.segments.get(T0)!;
    s.seal(segment);
    s.markHandedOff(segment, T0);
    expect(segment.rows.size).toBe(0);
    expect(s.rowCount(segment)).toBe(2);
  });
});

describe('watermarks and lateness', () => {
  test('the watermark is the highest accepted event time of the partition, per partition', () => {
    const s = new SegmentManager(schema);
    expect(s.clock(0).watermark).toBeNull();
    s.accept(0, 1, 0n, ev(T0 + 20 * MIN));
    s.accept(0, 1, 1n, ev(T0 + 10 * MIN));
    s.accept(1, 1, 0n, ev(T0 + 5 * MIN));
    expect(s.clock(0).watermark).toBe(T0 + 20 * MIN);
    expect(s.clock(1).watermark).toBe(T0 + 5 * MIN);
    expect(s.clock(2).watermark).toBeNull();
  });

  test('too late is decided by the partition’s own watermark, not another partition’s', () => {
    const s = new SegmentManager(schema);
    // Partition 0 runs far ahead; partition 1 is still in the first window.
    s.accept(0, 1, 0n, ev(T0 + 5 * MIN));
    s.accept(0, 1, 1n, ev(T0 + 3 * H));
    s.accept(1, 1, 0n, ev(T0 + 1 * MIN));
    expect(s.accept(1, 1, 1n, ev(T0 + 30 * MIN))).toEqual({ ok: true, windowStart: T0 });
    expect(s.accept(0, 1, 2n, ev(T0 + 30 * MIN))).toEqual({ ok: false, reason: 'too_late' });
    expect(rowsOf(s.segments.get(T0)!.rows)).toEqual({ de: [3, 3, 1, 1] });
  });

  test.each<[string, number, boolean]>([
    ['watermark one ms short of window end + lateness', T0 + H + 10 * MIN - 1, true],
    ['watermark at window end + lateness', T0 + H + 10 * MIN, false],
    ['watermark inside the lateness', T0 + H + 5 * MIN, true],
    ['watermark in the window itself', T0 + 50 * MIN, true],
  ])('%s: an event of the window accepted = %s', (_, watermark, accepted) => {
    const s = new SegmentManager(schema);
    s.accept(0, 1, 0n, ev(watermark));
    const result = s.accept(0, 1, 1n, ev(T0 + 59 * MIN));
    expect(result.ok).toBe(accepted);
    if (!result.ok) expect(result.reason).toBe('too_late');
  });

  test('a rejected event moves neither the watermark nor the current window', () => {
    const s = new SegmentManager(schema);
    s.accept(0, 1, 0n, ev(T0 + 2 * H));
    s.accept(0, 1, 1n, ev(T0));
    expect(s.clock(0)).toMatchObject({ watermark: T0 + 2 * H, currentWindow: T0 + 2 * H });
  });

  test('a too-late event’s offset goes to the segment of the partition’s last accepted event', () => {
    const s = new SegmentManager(schema);
    s.accept(0, 1, 0n, ev(T0 + 5 * MIN));
    s.accept(0, 1, 1n, ev(T0 + 2 * H));
    expect(s.accept(0, 1, 2n, ev(T0 + 6 * MIN))).toEqual({ ok: false, reason: 'too_late' });
    expect(rangesOf(s.segments.get(T0), 0)).toEqual([[0, 1]]);
    expect(rangesOf(s.segments.get(T0 + 2 * H), 0)).toEqual([[1, 3]]);
    expect(rowsOf(s.segments.get(T0)!.rows).de![0]).toBe(1);
  });

  test('the epoch of a segment’s partition is the highest it was consumed under', () => {
    const s = new SegmentManager(schema);
    s.accept(0, 3, 0n, ev(T0));
    s.accept(0, 2, 1n, ev(T0));
    s.accept(1, 1, 0n, ev(T0));
    s.skip(1, 4, 1n, 2n);
    expect(Object.fromEntries(s.segments.get(T0)!.epochs)).toEqual({ 0: 3, 1: 4 });
  });
});

describe('sealed windows', () => {
  test('an event for a sealed window its partition has not passed opens the window’s next generation', () => {
    const s = new SegmentManager(schema);
    s.accept(0, 1, 0n, ev(T0 + 5 * MIN));
    s.accept(1, 1, 0n, ev(T0 + H + 5 * MIN));
    s.seal(s.segments.get(T0)!);
    // Partition 1's own watermark allows the event: it is judged by that alone, as the replica set
    // that held the partition before (where the window was not sealed) would have judged it.
    expect(s.accept(1, 1, 1n, ev(T0 + 50 * MIN))).toEqual({ ok: true, windowStart: T0 });
    const second = s.segments.get(T0 + 1)!;
    expect([second.windowStart, generationOf(second), second.state]).toEqual([T0, 1, 'ACTIVE']);
    expect(rangesOf(second, 1)).toEqual([[1, 2]]);
    expect(rowsOf(second.rows)).toEqual({ de: [1, 1, 1, 1] });
    expect(rangesOf(s.segments.get(T0), 1)).toEqual([]);
    expect(rowsOf(s.segments.get(T0)!.rows)).toEqual({ de: [1, 1, 1, 1] });
    expect(s.clock(1).currentWindow).toBe(T0 + 1);
    // The window's ACTIVE generation takes the window's next events, of any partition.
    expect(s.accept(0, 1, 1n, ev(T0 + 6 * MIN))).toEqual({ ok: true, windowStart: T0 });
    expect(rangesOf(second, 0)).toEqual([[1, 2]]);
    s.skip(1, 1, 2n, 4n);
    expect(rangesOf(second, 1)).toEqual([[1, 4]]);
    // Sealed in turn, the next event opens generation 2.
    s.seal(second);
    s.accept(0, 1, 2n, ev(T0 + 7 * MIN));
    expect(generationOf(s.segments.get(T0 + 2)!)).toBe(2);
    // Too late stays too late: partition 1 passed T0 + H + 5 min.
    expect(s.accept(1, 1, 4n, ev(T0 - 10 * MIN))).toEqual({ ok: false, reason: 'too_late' });
  });

  test('a handed-off or purged window opens again for a partition that has not passed it', () => {
    const s = new SegmentManager(schema);
    s.accept(0, 1, 0n, ev(T0));
    s.seal(s.segments.get(T0)!);
    s.markHandedOff(s.segments.get(T0)!, T0);
    expect(s.accept(1, 1, 0n, ev(T0))).toEqual({ ok: true, windowStart: T0 });
    expect(rangesOf(s.segments.get(T0 + 1), 1)).toEqual([[0, 1]]);
    const second = s.segments.get(T0 + 1)!;
    s.seal(second);
    s.markHandedOff(second, T0);
    s.purge(s.segments.get(T0)!);
    s.purge(second);
    expect(s.accept(2, 1, 0n, ev(T0))).toEqual({ ok: true, windowStart: T0 });
    expect(rangesOf(s.segments.get(T0), 2)).toEqual([[0, 1]]);
  });

  test('a window that has used every generation it can rejects as window_sealed', () => {
    const s = new SegmentManager(
      cubeSchema.parse({ ...schema, window: '2ms', allowedLateness: '1ms' }),
    );
    s.accept(0, 1, 0n, ev(T0));
    s.seal(s.segments.get(T0)!);
    s.accept(1, 1, 0n, ev(T0));
    s.seal(s.segments.get(T0 + 1)!);
    expect(s.accept(2, 1, 0n, ev(T0))).toEqual({ ok: false, reason: 'window_sealed' });
    expect(s.clock(2).pending).toEqual([{ from: 0n, to: 1n }]);
  });

  test('offsets after the partition’s current segment was sealed wait as pending', () => {
    const s = new SegmentManager(schema);
    s.accept(0, 1, 0n, ev(T0));
    s.seal(s.segments.get(T0)!);
    s.skip(0, 1, 1n, 3n);
    expect(pairs(s.clock(0).pending)).toEqual([[1, 3]]);
    expect(rangesOf(s.segments.get(T0), 0)).toEqual([[0, 1]]);
    // The next accepted event takes them along into its own segment.
    s.accept(0, 1, 3n, ev(T0 + 2 * H));
    expect(rangesOf(s.segments.get(T0 + 2 * H), 0)).toEqual([[1, 4]]);
    expect(s.clock(0).pending).toEqual([]);
  });
});

describe('skip and pending', () => {
  test('skipped offsets go to the partition’s current ACTIVE segment', () => {
    const s = new SegmentManager(schema);
    s.accept(0, 1, 10n, ev(T0 + H));
    s.accept(1, 1, 0n, ev(T0));
    s.skip(0, 1, 11n, 15n);
    s.skip(1, 1, 1n, 2n);
    expect(rangesOf(s.segments.get(T0 + H), 0)).toEqual([[10, 15]]);
    expect(rangesOf(s.segments.get(T0), 1)).toEqual([[0, 2]]);
    expect(rangesOf(s.segments.get(T0), 0)).toEqual([]);
  });

  test('an empty or reversed skip changes nothing', () => {
    const s = new SegmentManager(schema);
    s.skip(0, 1, 5n, 5n);
    s.skip(0, 1, 6n, 5n);
    expect(s.clock(0).pending).toEqual([]);
  });

  test('before the first accepted event, skipped offsets are pending and join its segment', () => {
    const s = new SegmentManager(schema);
    s.skip(0, 1, 0n, 3n); // say, three records that did not parse
    s.skip(0, 1, 3n, 4n);
    s.skip(0, 1, 6n, 8n); // a hole left by compaction after a record at 4..6 that was rejected
    s.skip(0, 1, 4n, 6n);
    expect(pairs(s.clock(0).pending)).toEqual([[0, 8]]);
    expect(s.segments.size).toBe(0);
    s.accept(0, 1, 8n, ev(T0 + 2 * H));
    expect(rangesOf(s.segments.get(T0 + 2 * H), 0)).toEqual([[0, 9]]);
    expect(s.clock(0).pending).toEqual([]);
  });

  test('pending offsets of one partition never go to another partition’s segment', () => {
    const s = new SegmentManager(schema);
    s.skip(0, 1, 0n, 2n);
    s.accept(1, 1, 0n, ev(T0));
    expect(pairs(s.clock(0).pending)).toEqual([[0, 2]]);
    expect(rangesOf(s.segments.get(T0), 0)).toEqual([]);
  });

  test('once an event past a sealed window is accepted, later rejects go to its segment', () => {
    const s = new SegmentManager(schema);
    s.accept(0, 1, 0n, ev(T0));
    s.seal(s.segments.get(T0)!);
    s.accept(0, 1, 1n, ev(T0 + 3 * H));
    expect(s.clock(0).currentWindow).toBe(T0 + 3 * H);
    expect(s.accept(0, 1, 2n, ev(T0 + H))).toEqual({ ok: false, reason: 'too_late' });
    expect(rangesOf(s.segments.get(T0 + 3 * H), 0)).toEqual([[1, 3]]);
  });
});

describe('settlePending', () => {
  test('nothing pending: nothing happens, no segment is created', () => {
    const s = new SegmentManager(schema);
    s.settlePending(0, 1, T0);
    expect(s.segments.size).toBe(0);
  });

  test('pending offsets go to the latest ACTIVE segment', () => {
    const s = new SegmentManager(schema);
    s.accept(1, 1, 0n, ev(T0));
    s.accept(1, 1, 1n, ev(T0 + 2 * H));
    s.accept(1, 1, 2n, ev(T0 + H + 30 * MIN));
    s.skip(0, 5, 0n, 4n);
    s.settlePending(0, 5, T0 + 10 * H);
    expect(rangesOf(s.segments.get(T0 + 2 * H), 0)).toEqual([[0, 4]]);
    expect(s.segments.get(T0 + 2 * H)!.epochs.get(0)).toBe(5);
    expect(s.clock(0).pending).toEqual([]);
  });

  test('with no segment at all, an empty one is opened at the fallback time’s window', () => {
    const s = new SegmentManager(schema);
    s.skip(0, 1, 0n, 4n);
    s.settlePending(0, 1, T0 + 5 * H + 7);
    const segment = s.segments.get(T0 + 5 * H)!;
    expect(segment.state).toBe('ACTIVE');
    expect(rangesOf(segment, 0)).toEqual([[0, 4]]);
    expect(segment.rows.size).toBe(0);
  });

  test('with only sealed segments, the partition’s watermark window or the next free one', () => {
    const s = new SegmentManager(schema);
    s.accept(0, 1, 0n, ev(T0 + 10 * MIN));
    s.accept(1, 1, 0n, ev(T0 + H));
    s.seal(s.segments.get(T0)!);
    s.seal(s.segments.get(T0 + H)!);
    s.skip(0, 1, 1n, 3n);
    s.settlePending(0, 1, T0 + 9 * H);
    // The watermark's window (T0) is sealed, and so is the next: pending opens T0 + 2h.
    expect(rangesOf(s.segments.get(T0), 0)).toEqual([[0, 1]]);
    expect(rangesOf(s.segments.get(T0 + 2 * H), 0)).toEqual([[1, 3]]);
    expect(s.segments.get(T0 + 2 * H)!.state).toBe('ACTIVE');
  });
});

describe('sealableWindows', () => {
  const never = (): boolean => false;
  const windows = (ss: Segment[]): number[] => ss.map((g) => (g.windowStart - T0) / H);

  function threeWindows(): SegmentManager {
    const s = new SegmentManager(schema);
    // Created out of order: the answer is in window order all the same.
    s.accept(0, 1, 0n, ev(T0 + 2 * H));
    s.accept(1, 1, 0n, ev(T0));
    s.accept(1, 1, 1n, ev(T0 + H));
    return s;
  }

  test('a window seals when every partition’s watermark passed its end + lateness', () => {
    const s = threeWindows();
    expect(windows(s.sealableWindows([0, 1], never))).toEqual([]);
    s.accept(1, 1, 2n, ev(T0 + H + 10 * MIN - 1));
    expect(windows(s.sealableWindows([0, 1], never))).toEqual([]);
    s.accept(1, 1, 3n, ev(T0 + H + 10 * MIN));
    expect(windows(s.sealableWindows([0, 1], never))).toEqual([0]);
    s.accept(1, 1, 4n, ev(T0 + 5 * H));
    // Partition 0's watermark (T0 + 2h) is short of window 1's end + lateness (T0 + 2h10m).
    expect(windows(s.sealableWindows([0, 1], never))).toEqual([0]);
    s.accept(0, 1, 1n, ev(T0 + 2 * H + 10 * MIN));
    expect(windows(s.sealableWindows([0, 1], never))).toEqual([0, 1]);
  });

  test('only the given partitions count', () => {
    const s = threeWindows();
    s.accept(1, 1, 2n, ev(T0 + 9 * H));
    expect(windows(s.sealableWindows([1], never))).toEqual([0, 1, 2]);
    expect(windows(s.sealableWindows([0, 1], never))).toEqual([0]);
  });

  test('an idle partition counts as passed; a partition never seen counts only when idle', () => {
    const s = threeWindows();
    s.accept(1, 1, 2n, ev(T0 + 9 * H));
    expect(windows(s.sealableWindows([0, 1, 7], never))).toEqual([]);
    expect(windows(s.sealableWindows([0, 1, 7], (p) => p === 7))).toEqual([0]);
    expect(windows(s.sealableWindows([0, 1, 7], (p) => p !== 1))).toEqual([0, 1, 2]);
  });

  test('sealed and handed-off segments are not offered again', () => {
    const s = threeWindows();
    s.accept(1, 1, 2n, ev(T0 + 9 * H));
    s.accept(0, 1, 1n, ev(T0 + 9 * H));
    const ready = s.sealableWindows([0, 1], never);
    expect(windows(ready)).toEqual([0, 1, 2]);
    s.seal(ready[0]!);
    s.seal(ready[1]!);
    s.markHandedOff(ready[1]!, T0);
    expect(windows(s.sealableWindows([0, 1], never))).toEqual([2]);
    expect(ready[0]!.state).toBe('IMMUTABLE');
  });

  test('sealing keeps rows and ranges', () => {
    const s = new SegmentManager(schema);
    s.accept(0, 1, 0n, ev(T0, 'de', 4));
    const segment = s.segments.get(T0)!;
    s.seal(segment);
    expect(segment.state).toBe('IMMUTABLE');
    expect(rowsOf(segment.rows)).toEqual({ de: [1, 4, 4, 4] });
    expect(rangesOf(segment, 0)).toEqual([[0, 1]]);
  });
});

describe('coverage', () => {
  const coverageOf = (s: SegmentManager) =>
    Object.fromEntries(
      [...(s.coverage() ?? [])].map(([p, c]) => [
        p,
        { kept: pairs(c.kept), handedOff: pairs(c.handedOff) },
      ]),
    );

  test('kept: every segment, purged ones and pending; handed off: those handed off; fenced: neither', () => {
    const s = new SegmentManager(schema);
    s.accept(0, 1, 0n, ev(T0));
    s.accept(0, 1, 1n, ev(T0 + H));
    s.accept(1, 1, 0n, ev(T0 + 2 * H));
    s.skip(2, 1, 0n, 4n); // pending: partition 2 has no segment yet
    const first = s.segments.get(T0)!;
    s.seal(first);
    s.markHandedOff(first, T0);
    expect(coverageOf(s)).toEqual({
      0: { kept: [[0, 2]], handedOff: [[0, 1]] },
      1: { kept: [[0, 1]], handedOff: [] },
      2: { kept: [[0, 4]], handedOff: [] },
    });
    // Purged, the window's offsets stay in the coverage, handed off.
    s.purge(first);
    expect(coverageOf(s)[0]).toEqual({ kept: [[0, 2]], handedOff: [[0, 1]] });
    expect(pairs(s.purgedOffsets!.get(0))).toEqual([[0, 1]]);
    // A discarded (fenced) segment's offsets leave it.
    s.discard(s.segments.get(T0 + 2 * H)!);
    expect(coverageOf(s)[1]).toBeUndefined();
  });

  test('restored: the purged offsets as the checkpoint kept them; unknown when it did not', () => {
    const known = new SegmentManager(schema);
    known.restorePurgedBelow(T0 + H);
    known.restorePurgedCoverage(new Map([[0, [{ from: 0n, to: 7n }]]]));
    expect(coverageOf(known)).toEqual({ 0: { kept: [[0, 7]], handedOff: [[0, 7]] } });
    const older = new SegmentManager(schema);
    older.restorePurgedBelow(T0 + H);
    older.restorePurgedCoverage(undefined);
    expect(older.coverage()).toBeNull();
    // Nothing purged: nothing unknown.
    const fresh = new SegmentManager(schema);
    fresh.restorePurgedBelow(null);
    fresh.restorePurgedCoverage(undefined);
    expect(fresh.coverage()).toEqual(new Map());
  });
});
