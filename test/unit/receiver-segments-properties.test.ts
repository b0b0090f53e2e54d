// Properties of SegmentManager on random logs of three partitions: the same records in the same
// per-partition order give the same segments however the partitions interleave and whenever
// windows are sealed, and every consumed offset is accounted exactly once.
import fc from 'fast-check';
import type { CubeSchema } from '../../src/api/cube.ts';
import { tilingProblems, type OffsetRange } from '../../src/receiver/offset-ranges.ts';
import { SegmentManager, combine } from '../../src/receiver/segments.ts';
import { schemaOf } from '../support/schemas.ts';

const H = 3_600_000;
const MIN = 60_000;
const T0 = Date.UTC(2026, 0, 1);
const partitionIds = [0, 1, 2];

const schema: CubeSchema = schemaOf(
  ['country'],
  { events: 'count', revenue: 'sum(price)', cheapest: 'min(price)', dearest: 'max(price)' },
  { window: '1h', allowedLateness: '10m' },
);

/** One record of a partition's log, as the channel hands it to the manager. */
type LogEntry =
  | { kind: 'event'; time: number; country: string; price: number }
  /** A record that does not parse. */
  | { kind: 'bad' }
  /** Offsets with no record: compacted away, transaction markers. */
  | { kind: 'hole'; size: number };

interface PartitionLog {
  start: number;
  entries: LogEntry[];
}

/**
 * Mostly increasing event times with some stragglers, a few far enough behind to be too late.
 * Integer prices: a floating-point sum depends on the order of its additions.
 */
const partitionLog: fc.Arbitrary<PartitionLog> = fc
  .record({
    start: fc.nat(1000),
    steps: fc.array(
      fc.oneof(
        {
          weight: 8,
          arbitrary: fc.record({
            kind: fc.constant('event' as const),
            advance: fc.nat(20 * MIN),
            behind: fc.oneof({ weight: 3, arbitrary: fc.constant(0) }, fc.nat(90 * MIN)),
            country: fc.constantFrom('de', 'fr', 'jp'),
            price: fc.integer({ min: -1000, max: 1000 }),
          }),
        },
        { weight: 1, arbitrary: fc.constant({ kind: 'bad' as const }) },
        {
          weight: 1,
          arbitrary: fc.record({
            kind: fc.constant('hole' as const),
            size: fc.integer({ min: 1, max: 5 }),
          }),
        },
      ),
      { maxLength: 40 },
    ),
  })
  .map(({ start, steps }) => {
    let clock = T0 + start * 1000;
    const entries = steps.map((s): LogEntry => {
      if (s.kind !== 'event') return s;
      clock += s.advance;
      return { kind: 'event', time: clock - s.behind, country: s.country, price: s.price };
    });
    return { start, entries };
  });

/** The order in which the partitions' entries are fed: each partition id once per entry. */
function interleaving(logs: PartitionLog[]): fc.Arbitrary<number[]> {
  const picks = logs.flatMap((log, p) => log.entries.map(() => p));
  return fc.shuffledSubarray(picks, { minLength: picks.length, maxLength: picks.length });
}

interface Feed {
  order: number[];
  /** Steps after which a sealing pass runs. */
  sealAfter: Set<number>;
  /** Whether a partition counts as idle in the sealing pass after a step. */
  idle: (step: number, partition: number) => boolean;
}

interface Outcome {
  manager: SegmentManager;
  ends: number[];
  accepted: { partition: number; time: number; country: string; price: number }[];
  rejected: number;
}

function run(logs: PartitionLog[], feed: Feed): Outcome {
  const manager = new SegmentManager(schema);
  const positions = logs.map((l) => BigInt(l.start));
  const next = logs.map(() => 0);
  const accepted: Outcome['accepted'] = [];
  let rejected = 0;
  const sealPass = (step: number): void => {
    for (const s of manager.sealableWindows(partitionIds, (p) => feed.idle(step, p)))
      manager.seal(s);
  };
  feed.order.forEach((p, step) => {
    const entry = logs[p]!.entries[next[p]!++]!;
    const epoch = p + 1;
    const at = positions[p]!;
    if (entry.kind === 'event') {
      const result = manager.accept(p, epoch, at, {
        time: entry.time,
        dimensions: [entry.country],
        values: [1, entry.price, entry.price, entry.price],
      });
      if (result.ok) accepted.push({ partition: p, ...entry });
      else rejected += 1;
      positions[p] = at + 1n;
    } else {
      const size = entry.kind === 'bad' ? 1n : BigInt(entry.size);
      manager.skip(p, epoch, at, at + size);
      positions[p] = at + size;
    }
    if (feed.sealAfter.has(step)) sealPass(step);
  });
  sealPass(feed.order.length);
  return { manager, ends: positions.map(Number), accepted, rejected };
}

const sortedEntries = <V>(map: Map<string | number, V>): [string, V][] =>
  [...map].map(([k, v]): [string, V] => [String(k), v]).sort(([a], [b]) => (a < b ? -1 : 1));

const rangeText = (ranges: OffsetRange[]): string[] => ranges.map((r) => `${r.from}-${r.to}`);

/** Everything a replica holds, in a form independent of insertion order. */
function snapshot(m: SegmentManager): unknown {
  return {
    segments: [...m.segments.values()]
      .sort((a, b) => a.windowStart - b.windowStart)
      .map((s) => ({
        window: s.windowStart,
        state: s.state,
        rows: sortedEntries(s.rows),
        delta: sortedEntries(s.delta),
        ranges: sortedEntries(s.ranges).map(([p, r]) => [p, rangeText(r)]),
        epochs: sortedEntries(s.epochs),
      })),
    clocks: sortedEntries(new Map(m.partitions)).map(([p, c]) => [
      p,
      { watermark: c.watermark, currentWindow: c.currentWindow, pending: rangeText(c.pending) },
    ]),
  };
}

const sealedRanges = (m: SegmentManager): unknown =>
  [...m.segments.values()]
    .filter((s) => s.state !== 'ACTIVE')
    .map((s) => [s.windowStart, sortedEntries(s.ranges).map(([p, r]) => [p, rangeText(r)])]);

const threeLogs = fc.tuple(partitionLog, partitionLog, partitionLog);
const sealSteps = fc.array(fc.nat(130), { maxLength: 60 }).map((s) => new Set(s));
const never = (): boolean => false;

test('different interleavings across partitions and sealing times give identical segments', () => {
  fc.assert(
    fc.property(
      threeLogs.chain((logs) =>
        fc.tuple(fc.constant(logs), interleaving(logs), interleaving(logs), sealSteps, sealSteps),
      ),
      ([logs, orderA, orderB, sealA, sealB]) => {
        const a = run(logs, { order: orderA, sealAfter: sealA, idle: never });
        const b = run(logs, { order: orderB, sealAfter: sealB, idle: never });
        // The same partition-by-partition feed, one partition after the other, as a third view.
        const sequential = run(logs, {
          order: logs.flatMap((l, p) => l.entries.map(() => p)),
          sealAfter: new Set(),
          idle: never,
        });
        expect(snapshot(a.manager)).toEqual(snapshot(b.manager));
        expect(snapshot(a.manager)).toEqual(snapshot(sequential.manager));
        expect(a.rejected).toBe(b.rejected);
      },
    ),
    { numRuns: 300 },
  );
});

test('too-late decisions of a partition do not depend on the other partitions at all', () => {
  fc.assert(
    fc.property(threeLogs, partitionLog, (logs, other) => {
      // Replacing partitions 1 and 2 by anything else leaves partition 0's decisions unchanged.
      const alone = run([logs[0], { start: 0, entries: [] }, { start: 0, entries: [] }], {
        order: logs[0].entries.map(() => 0),
        sealAfter: new Set(),
        idle: never,
      });
      const mixed = [logs[0], other, logs[2]];
      const together = run(mixed, {
        // The other partitions first, so that partition 0 meets their watermarks far ahead.
        order: [2, 1, 0].flatMap((p) => mixed[p]!.entries.map(() => p)),
        sealAfter: new Set(),
        idle: never,
      });
      const of0 = (o: Outcome): unknown[] => o.accepted.filter((e) => e.partition === 0);
      expect(of0(together)).toEqual(of0(alone));
      expect(together.manager.clock(0)).toEqual(alone.manager.clock(0));
    }),
    { numRuns: 200 },
  );
});

test('every offset fed is in exactly one segment or pending, and rows aggregate the accepted events', () => {
  fc.assert(
    fc.property(
      threeLogs.chain((logs) =>
        fc.tuple(
          fc.constant(logs),
          interleaving(logs),
          sealSteps,
          fc.array(fc.boolean(), { minLength: 1, maxLength: 50 }),
          fc.nat(10 * H),
        ),
      ),
      ([logs, order, sealAfter, idleBits, fallback]) => {
        // Idle partitions seal windows early, which opens later generations of them and sends
        // offsets to pending: the accounting must hold all the same.
        const idle = (step: number, p: number): boolean =>
          idleBits[(step * 3 + p) % idleBits.length]!;
        const { manager, ends, accepted, rejected } = run(logs, { order, sealAfter, idle });
        // And which events are accepted does not depend on when windows sealed (a partition moved
        // in behind the others, or silent): the same as if no window had sealed before the end.
        const unsealed = run(logs, { order, sealAfter: new Set(), idle: never });
        expect(accepted).toEqual(unsealed.accepted);
        const tiling = (): string[] =>
          partitionIds.flatMap((p) => {
            const ranges = [...manager.segments.values()].flatMap((s) => s.ranges.get(p) ?? []);
            ranges.push(...(manager.partitions.get(p)?.pending ?? []));
            return tilingProblems(ranges, BigInt(logs[p]!.start), BigInt(ends[p]!)).map(
              (x) => `partition ${p}: ${x.kind} [${x.from}, ${x.to})`,
            );
          });
        expect(tiling()).toEqual([]);

        const events = logs.flatMap((l) => l.entries.filter((e) => e.kind === 'event'));
        expect(accepted.length + rejected).toBe(events.length);
        // Rows equal an independent aggregation of the accepted events by window and country.
        const expected = new Map<string, number[]>();
        for (const e of accepted) {
          const key = `${manager.windowOf(e.time)} ${e.country}`;
          const v = expected.get(key);
          if (!v) expected.set(key, [1, e.price, e.price, e.price]);
          else
            expected.set(key, [
              v[0]! + 1,
              v[1]! + e.price,
              Math.min(v[2]!, e.price),
              Math.max(v[3]!, e.price),
            ]);
        }
        // A window's generations add up.
        const actual = new Map<string, number[]>();
        for (const s of manager.segments.values())
          for (const row of s.rows.values()) {
            const key = `${s.windowStart} ${row.dimensions[0]}`;
            const v = actual.get(key);
            actual.set(
              key,
              v
                ? v.map((x, i) => combine(schema.measures[i]!.function, x, Number(row.values[i])))
                : row.values.map(Number),
            );
          }
        expect(sortedEntries(actual)).toEqual(sortedEntries(expected));

        // Settling pending offsets moves them into ACTIVE segments without breaking the tiling;
        // sealed segments are never touched.
        const sealedBefore = sealedRanges(manager);
        for (const p of partitionIds) manager.settlePending(p, p + 1, T0 + fallback);
        for (const p of partitionIds) expect(manager.clock(p).pending).toEqual([]);
        expect(tiling()).toEqual([]);
        expect(sealedRanges(manager)).toEqual(sealedBefore);
      },
    ),
    { numRuns: 300 },
  );
});
