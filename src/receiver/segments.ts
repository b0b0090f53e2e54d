// The segments of one cube on one receiver: event time → window, in-memory aggregation keyed by
// dimension values, per-partition offset coverage, event-time watermarks, lateness and sealing.
// Pure: no I/O and no clock of its own, so that two replicas fed the same offsets decide alike.
// It owns every change of a segment's state, rows and delta and of a partition's clock: others
// read them, and ask it (seal, takeDelta, markHandedOff, purge, raiseWatermark) to change them.
import type { CubeSchema, MeasureFunction } from '../api/cube.ts';
import { parseDuration } from '../api/duration.ts';
import { type Units, addUnits, exactScaleOf } from '../api/scaled-sum.ts';
import type { ParsedBatch } from './batch-parser.ts';
import { type ParsedEvent, type RejectReason, rejectReasons } from './event.ts';
import { type OffsetRange, addRange } from './offset-ranges.ts';
import { PartitionRowKeys, maxRowsPerWindowOf } from './row-budget.ts';

export type SegmentState = 'ACTIVE' | 'IMMUTABLE' | 'HANDED_OFF';

export interface Row {
  dimensions: string[];
  /**
   * Per measure, in schema order. A sum with a scale holds its integer count of 10^-scale units
   * (scaled-sum.ts): a Number while it is a safe integer, a bigint past that; every other
   * measure a Number.
   */
  values: Units[];
  /**
   * Delta rows only: partition → epoch of the partitions whose records touched the row in this
   * delta, kept in fragments so that a restart knows which rows each partition brought
   * (row-budget.ts).
   */
  touchedBy?: Map<number, number>;
}

export interface Segment {
  /**
   * The segment's key among those held: its window start plus its generation. A window's first
   * segment is generation 0 (key = window start); a window whose segment was sealed before one of
   * its partitions had passed it (that partition came from another replica set, or was silent)
   * gets another, generation 1, 2…, so that an event is judged by its partition's own clock
   * alone. Generations stay below the window's length, so keys of two windows never meet.
   */
  readonly key: number;
  readonly windowStart: number;
  readonly windowEnd: number;
  readonly state: SegmentState;
  /** Aggregated rows keyed by their dimension values; emptied once handed off. */
  readonly rows: Map<string, Row>;
  /** Rows changed since the last flush (deltas of `rows`). */
  readonly delta: Map<string, Row>;
  /** Offsets of each partition accounted to this segment. */
  readonly ranges: Map<number, OffsetRange[]>;
  /** Per partition, the assignment epoch under which its offsets were consumed. */
  readonly epochs: Map<number, number>;
  /** Row count once handed off (rows are purged then). */
  readonly handedOffRows?: number;
  /** Wall-clock time of the hand-off: the start of its retention. */
  readonly handedOffAt?: number;
  /**
   * Per partition, the records among its offsets that were rejected, by reason (indexed as
   * rejectReasons): offsets accounted here that no row holds. Absent when not known (a segment
   * restored from a checkpoint written before they were counted).
   */
  readonly rejected?: Map<number, number[]>;
}

type MutableSegment = { -readonly [K in keyof Segment]: Segment[K] };

export interface PartitionClock {
  /** Highest event time seen in the partition (its event-time watermark), or null. */
  watermark: number | null;
  /**
   * Key of the segment that took the partition's last accepted event (its window start, unless
   * the window has more than one generation).
   */
  currentWindow: number | null;
  /** Offsets consumed before any accepted event had a segment to go to. */
  pending: OffsetRange[];
  /**
   * The records among `pending` that were rejected, by reason (indexed as rejectReasons); null when
   * not known (a clock restored from a checkpoint written before they were counted).
   */
  pendingRejected: number[] | null;
}

export type AcceptResult = { ok: true; windowStart: number } | { ok: false; reason: RejectReason };

/** What `ingest` did with a batch. */
export interface IngestResult {
  /** The partition's position after the batch: the next offset to consume. */
  position: bigint;
  ingested: number;
  /** Rejected records by reason, indexed as rejectReasons. */
  rejected: number[];
}

const tooLate = rejectReasons.indexOf('too_late');
const windowSealed = rejectReasons.indexOf('window_sealed');
const tooManyRows = rejectReasons.indexOf('too_many_rows');

/** A segment key's generation: 0 for a window's first segment. */
export const generationOf = (s: Pick<Segment, 'key' | 'windowStart'>): number =>
  s.key - s.windowStart;

const NUL = '\u0000';

/**
 * The key of a row: its dimension values joined by NUL, cheap on the hot path. A value holding a
 * NUL itself is rare; such a row is keyed by n NULs + JSON instead. JSON escapes NUL, so those keys
 * hold exactly n NULs and joined keys exactly n − 1: the two kinds never meet.
 */
export function keyOf(dimensions: readonly string[]): string {
  let key = '';
  for (let i = 0; i < dimensions.length; i++) {
    const v = dimensions[i]!;
    if (v.includes(NUL)) return NUL.repeat(dimensions.length) + JSON.stringify(dimensions);
    key = i === 0 ? v : key + NUL + v;
  }
  return key;
}

/** Records in a delta row that `partition`, at `epoch`, touched it (row-budget.ts). */
function touched(row: Row, partition: number, epoch: number): void {
  (row.touchedBy ??= new Map()).set(partition, epoch);
}

export function combine(fn: MeasureFunction, a: number, b: number): number {
  switch (fn) {
    case 'count':
    case 'sum':
      return a + b;
    case 'min':
      return Math.min(a, b);
    case 'max':
      return Math.max(a, b);
  }
}

/** Adds a measure's input to a row's value: units exactly for a sum with a scale. */
const combineValue = (fn: MeasureFunction, units: boolean, a: Units, b: Units): Units =>
  units ? addUnits(a, b) : combine(fn, a as number, b as number);

/** Rejected records by reason, as JSON: only the reasons that counted some. */
export const reasonCountsToJson = (counts: readonly number[]): Record<string, number> =>
  Object.fromEntries(counts.flatMap((n, i) => (n > 0 ? [[rejectReasons[i]!, n]] : [])));

/** Rejected records by reason from JSON; a reason this receiver does not know is left out. */
export function reasonCountsFromJson(json: Record<string, number>): number[] {
  const counts = new Array<number>(rejectReasons.length).fill(0);
  for (const [reason, n] of Object.entries(json)) {
    const i = rejectReasons.indexOf(reason as RejectReason);
    if (i >= 0) counts[i] = n;
  }
  return counts;
}

/** A segment's rejected records as JSON (partition → reason → count): checkpoint, manifest, record. */
export const rejectedToJson = (
  rejected: ReadonlyMap<number, readonly number[]>,
): Record<string, Record<string, number>> =>
  Object.fromEntries([...rejected].map(([p, counts]) => [String(p), reasonCountsToJson(counts)]));

export const rejectedFromJson = (
  json: Record<string, Record<string, number>>,
): Map<number, number[]> =>
  new Map(Object.entries(json).map(([p, counts]) => [Number(p), reasonCountsFromJson(counts)]));

const noRejections = (): number[] => new Array<number>(rejectReasons.length).fill(0);

/** Adds `counts` to `into` (both indexed as rejectReasons). */
function addCounts(into: number[], counts: readonly number[]): void {
  for (let i = 0; i < counts.length; i++) into[i] = (into[i] ?? 0) + counts[i]!;
}

/** A segment's epochs as JSON, keyed by partition number: status, checkpoint, manifest. */
export const epochsToJson = (epochs: ReadonlyMap<number, number>): Record<string, number> =>
  Object.fromEntries([...epochs].map(([p, e]) => [String(p), e]));

export class SegmentManager {
  readonly windowMs: number;
  readonly latenessMs: number;
  /** Segments by key. */
  private readonly held = new Map<number, Segment>();
  readonly segments: ReadonlyMap<number, Segment> = this.held;
  /** Per window start, its ACTIVE segment: a window has at most one. */
  private readonly active = new Map<number, Segment>();
  private readonly clocks = new Map<number, PartitionClock>();
  readonly partitions: ReadonlyMap<number, Readonly<PartitionClock>> = this.clocks;
  /**
   * Windows before this one were handed off and purged: pending offsets never reopen one (an
   * event for one that its partition has not passed opens another generation of it).
   */
  private purgedBelow = Number.NEGATIVE_INFINITY;
  /**
   * Per partition, the offsets of the segments purged so far (all handed off); null when a
   * checkpoint written before it was kept says segments were purged: coverage unknown then.
   */
  private purgedCoverage: Map<number, OffsetRange[]> | null = new Map();
  /** Keys of segments changed since clearChanges(): what a checkpoint rewrites. */
  private changed = new Set<number>();
  readonly schema: CubeSchema;
  private readonly functions: MeasureFunction[];
  /** Per measure: a sum with a scale, whose values are units. */
  private readonly units: boolean[];
  /** Per partition, the rows it brought into each open window (row-budget.ts). */
  private readonly rowKeys = new Map<number, PartitionRowKeys>();
  private readonly maxRowsPerWindow: number;

  constructor(schema: CubeSchema) {
    this.schema = schema;
    this.functions = schema.measures.map((m) => m.function);
    this.units = schema.measures.map((m) => exactScaleOf(m) !== undefined);
    this.windowMs = parseDuration(schema.window) ?? 0;
    this.latenessMs = parseDuration(schema.allowedLateness) ?? 0;
    this.maxRowsPerWindow = maxRowsPerWindowOf(schema);
    if (this.windowMs <= 0) throw new Error(`window ${schema.window} must be positive`);
  }

  clock(partition: number): Readonly<PartitionClock> {
    return this.clockOf(partition);
  }

  private clockOf(partition: number): PartitionClock {
    let c = this.clocks.get(partition);
    if (!c) {
      c = { watermark: null, currentWindow: null, pending: [], pendingRejected: noRejections() };
      this.clocks.set(partition, c);
    }
    return c;
  }

  private rowKeysOf(partition: number): PartitionRowKeys {
    let keys = this.rowKeys.get(partition);
    if (!keys) this.rowKeys.set(partition, (keys = new PartitionRowKeys(this.maxRowsPerWindow)));
    return keys;
  }

  /** Distinct rows `partition` brought into the window under its epoch (row-budget.ts). */
  rowsBroughtBy(partition: number, windowStart: number): number {
    return this.rowKeys.get(partition)?.count(windowStart) ?? 0;
  }

  /** The epoch a checkpoint's partition was at: rows restored under another are not counted. */
  restoreRowKeysEpoch(partition: number, epoch: number): void {
    this.rowKeysOf(partition).startEpoch(epoch);
  }

  private forgetClosedRowKeys(partition: number, watermark: number): void {
    this.rowKeys
      .get(partition)
      ?.forgetClosed(watermark, (w) => w + this.windowMs + this.latenessMs);
  }

  /** A watermark carried over from a previous owner: raises the partition's, never lowers it. */
  raiseWatermark(partition: number, watermark: number | null): void {
    const clock = this.clockOf(partition);
    if (watermark !== null && (clock.watermark === null || watermark > clock.watermark))
      clock.watermark = watermark;
  }

  /** A partition's clock as a checkpoint recorded it. */
  restoreClock(partition: number, restored: PartitionClock): void {
    this.clocks.set(partition, {
      ...restored,
      pending: [...restored.pending],
      pendingRejected: restored.pendingRejected && [...restored.pendingRejected],
    });
  }

  windowOf(time: number): number {
    return Math.floor(time / this.windowMs) * this.windowMs;
  }

  /**
   * The window's ACTIVE segment, opened if it has none: the next generation after those held, or
   * undefined when the window has used every generation it can (one per millisecond of it).
   */
  private segmentFor(windowStart: number): Segment | undefined {
    const open = this.active.get(windowStart);
    if (open) return open;
    let key = windowStart;
    for (const s of this.held.values())
      if (s.windowStart === windowStart && s.key >= key) key = s.key + 1;
    if (key - windowStart >= this.windowMs) return undefined;
    const s: Segment = {
      key,
      windowStart,
      windowEnd: windowStart + this.windowMs,
      state: 'ACTIVE',
      rows: new Map(),
      delta: new Map(),
      ranges: new Map(),
      epochs: new Map(),
      rejected: new Map(),
    };
    this.held.set(key, s);
    this.active.set(windowStart, s);
    return s;
  }

  private cover(
    segment: Segment,
    partition: number,
    epoch: number,
    from: bigint,
    to: bigint,
  ): void {
    let ranges = segment.ranges.get(partition);
    if (!ranges) {
      ranges = [];
      segment.ranges.set(partition, ranges);
    }
    addRange(ranges, from, to);
    const known = segment.epochs.get(partition);
    if (known === undefined || epoch > known) segment.epochs.set(partition, epoch);
    this.changed.add(segment.key);
  }

  /** Counts rejected records among the partition's offsets of the segment. */
  private countRejected(segment: Segment, partition: number, counts: readonly number[]): void {
    const rejected = segment.rejected;
    if (!rejected) return; // not known: stays so
    let into = rejected.get(partition);
    if (!into) rejected.set(partition, (into = noRejections()));
    addCounts(into, counts);
  }

  /** Rejected records among offsets not yet in a segment: pending with them. */
  private countPendingRejected(clock: PartitionClock, counts: readonly number[]): void {
    if (clock.pendingRejected) addCounts(clock.pendingRejected, counts);
  }

  /** Gives the partition's pending offsets, and the rejected records among them, to `segment`. */
  private takePending(
    segment: Segment,
    clock: PartitionClock,
    partition: number,
    epoch: number,
  ): void {
    for (const r of clock.pending) this.cover(segment, partition, epoch, r.from, r.to);
    clock.pending = [];
    if (clock.pendingRejected === null) delete (segment as MutableSegment).rejected;
    else if (clock.pendingRejected.some((n) => n > 0))
      this.countRejected(segment, partition, clock.pendingRejected);
    clock.pendingRejected = noRejections();
  }

  /** The ACTIVE segment that offsets without an event of their own are accounted to. */
  private currentSegment(clock: PartitionClock): Segment | undefined {
    if (clock.currentWindow === null) return undefined;
    const s = this.segments.get(clock.currentWindow);
    return s?.state === 'ACTIVE' ? s : undefined;
  }

  /**
   * Aggregates an event read at `offset`, or rejects it as too late: its partition's watermark
   * passed its window's end plus the lateness. That is the only judgement, and it depends on the
   * partition alone, so that every replica set decides alike whichever held the partition before:
   * an event for a window sealed here (other partitions passed it) opens another generation of
   * it. `key` is keyOf(event.dimensions), for a caller that has it already.
   */
  accept(
    partition: number,
    epoch: number,
    offset: bigint,
    event: ParsedEvent,
    key?: string,
  ): AcceptResult {
    const clock = this.clockOf(partition);
    const windowStart = this.windowOf(event.time);
    const closesAt = windowStart + this.windowMs + this.latenessMs;
    if (clock.watermark !== null && clock.watermark >= closesAt) {
      this.skip(partition, epoch, offset, offset + 1n, 'too_late');
      return { ok: false, reason: 'too_late' };
    }
    const rowKey = key ?? keyOf(event.dimensions);
    if (!this.rowKeysOf(partition).admits(epoch, windowStart, rowKey)) {
      this.skip(partition, epoch, offset, offset + 1n, 'too_many_rows');
      return { ok: false, reason: 'too_many_rows' };
    }
    const segment = this.segmentFor(windowStart);
    if (!segment) {
      this.skip(partition, epoch, offset, offset + 1n, 'window_sealed');
      return { ok: false, reason: 'window_sealed' };
    }
    if (clock.pending.length > 0) this.takePending(segment, clock, partition, epoch);
    this.cover(segment, partition, epoch, offset, offset + 1n);
    clock.currentWindow = segment.key;
    if (clock.watermark === null || event.time > clock.watermark) {
      clock.watermark = event.time;
      this.forgetClosedRowKeys(partition, event.time);
    }

    this.merge(segment.rows, rowKey, event);
    touched(this.merge(segment.delta, rowKey, event), partition, epoch);
    return { ok: true, windowStart };
  }

  private merge(
    rows: Map<string, Row>,
    key: string,
    event: Pick<Row, 'dimensions' | 'values'>,
  ): Row {
    const row = rows.get(key);
    if (!row) {
      // Copies: a caller may reuse the event's arrays for the next record.
      const added = { dimensions: [...event.dimensions], values: [...event.values] };
      rows.set(key, added);
      return added;
    }
    const { functions, units } = this;
    const values = row.values;
    const input = event.values;
    for (let i = 0; i < functions.length; i++) {
      values[i] = combineValue(functions[i]!, units[i]!, values[i]!, input[i]!);
    }
    return row;
  }

  /**
   * Applies a parsed batch of one partition, read from `position`, as the records one by one would
   * be: a record before the position is skipped (delivered again after a seek), the batch ends at
   * the stop offset, offsets between records are skipped, every parsed event is accepted or
   * rejected and every rejected record skipped. The same segments, ranges, watermarks and counts as
   * accept/skip per record; what is per batch here is the cost. `offsets[i]` is record i's offset,
   * ascending and exact as numbers, so that Number() of the position and stop offset keeps their
   * order against them; offset ranges go to segments as bigint once per run of offsets that share
   * a segment, and rows are looked up once per row key and segment in the batch.
   */
  ingest(
    partition: number,
    epoch: number,
    position: bigint,
    stopOffset: bigint | null,
    offsets: Float64Array,
    batch: ParsedBatch,
  ): IngestResult {
    const rejected = new Array<number>(rejectReasons.length).fill(0);
    let ingested = 0;
    let pos = Number(position);
    const stop = stopOffset === null ? Infinity : Number(stopOffset);
    let first = 0;
    while (first < offsets.length && offsets[first]! < pos) first++;
    // Nothing to apply: the partition's clock is left as it is (not even created).
    if (first === offsets.length || offsets[first]! >= stop)
      return { position, ingested, rejected };
    const { columns, dictionary, keyDictionary } = batch;
    const { times, values, reasons, codes, keys } = columns;
    const { functions, units } = this;
    const m = functions.length;
    const d = this.schema.dimensions.length;
    const clock = this.clockOf(partition);
    let watermark = clock.watermark ?? -Infinity;
    const rowKeys = this.rowKeysOf(partition);
    // Per row-key code, whether the partition may bring the row into `admittedWindow`: a key
    // admitted stays so, and a full window stays full within a batch.
    let admittedWindow = NaN;
    let admitted: (boolean | undefined)[] = [];
    // Where offsets without an event of their own go (undefined: pending), and the run of offsets
    // [runFrom, pos) accounted to it but not yet added: coverage is contiguous from the position.
    let current = this.currentSegment(clock);
    let runFrom = pos;
    // Rejected records of the run, by reason (indexed as rejectReasons); undefined: none.
    let runRejected: number[] | undefined;
    const flushRun = (): void => {
      if (runFrom === pos) return;
      if (current) {
        this.cover(current, partition, epoch, BigInt(runFrom), BigInt(pos));
        if (runRejected) this.countRejected(current, partition, runRejected);
      } else {
        addRange(clock.pending, BigInt(runFrom), BigInt(pos));
        if (runRejected) this.countPendingRejected(clock, runRejected);
      }
      runFrom = pos;
      runRejected = undefined;
    };
    const rejectRecord = (reason: number): void => {
      rejected[reason]! += 1;
      (runRejected ??= noRejections())[reason]! += 1;
    };
    // Rows and deltas of one segment by row-key code, valid for this batch only.
    let cached: Segment | undefined;
    let rowCache: (Row | undefined)[] = [];
    let deltaCache: (Row | undefined)[] = [];
    const newRow = (i: number): Row => {
      const dimensions = new Array<string>(d);
      for (let j = 0; j < d; j++) dimensions[j] = dictionary[codes[i * d + j]!]!;
      return { dimensions, values: Array.from(values.subarray(i * m, i * m + m)) };
    };
    const mergeInto = (row: Row, i: number): void => {
      const into = row.values;
      for (let j = 0; j < m; j++)
        into[j] = combineValue(functions[j]!, units[j]!, into[j]!, values[i * m + j]!);
    };
    const mergeOrAdd = (rows: Map<string, Row>, key: string, i: number): Row => {
      let row = rows.get(key);
      if (row) mergeInto(row, i);
      else rows.set(key, (row = newRow(i)));
      return row;
    };

    for (let i = first; i < offsets.length; i++) {
      const offset = offsets[i]!;
      if (offset < pos) continue;
      if (offset >= stop) break;
      pos = offset; // a gap before the record is skipped: it extends the current run
      const reason = reasons[i]!;
      if (reason !== 0) {
        rejectRecord(reason - 1);
        pos = offset + 1;
        continue;
      }
      const time = times[i]!;
      const windowStart = this.windowOf(time);
      if (watermark >= windowStart + this.windowMs + this.latenessMs) {
        rejectRecord(tooLate);
        pos = offset + 1;
        continue;
      }
      const code = keys[i]!;
      if (windowStart !== admittedWindow) {
        admittedWindow = windowStart;
        admitted = [];
      }
      let admits = admitted[code];
      if (admits === undefined)
        admits = admitted[code] = rowKeys.admits(epoch, windowStart, keyDictionary[code]!);
      if (!admits) {
        rejectRecord(tooManyRows);
        pos = offset + 1;
        continue;
      }
      const segment = current?.windowStart === windowStart ? current : this.segmentFor(windowStart);
      if (!segment) {
        rejectRecord(windowSealed);
        pos = offset + 1;
        continue;
      }
      if (segment !== current || clock.pending.length > 0) {
        flushRun();
        if (clock.pending.length > 0) this.takePending(segment, clock, partition, epoch);
        current = segment;
      }
      pos = offset + 1;
      clock.currentWindow = segment.key;
      if (time > watermark) watermark = time;

      if (segment !== cached) {
        cached = segment;
        rowCache = [];
        deltaCache = [];
      }
      const row = rowCache[code];
      if (row) mergeInto(row, i);
      else rowCache[code] = mergeOrAdd(segment.rows, keyDictionary[code]!, i);
      const delta = deltaCache[code];
      if (delta) mergeInto(delta, i);
      else
        touched(
          (deltaCache[code] = mergeOrAdd(segment.delta, keyDictionary[code]!, i)),
          partition,
          epoch,
        );
      ingested += 1;
    }
    flushRun();
    if (watermark !== -Infinity && watermark !== clock.watermark) {
      clock.watermark = watermark;
      this.forgetClosedRowKeys(partition, watermark);
    }
    return { position: pos === Number(position) ? position : BigInt(pos), ingested, rejected };
  }

  /**
   * Accounts offsets that carry no accepted event (rejected records, control records, offsets
   * removed by compaction) to the partition's current segment, or holds them until it has one;
   * `rejected`: `records` records of [from, to) were rejected for this reason.
   */
  skip(
    partition: number,
    epoch: number,
    from: bigint,
    to: bigint,
    rejected?: RejectReason,
    records = 1,
  ): void {
    if (to <= from) return;
    const clock = this.clockOf(partition);
    const current = this.currentSegment(clock);
    const counts = rejected === undefined ? undefined : noRejections();
    if (counts) counts[rejectReasons.indexOf(rejected!)] = records;
    if (current) {
      this.cover(current, partition, epoch, from, to);
      if (counts) this.countRejected(current, partition, counts);
    } else {
      addRange(clock.pending, from, to);
      if (counts) this.countPendingRejected(clock, counts);
    }
  }

  /**
   * Merges rows read back from a fragment file (recovery) into a segment, and counts each row for
   * the partitions that brought it (under the epoch restoreRowKeysEpoch gave them); `rewrite`:
   * into its delta too, with the partitions that touched it, so that the next checkpoint writes
   * them anew (fragments of an older format).
   */
  restoreRows(segment: Segment, rows: Row[], rewrite = false): void {
    for (const row of rows) {
      const key = keyOf(row.dimensions);
      this.merge(segment.rows, key, row);
      if (rewrite) {
        const delta = this.merge(segment.delta, key, row);
        for (const [partition, epoch] of row.touchedBy ?? []) touched(delta, partition, epoch);
      }
      for (const [partition, epoch] of row.touchedBy ?? [])
        this.rowKeysOf(partition).restore(epoch, segment.windowStart, key);
    }
  }

  restoreSegment(segment: Omit<Segment, 'rows' | 'delta'>): Segment {
    const s: Segment = { ...segment, rows: new Map(), delta: new Map() };
    this.held.set(s.key, s);
    if (s.state === 'ACTIVE') this.active.set(s.windowStart, s);
    return s;
  }

  /** Where a checkpoint left the purge: windows before it stay refused after a restart. */
  restorePurgedBelow(windowStart: number | null): void {
    if (windowStart !== null && windowStart > this.purgedBelow) this.purgedBelow = windowStart;
  }

  /**
   * What a checkpoint recorded of the purged segments' offsets; `undefined` (a checkpoint of
   * before) with segments purged leaves the coverage unknown.
   */
  restorePurgedCoverage(coverage: Map<number, OffsetRange[]> | undefined): void {
    if (coverage) this.purgedCoverage = coverage;
    else if (Number.isFinite(this.purgedBelow)) this.purgedCoverage = null;
  }

  /** The purged segments' offsets per partition, for the checkpoint; null when unknown. */
  get purgedOffsets(): ReadonlyMap<number, OffsetRange[]> | null {
    return this.purgedCoverage;
  }

  /**
   * Per partition, the offsets this replica keeps — in segments of any state, purged ones (handed
   * off), and pending — and of those the ones handed off and `committed` (purged ones are); null
   * when a checkpoint of before left the purged ones unknown. Fenced offsets (discarded segments)
   * are in neither.
   */
  coverage(
    committed: (segment: Segment, partition: number, range: OffsetRange) => boolean = () => true,
  ): Map<number, { kept: OffsetRange[]; handedOff: OffsetRange[] }> | null {
    if (!this.purgedCoverage) return null;
    const out = new Map<number, { kept: OffsetRange[]; handedOff: OffsetRange[] }>();
    const of = (p: number) => {
      let c = out.get(p);
      if (!c) out.set(p, (c = { kept: [], handedOff: [] }));
      return c;
    };
    for (const [p, ranges] of this.purgedCoverage)
      for (const r of ranges) {
        addRange(of(p).kept, r.from, r.to);
        addRange(of(p).handedOff, r.from, r.to);
      }
    for (const s of this.held.values())
      for (const [p, ranges] of s.ranges)
        for (const r of ranges) {
          addRange(of(p).kept, r.from, r.to);
          if (s.state === 'HANDED_OFF' && committed(s, p, r))
            addRange(of(p).handedOff, r.from, r.to);
        }
    for (const [p, clock] of this.clocks)
      for (const r of clock.pending) addRange(of(p).kept, r.from, r.to);
    return out;
  }

  /** The first window not purged, or null when none was. */
  get firstUnpurgedWindow(): number | null {
    return Number.isFinite(this.purgedBelow) ? this.purgedBelow : null;
  }

  /** The rows changed since the last call, for a fragment; the segment starts a new delta. */
  takeDelta(segment: Segment): Map<string, Row> {
    const delta = segment.delta;
    (segment as MutableSegment).delta = new Map();
    return delta;
  }

  /** Keys of the segments changed (coverage, state) since clearChanges(). */
  changes(): ReadonlySet<number> {
    return this.changed;
  }

  /** The changes are durable (checkpointed). */
  clearChanges(): void {
    this.changed = new Set();
  }

  /** Records a hand-off: the row count is kept, the rows are dropped. */
  markHandedOff(segment: Segment, at: number): void {
    const s = segment as MutableSegment;
    s.handedOffRows = segment.rows.size;
    s.handedOffAt = at;
    s.state = 'HANDED_OFF';
    s.rows = new Map();
    this.changed.add(segment.key);
  }

  /** Forgets a handed-off segment; its window and every earlier one stay refused as sealed. */
  purge(segment: Segment): void {
    if (segment.state !== 'HANDED_OFF')
      throw new Error(`segment ${segment.windowStart} is ${segment.state}, not handed off`);
    this.held.delete(segment.key);
    this.changed.delete(segment.key);
    if (segment.windowEnd > this.purgedBelow) this.purgedBelow = segment.windowEnd;
    if (this.purgedCoverage)
      for (const [p, ranges] of segment.ranges) {
        let into = this.purgedCoverage.get(p);
        if (!into) this.purgedCoverage.set(p, (into = []));
        for (const r of ranges) addRange(into, r.from, r.to);
      }
  }

  /**
   * Segments holding offsets of `partition` at or past `from`: what a partition that ran past the
   * offset its next owner starts from holds of the next owner's range.
   */
  holdingFrom(partition: number, from: bigint): Segment[] {
    return [...this.held.values()].filter((s) =>
      (s.ranges.get(partition) ?? []).some((r) => r.to > from),
    );
  }

  /**
   * Drops a segment whose rows are never to be data (fenced): one not handed off, or one handed
   * off that no commit record names and none will (the caller knows which). Unlike a purge its
   * window stays open and its offsets are not kept: later offsets may open the window again.
   */
  discard(segment: Segment): void {
    this.held.delete(segment.key);
    this.changed.delete(segment.key);
    if (this.active.get(segment.windowStart) === segment) this.active.delete(segment.windowStart);
  }

  /**
   * Windows every given partition has passed (watermark beyond end + lateness, or idle), in
   * order. `passed` lets the caller treat idle partitions as passed.
   */
  sealableWindows(partitions: number[], idle: (partition: number) => boolean): Segment[] {
    const ready: Segment[] = [];
    for (const s of [...this.segments.values()].sort((a, b) => a.key - b.key)) {
      if (s.state !== 'ACTIVE') continue;
      const closesAt = s.windowEnd + this.latenessMs;
      const allPassed = partitions.every((p) => {
        const w = this.partitions.get(p)?.watermark ?? null;
        return (w !== null && w >= closesAt) || idle(p);
      });
      if (allPassed) ready.push(s);
    }
    return ready;
  }

  /**
   * Makes a segment IMMUTABLE. Pending offsets are not touched: a caller sealing for good (release,
   * seal of the cube) settles them first with settlePending.
   */
  seal(segment: Segment): void {
    (segment as MutableSegment).state = 'IMMUTABLE';
    if (this.active.get(segment.windowStart) === segment) this.active.delete(segment.windowStart);
    this.changed.add(segment.key);
  }

  /**
   * Gives pending offsets of `partition` to the latest ACTIVE segment; with none, to the window of
   * the partition's watermark (or `fallbackTime`), or the first window after it that holds no
   * segment: sealed data is never touched.
   */
  settlePending(partition: number, epoch: number, fallbackTime: number): void {
    const clock = this.clockOf(partition);
    if (clock.pending.length === 0) return;
    const latest = [...this.active.values()].sort((a, b) => b.windowStart - a.windowStart)[0];
    const target =
      latest ??
      this.segmentFor(this.nextFreeWindow(this.windowOf(clock.watermark ?? fallbackTime)));
    // A window that holds no segment opens at generation 0.
    this.takePending(target!, clock, partition, epoch);
  }

  /** The first window from `from` on that holds no segment and was not purged. */
  private nextFreeWindow(from: number): number {
    const taken = new Set([...this.held.values()].map((s) => s.windowStart));
    let w = Math.max(from, this.purgedBelow);
    while (taken.has(w)) w += this.windowMs;
    return w;
  }

  rowCount(segment: Segment): number {
    return segment.handedOffRows ?? segment.rows.size;
  }
}
