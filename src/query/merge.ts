// The merge of a query's pieces — committed windows from deep storage, live segments from the
// receivers — by offsets, so that every offset counts once. Pure: which piece counts is decided
// from the offsets and epochs the pieces carry, never from who owns a partition now.
//
// A piece's rows are aggregated: they cannot be split by offset. So a piece counts whole or not
// at all: one whose offsets no counted piece holds counts; one whose offsets are all held already
// is a duplicate (another copy of the same data); one that shares only some is a conflict and
// does not count, and the offsets it alone holds are reported missing with the reason.
import {
  type OffsetRange,
  type RangeJson,
  addRange,
  rangesToJson,
} from '../receiver/offset-ranges.ts';
import { type AccountedRangeJson, type AccountedRanges, explainGaps } from './accounted-ranges.ts';

export type PieceKind = 'committed' | 'live';

export interface Piece<Rows> {
  kind: PieceKind;
  /** Where it came from, for a person: a commit record's hand-off, or a receiver's segment. */
  source: string;
  replicaSet: string;
  windowStart: number;
  /** partition → offsets [from, to) the piece's rows hold, merged and sorted. */
  ranges: Map<number, OffsetRange[]>;
  /** partition → the assignment epoch its offsets were consumed under. */
  epochs: Map<number, number>;
  /** partition → records rejected among its offsets, by reason; absent when the piece does not say. */
  rejected?: Map<number, Record<string, number>>;
  rows: Rows;
}

/** Offsets that could not be read, and why: a replica set with no answering replica, storage. */
export interface Unavailable {
  /** The partitions it may hold data of; `all` for deep storage (every partition's past). */
  partitions: number[] | 'all';
  reason: string;
}

export interface PartitionBounds {
  /** Where the cube began reading the partition, when known (an epoch's start); else its first covered offset. */
  start?: bigint;
  /** The live position: the next offset to consume, as far as known. */
  end?: bigint;
}

export interface MissingRange {
  from: string;
  /** Absent: up to a live position that is not known (no replica answered for it). */
  to?: string;
  reason: string;
}

/**
 * The replay a partition's offsets read under an epoch belong to: how many offset resets backward
 * came before it (src/operator/offset-reset/reset-ranges.ts). An offset counts once per replay:
 * a copy read again after a reset backward is counted again, on purpose.
 */
export type ReplayOf = (partition: number, epoch: number) => number;

/** Offsets an offset reset accounts for: skipped on purpose (forward), or read again (backward). */
export interface ResetAccounted {
  partition: number;
  kind: 'skipped' | 'reread';
  from: bigint;
  to: bigint;
  /** "skipped by reset <id>", "re-read after reset <id>". */
  reason: string;
}

export interface PartitionCoverage {
  partition: number;
  /** The offsets the answer accounts for: [from, to), complete when `covered` runs without a gap. */
  from: string;
  to: string;
  covered: RangeJson[];
  /** Offsets accounted for but not counted, each with why (accounted-ranges.ts): not a gap. */
  lost: AccountedRangeJson[];
  complete: boolean;
  missing: MissingRange[];
  /** Offsets an offset reset skipped (not missing) or re-read (counted again, not double). */
  resets?: { from: string; to: string; reason: string }[];
}

export interface Conflict {
  source: string;
  reason: string;
}

export interface MergeResult<Rows> {
  /** The pieces that count, each offset in exactly one of them. */
  counted: Piece<Rows>[];
  /** Pieces skipped because counted ones hold all their offsets. */
  duplicates: number;
  conflicts: Conflict[];
  partitions: PartitionCoverage[];
  complete: boolean;
}

const maxEpoch = (p: Piece<unknown>): number => Math.max(-1, ...p.epochs.values());

/**
 * The order pieces are tried in: committed before live (a committed window is final), then the
 * later epoch first (a copy read past a stop offset under the epoch before is what a fence
 * refuses), then by window and source so the answer does not depend on arrival order.
 */
export function piecePreference(a: Piece<unknown>, b: Piece<unknown>): number {
  if (a.kind !== b.kind) return a.kind === 'committed' ? -1 : 1;
  return (
    maxEpoch(b) - maxEpoch(a) ||
    a.windowStart - b.windowStart ||
    (a.source < b.source ? -1 : a.source > b.source ? 1 : 0)
  );
}

type Coverage = Map<number, OffsetRange[]>;

/**
 * A coverage key: the partition in replay 0, else the partition in a key space of its own per
 * replay (partitions are int32, so `p + replay * 2^32` never meets another partition's key).
 */
const replaySpan = 2 ** 32;
const partitionOfKey = (key: number): number => key % replaySpan;

const isEmpty = (r: OffsetRange): boolean => r.to <= r.from;

/** How a piece's offsets meet those counted: none shared, all shared, or some. */
function meet(counted: Coverage, piece: Coverage): 'disjoint' | 'inside' | 'partial' {
  let shared = false;
  let outside = false;
  for (const [p, ranges] of piece) {
    const held = counted.get(p) ?? [];
    for (const r of ranges) {
      if (isEmpty(r)) continue;
      const overlap = held.some((h) => h.from < r.to && r.from < h.to);
      const within = held.some((h) => h.from <= r.from && r.to <= h.to);
      if (overlap) shared = true;
      if (!within) outside = true;
    }
  }
  if (!shared) return 'disjoint';
  return outside ? 'partial' : 'inside';
}

/**
 * Whether a piece holds only offsets before where the cube began reading each of its partitions
 * (`began`: status.firstOffsets): data of an earlier cube of the same name, deleted and made
 * again, whose hand-offs deep storage still keeps. Never the cube's to count: not counted, not a
 * gap. A piece with any offset at or past the beginning is the cube's and is merged as usual.
 */
export function predatesTheCube(
  ranges: ReadonlyMap<number, OffsetRange[]>,
  began: ReadonlyMap<number, bigint> | undefined,
): boolean {
  if (!began || began.size === 0) return false;
  let any = false;
  for (const [p, list] of ranges) {
    const held = list.filter((r) => !isEmpty(r));
    if (held.length === 0) continue;
    const start = began.get(p);
    if (start === undefined || held.at(-1)!.to > start) return false;
    any = true;
  }
  return any;
}

/** `ranges` less `minus`: both merged and sorted. */
export function subtractRanges(ranges: OffsetRange[], minus: OffsetRange[]): OffsetRange[] {
  const out: OffsetRange[] = [];
  for (const r of ranges) {
    let from = r.from;
    for (const m of minus) {
      if (m.to <= from || m.from >= r.to) continue;
      if (m.from > from) out.push({ from, to: m.from });
      if (m.to > from) from = m.to;
    }
    if (from < r.to) out.push({ from, to: r.to });
  }
  return out;
}

const rangeText = (r: OffsetRange): string => `[${r.from}, ${r.to})`;

/**
 * The counting half of the merge, offered pieces in preference order: each counts whole, is a
 * duplicate, or is a conflict. Committed pieces always come before live ones (piecePreference),
 * so what the committed view counts does not depend on the live pieces: a merge of the committed
 * view can be kept (per listing) and forked for each answer's live pieces, with the same outcome
 * as one merge of them all.
 */
export class PieceCount<Rows> {
  /** The pieces counted since this count was forked (or made). */
  counted: Piece<Rows>[] = [];
  /** How many the count it was forked from had counted: those it no longer holds. */
  countedBefore = 0;
  readonly coverage: Coverage = new Map();
  readonly conflicts: Conflict[] = [];
  /** partition → offsets held only by a conflicting piece, with its reason. */
  readonly refused = new Map<number, { ranges: OffsetRange[]; reason: string }[]>();
  duplicates = 0;
  private readonly replayOf: ReplayOf | undefined;

  constructor(replayOf?: ReplayOf) {
    this.replayOf = replayOf;
  }

  /** The piece's ranges by coverage key: by partition, and by replay after a reset backward. */
  private keyed(piece: Piece<Rows>): Coverage {
    const replayOf = this.replayOf;
    if (!replayOf) return piece.ranges;
    const out: Coverage = new Map();
    for (const [p, ranges] of piece.ranges)
      out.set(p + replayOf(p, piece.epochs.get(p) ?? 0) * replaySpan, ranges);
    return out;
  }

  /** Offers `pieces`, in preference order; each must sort after every piece offered before. */
  offer(pieces: Iterable<Piece<Rows>>): this {
    for (const piece of pieces) this.offerOne(piece);
    return this;
  }

  /**
   * A copy that further pieces can be offered to without changing this one. It holds the
   * offsets counted, not the pieces (`countedBefore` says how many): a fork kept with a listing
   * keeps none of its pieces alive.
   */
  fork<Next = Rows>(): PieceCount<Next> {
    const f = new PieceCount<Next>(this.replayOf);
    f.countedBefore = this.countedBefore + this.counted.length;
    for (const [p, r] of this.coverage)
      f.coverage.set(
        p,
        r.map((x) => ({ ...x })),
      );
    f.conflicts.push(...this.conflicts);
    for (const [p, r] of this.refused) f.refused.set(p, [...r]);
    f.duplicates = this.duplicates;
    return f;
  }

  private offerOne(piece: Piece<Rows>): void {
    const coverage = this.coverage;
    const keyed = this.keyed(piece);
    const how = meet(coverage, keyed);
    if (how === 'inside') {
      this.duplicates += 1;
      return;
    }
    if (how === 'partial') {
      const shared = [...keyed].flatMap(([p, ranges]) =>
        ranges.flatMap((r) =>
          (coverage.get(p) ?? [])
            .filter((h) => h.from < r.to && r.from < h.to)
            .map(
              (h) =>
                `partition ${partitionOfKey(p)} ${rangeText({ from: h.from > r.from ? h.from : r.from, to: h.to < r.to ? h.to : r.to })}`,
            ),
        ),
      );
      const reason = `${piece.source} shares only some of its offsets with pieces counted already (${shared.slice(0, 3).join(', ')}): its rows cannot be split by offset`;
      this.conflicts.push({ source: piece.source, reason });
      for (const [key, ranges] of keyed) {
        const alone = subtractRanges(ranges, coverage.get(key) ?? []);
        const p = partitionOfKey(key);
        if (alone.length > 0)
          this.refused.set(p, [...(this.refused.get(p) ?? []), { ranges: alone, reason }]);
      }
      return;
    }
    this.counted.push(piece);
    for (const [p, ranges] of keyed) {
      const acc = coverage.get(p) ?? [];
      for (const r of ranges) addRange(acc, r.from, r.to);
      coverage.set(p, acc);
    }
  }
}

/**
 * Merges `pieces` so that every offset counts once, and says per partition which offsets the
 * answer covers and whether they run without a gap from where the cube began reading to the live
 * position. `pending`: offsets receivers consumed that carry no event and sit in no segment yet
 * (accounted, nothing to count). `partitions`: every partition the answer must account for.
 */
export function mergePieces<Rows>(o: {
  pieces: Piece<Rows>[];
  pending?: Coverage;
  bounds: Map<number, PartitionBounds>;
  unavailable?: Unavailable[];
  accounted?: AccountedRanges;
  replayOf?: ReplayOf;
  resets?: ResetAccounted[];
}): MergeResult<Rows> {
  return finishMerge(
    new PieceCount<Rows>(o.replayOf).offer([...o.pieces].sort(piecePreference)),
    o,
  );
}

/** The merge's result from what `count` counted: every partition's coverage and gaps. */
export function finishMerge<Rows>(
  count: PieceCount<Rows>,
  o: {
    pending?: Coverage;
    bounds: Map<number, PartitionBounds>;
    unavailable?: Unavailable[];
    /** Offsets known gone (accounted-ranges.ts): they explain a gap, never fill counted offsets. */
    accounted?: AccountedRanges;
    /** What offset resets skipped and re-read: reported as such, never as missing. */
    resets?: ResetAccounted[];
  },
): MergeResult<Rows> {
  const { counted, coverage, conflicts, refused, duplicates } = count;
  // Every replay's offsets folded onto their partition: re-read ones are accounted once here.
  const accounted: Coverage = new Map();
  for (const [key, ranges] of coverage) {
    const acc = accounted.get(partitionOfKey(key)) ?? [];
    for (const r of ranges) addRange(acc, r.from, r.to);
    accounted.set(partitionOfKey(key), acc);
  }
  for (const [p, ranges] of o.pending ?? []) {
    const acc = accounted.get(p) ?? [];
    for (const r of ranges) addRange(acc, r.from, r.to);
    accounted.set(p, acc);
  }

  const partitionSet = new Set([...o.bounds.keys(), ...accounted.keys()]);
  const partitions: PartitionCoverage[] = [];
  for (const p of [...partitionSet].sort((a, b) => a - b)) {
    const ranges = (accounted.get(p) ?? []).filter((r) => !isEmpty(r));
    const bounds = o.bounds.get(p) ?? {};
    const first = ranges[0]?.from;
    const last = ranges.at(-1)?.to;
    const from = bounds.start ?? first ?? bounds.end ?? 0n;
    let to = bounds.end ?? last ?? from;
    if (last !== undefined && last > to) to = last;
    const lowest = first !== undefined && first < from ? first : from;
    const resets = (o.resets ?? []).filter((r) => r.partition === p);
    const skipped: OffsetRange[] = [];
    for (const r of resets) if (r.kind === 'skipped') addRange(skipped, r.from, r.to);
    const { explained, left: gaps } = explainGaps(
      subtractRanges(subtractRanges([{ from: lowest, to }], ranges), skipped),
      o.accounted?.get(p),
    );
    const unavailable = (o.unavailable ?? []).filter(
      (u) => u.partitions === 'all' || u.partitions.includes(p),
    );
    const missing: MissingRange[] = [];
    for (const gap of gaps) {
      const why = (refused.get(p) ?? []).find((x) =>
        x.ranges.some((r) => r.from < gap.to && gap.from < r.to),
      );
      const reason =
        why?.reason ??
        (unavailable.length > 0
          ? unavailable.map((u) => u.reason).join('; ')
          : 'no committed window and no live segment of a ready receiver holds these offsets');
      missing.push({ from: gap.from.toString(), to: gap.to.toString(), reason });
    }
    // Data past the known end may be held by what could not be read: the answer cannot say.
    if (unavailable.length > 0 && missing.length === 0)
      missing.push({ from: to.toString(), reason: unavailable.map((u) => u.reason).join('; ') });
    partitions.push({
      partition: p,
      from: lowest.toString(),
      to: to.toString(),
      covered: rangesToJson(ranges),
      lost: explained,
      complete: missing.length === 0,
      missing,
      ...(resets.length > 0
        ? {
            resets: resets.map((r) => ({
              from: r.from.toString(),
              to: r.to.toString(),
              reason: r.reason,
            })),
          }
        : {}),
    });
  }
  return {
    counted,
    duplicates,
    conflicts,
    partitions,
    complete:
      partitions.every((x) => x.complete) &&
      !(o.unavailable ?? []).some((u) => u.partitions === 'all'),
  };
}
