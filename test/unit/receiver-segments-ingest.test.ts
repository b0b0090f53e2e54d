// SegmentManager.ingest, the batch path the channel takes, against the record-by-record path it
// replaces (accept and skip per record): on random logs cut into random batches, some delivered
// again from before the position, with stop offsets, holes, bad records and windows sealed between
// batches, rows past the bound per window, both give the same segments, clocks, positions and
// counts.
import fc from 'fast-check';
import { cubeSchema, type CubeSchema } from '../../src/api/cube.ts';
import { consumedRecords } from '../../src/kafka/partition-consumer.ts';
import { InlineBatchParser } from '../../src/receiver/batch-parser.ts';
import { type RejectReason, parseEvent, rejectReasons } from '../../src/receiver/event.ts';
import type { OffsetRange } from '../../src/receiver/offset-ranges.ts';
import { SegmentManager } from '../../src/receiver/segments.ts';
import { testSchema } from '../support/events.ts';

const MIN = 60_000;
const T0 = Date.UTC(2026, 0, 1);

// The events of the tests' schema, in windows short enough that a log spans many, and fewer
// rows per window than the six keys it has (too_many_rows decided alike on both paths).
const schema: CubeSchema = cubeSchema.parse({
  ...testSchema,
  window: '10m',
  allowedLateness: '2m',
  maxRowsPerWindow: 4,
});

interface LogRecord {
  offset: bigint;
  value: Buffer | null;
}

/** A partition's records from `start`: events mostly in time order, stragglers, bad ones, holes. */
const partitionLog: fc.Arbitrary<LogRecord[]> = fc
  .record({
    start: fc.nat(50),
    steps: fc.array(
      fc.oneof(
        {
          weight: 10,
          arbitrary: fc.record({
            kind: fc.constant('event' as const),
            // Whole minutes mostly, so that events fall on window ends and lateness limits.
            advance: fc.oneof(
              fc.nat(4).map((n) => n * MIN),
              fc.nat(4 * MIN),
            ),
            behind: fc.oneof(
              { weight: 3, arbitrary: fc.constant(0) },
              fc.nat(20).map((n) => n * MIN),
              fc.nat(20 * MIN),
            ),
            country: fc.constantFrom('de', 'fr', 'jp'),
            device: fc.constantFrom('ios', 'web'),
            price: fc.integer({ min: -1000, max: 1000 }),
          }),
        },
        {
          weight: 1,
          arbitrary: fc.constantFrom('{', '[1]', '{"country":"de"}', null).map((raw) => ({
            kind: 'bad' as const,
            raw,
          })),
        },
        {
          weight: 1,
          arbitrary: fc.record({ kind: fc.constant('hole' as const), size: fc.nat(3) }),
        },
      ),
      { maxLength: 80 },
    ),
  })
  .map(({ start, steps }) => {
    let offset = BigInt(start);
    let clock = T0;
    const records: LogRecord[] = [];
    for (const s of steps) {
      if (s.kind === 'hole') {
        offset += BigInt(s.size);
        continue;
      }
      let value: Buffer | null;
      if (s.kind === 'bad') value = s.raw === null ? null : Buffer.from(s.raw);
      else {
        clock += s.advance;
        const { country, device, price } = s;
        value = Buffer.from(JSON.stringify({ ts: clock - s.behind, country, device, price }));
      }
      records.push({ offset, value });
      offset += 1n;
    }
    return records;
  });

/** How the log is delivered: cut points, redelivery from before the position, seals, a stop. */
const delivery = fc.record({
  cuts: fc.array(fc.nat(80), { maxLength: 12 }),
  /** Per batch, how many records before its first are delivered again with it. */
  overlaps: fc.array(fc.nat(4), { minLength: 13, maxLength: 13 }),
  /** Per batch, whether a sealing pass runs after it, and whether the partition counts as idle. */
  seals: fc.array(fc.constantFrom('none', 'watermark', 'idle'), { minLength: 13, maxLength: 13 }),
  stopAt: fc.option(fc.nat(120)),
  startAt: fc.nat(60),
});

type Delivery = typeof delivery extends fc.Arbitrary<infer T> ? T : never;

interface Outcome {
  manager: SegmentManager;
  position: bigint;
  ingested: number;
  rejected: Partial<Record<RejectReason, number>>;
}

/** Applies one batch record by record, as the channel did before ingest. */
function applyOneByOne(
  m: SegmentManager,
  position: bigint,
  stop: bigint | null,
  records: LogRecord[],
  o: Outcome,
): bigint {
  let pos = position;
  for (const r of records) {
    if (r.offset < pos) continue;
    if (stop !== null && r.offset >= stop) break;
    if (r.offset > pos) m.skip(0, 1, pos, r.offset);
    const parsed = parseEvent(schema, r.value);
    let reason: RejectReason | undefined;
    if (parsed.ok) {
      const result = m.accept(0, 1, r.offset, parsed.event);
      if (result.ok) o.ingested += 1;
      else reason = result.reason;
    } else {
      m.skip(0, 1, r.offset, r.offset + 1n, parsed.reason);
      reason = parsed.reason;
    }
    if (reason) o.rejected[reason] = (o.rejected[reason] ?? 0) + 1;
    pos = r.offset + 1n;
  }
  return pos;
}

function run(log: LogRecord[], d: Delivery, batched: boolean): Outcome {
  const manager = new SegmentManager(schema);
  const parser = new InlineBatchParser(schema);
  const o: Outcome = { manager, position: 0n, ingested: 0, rejected: {} };
  const first = log[0]?.offset ?? 0n;
  o.position = first + BigInt(d.startAt % 4);
  const stop = d.stopAt === null ? null : first + BigInt(d.stopAt);
  const cuts = [...new Set(d.cuts.map((c) => Math.min(c, log.length)))].sort((a, b) => a - b);
  const bounds = [0, ...cuts, log.length];
  for (let b = 0; b + 1 < bounds.length; b++) {
    const from = Math.max(0, bounds[b]! - d.overlaps[b % d.overlaps.length]!);
    const records = log.slice(from, bounds[b + 1]);
    if (batched) {
      const consumed = consumedRecords(records);
      const result = manager.ingest(
        0,
        1,
        o.position,
        stop,
        consumed.offsets,
        parser.parse(consumed.values),
      );
      o.position = result.position;
      o.ingested += result.ingested;
      result.rejected.forEach((n, r) => {
        if (n > 0) o.rejected[rejectReasons[r]!] = (o.rejected[rejectReasons[r]!] ?? 0) + n;
      });
    } else {
      o.position = applyOneByOne(manager, o.position, stop, records, o);
    }
    const seal = d.seals[b % d.seals.length];
    if (seal !== 'none') {
      for (const s of manager.sealableWindows([0], () => seal === 'idle')) manager.seal(s);
    }
  }
  return o;
}

const rangeText = (ranges: OffsetRange[]): string[] => ranges.map((r) => `${r.from}-${r.to}`);

/** Everything the manager holds, rows with the identity of their arrays left out. */
function snapshot(m: SegmentManager): unknown {
  return {
    segments: [...m.segments.values()].map((s) => ({
      window: s.windowStart,
      state: s.state,
      rows: [...s.rows].sort(([a], [b]) => (a < b ? -1 : 1)),
      delta: [...s.delta].sort(([a], [b]) => (a < b ? -1 : 1)),
      ranges: [...s.ranges].map(([p, r]) => [p, rangeText(r)]),
      epochs: [...s.epochs],
      rejected: s.rejected ? [...s.rejected] : 'not known',
    })),
    clocks: [...m.partitions].map(([p, c]) => [
      p,
      {
        watermark: c.watermark,
        currentWindow: c.currentWindow,
        pending: rangeText(c.pending),
        pendingRejected: c.pendingRejected,
      },
    ]),
  };
}

test('ingest gives what accept and skip per record give, however the log is batched', () => {
  fc.assert(
    fc.property(partitionLog, delivery, (log, d) => {
      const one = run(log, d, false);
      const batched = run(log, d, true);
      expect(batched.position).toBe(one.position);
      expect(batched.ingested).toBe(one.ingested);
      expect(batched.rejected).toEqual(one.rejected);
      expect(snapshot(batched.manager)).toEqual(snapshot(one.manager));
      // Every rejected record is counted once, in the segment (or pending run) holding its offset.
      for (const o of [one, batched]) {
        const held: Partial<Record<RejectReason, number>> = {};
        const count = (counts: readonly number[] | null | undefined): void =>
          counts?.forEach((n, r) => {
            if (n > 0) held[rejectReasons[r]!] = (held[rejectReasons[r]!] ?? 0) + n;
          });
        for (const seg of o.manager.segments.values()) count(seg.rejected?.get(0));
        count(o.manager.partitions.get(0)?.pendingRejected);
        expect(held).toEqual(o.rejected);
      }
    }),
    { numRuns: 500 },
  );
});

test('ingest keeps offsets beyond 2^32 exact', () => {
  const base = 2n ** 40n;
  const log = [0, 1, 3].map((i) => ({
    offset: base + BigInt(i),
    value: Buffer.from(JSON.stringify({ ts: T0, country: 'de', device: 'web', price: i })),
  }));
  const m = new SegmentManager(schema);
  const consumed = consumedRecords(log);
  const parsed = new InlineBatchParser(schema).parse(consumed.values);
  const result = m.ingest(0, 1, base, null, consumed.offsets, parsed);
  expect(result.position).toBe(base + 4n);
  expect(rangeText(m.segments.get(T0)!.ranges.get(0)!)).toEqual([`${base}-${base + 4n}`]);
});

test('consumedRecords refuses an offset a number cannot hold', () => {
  expect(() => consumedRecords([{ offset: 2n ** 53n, value: null }])).toThrow(/beyond 2\^53/);
});
