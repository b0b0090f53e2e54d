// One listing of a cube's committed view, counted once: every committed hand-off as a piece with
// its offsets parsed, and the merge of them. Committed pieces are always offered before live ones
// (piecePreference), so which of them count does not depend on an answer's live pieces: the
// merge is kept with the listing and forked per answer. The counted pieces are kept in time order
// and by block (an hour of 1-minute windows), for reading only those a time range needs and for
// rollups of whole blocks.
import { createHash } from 'node:crypto';
import { type OffsetRange, addRange, rangeMapFromJson } from '../receiver/offset-ranges.ts';
import type { CommittedWindow } from './committed-view.ts';
import {
  PieceCount,
  type Piece,
  type ReplayOf,
  piecePreference,
  predatesTheCube,
} from './merge.ts';

/** Where a committed piece's rows are: its hand-off's key, and the end of its window. */
export interface HandOffRef {
  key: string;
  windowEnd: number;
}

/** A counted committed piece as the index keeps it: its window and its hand-off, no offsets. */
export interface CommittedRef {
  windowStart: number;
  windowEnd: number;
  key: string;
}

/** Counted pieces of one block of time, in time order; `id` changes when any of them does. */
export interface CommittedBlock {
  start: number;
  pieces: CommittedRef[];
  id: string;
}

const hourMs = 3_600_000;
const dayMs = 24 * hourMs;

/**
 * The span of a block: an hour when windows are shorter and divide it, else a day likewise, else
 * one window (no rollup). Blocks are aligned to the epoch, as granularities are, so a block sits
 * inside one bucket of any granularity of a whole number of blocks.
 */
export function blockSpanMs(windowMs: number): number {
  for (const span of [hourMs, dayMs]) if (windowMs < span && span % windowMs === 0) return span;
  return windowMs;
}

/** A piece's rejected records from JSON (partition → reason → count); nothing when it does not say. */
export const rejectedOf = (
  json: Record<string, Record<string, number>> | undefined,
): Pick<Piece<unknown>, 'rejected'> =>
  json ? { rejected: new Map(Object.entries(json).map(([p, c]) => [Number(p), c])) } : {};

export class CommittedIndex {
  /** Windows of the listing (one per window and replica set) and the hand-offs they list. */
  readonly windows: number;
  readonly handOffs: number;
  /** The merge of every committed piece (their offsets, not the pieces): fork it, then offer the live ones. */
  readonly count: PieceCount<never>;
  /** The counted pieces, by window start. */
  readonly counted: CommittedRef[];
  readonly blockMs: number;
  readonly windowMs: number;
  /** partition → offsets Kafka deleted before they were read, as the records' hand-offs say. */
  readonly lost = new Map<number, OffsetRange[]>();
  private readonly blocks = new Map<number, CommittedBlock>();
  private readonly summary: Pick<Piece<unknown>, 'ranges' | 'rejected'>[];

  /**
   * False when this index extends `base` (below) but a new piece met offsets `base` holds or
   * refused, or another new piece's: which piece counts then depends on the preference order
   * among all of them, and only an index of the whole view says it.
   */
  readonly extendsCleanly: boolean;

  /** Hand-offs of the listing not counted because they predate the cube (merge.ts, predatesTheCube). */
  readonly predating: number;

  /**
   * Hand-offs of the listing not counted because their record is another cube's of the same name
   * (its cubeUid is not this cube's uid): of windows holding no record of this cube.
   */
  readonly otherCube: number;

  /**
   * The index of `view`; with `base`, of `base`'s view and `view` (windows none of whose records
   * `base` indexed): only `view`'s records are parsed and merged. The outcome is that of one merge
   * of both when `extendsCleanly`: every new piece's offsets are new. `replayOf`: offsets re-read
   * after a reset backward count again (merge.ts, ReplayOf); a `base` was made with the same.
   * `began`: where the cube began reading each partition; hand-offs holding only offsets before
   * it are an earlier cube's of the same name (predatesTheCube): left out. A `base` was made with
   * the same.
   */
  constructor(
    view: CommittedWindow[],
    windowMs: number,
    base?: CommittedIndex,
    replayOf?: ReplayOf,
    began?: ReadonlyMap<number, bigint>,
  ) {
    const pieces: Piece<HandOffRef>[] = [];
    let predating = base?.predating ?? 0;
    let otherCube = base?.otherCube ?? 0;
    let windows = base?.windows ?? 0;
    for (const [p, ranges] of base?.lost ?? [])
      this.lost.set(
        p,
        ranges.map((r) => ({ ...r })),
      );
    for (const w of view) {
      if (w.otherCube) {
        otherCube += w.record.handOffs.length;
        continue;
      }
      windows += 1;
      w.record.handOffs.forEach((h, i) => {
        const ranges = rangeMapFromJson(h.offsetRanges);
        if (predatesTheCube(ranges, began)) {
          predating += 1;
          return;
        }
        pieces.push({
          kind: 'committed',
          source: `committed ${w.handOffKeys[i]}`,
          replicaSet: w.replicaSet,
          windowStart: w.windowStart,
          ranges,
          epochs: new Map(Object.entries(h.epochs).map(([p, e]) => [Number(p), e])),
          ...rejectedOf(h.rejected),
          rows: { key: w.handOffKeys[i]!, windowEnd: w.windowStart + windowMs },
        });
        for (const [p, ranges] of rangeMapFromJson(h.lostRanges ?? {})) {
          const acc = this.lost.get(p) ?? [];
          for (const r of ranges) addRange(acc, r.from, r.to);
          this.lost.set(p, acc);
        }
      });
    }
    this.predating = predating;
    this.otherCube = otherCube;
    this.windows = windows;
    this.handOffs = (base?.handOffs ?? 0) + pieces.length;
    const count = (
      base ? base.count.fork<HandOffRef>() : new PieceCount<HandOffRef>(replayOf)
    ).offer(pieces.sort(piecePreference));
    this.extendsCleanly =
      !base ||
      (count.counted.length === pieces.length &&
        !pieces.some((piece) => meetsAny(base.count.refused, piece.ranges)));
    this.summary = summarizeRejected([...(base?.summary ?? []), ...count.counted]);
    // Kept: the offsets counted and the counted pieces' places, not their offset maps.
    this.count = count.fork<never>();
    const added = count.counted
      .map((p) => ({ windowStart: p.windowStart, windowEnd: p.rows.windowEnd, key: p.rows.key }))
      .sort((a, b) => a.windowStart - b.windowStart);
    this.counted = base ? mergeByWindow(base.counted, added) : added;
    this.windowMs = windowMs;
    this.blockMs = blockSpanMs(windowMs);
    // A block of `base` that gets no new piece is kept as it is (its id, and so its rollups).
    const touched = new Set<CommittedBlock>();
    for (const [start, block] of base?.blocks ?? []) this.blocks.set(start, block);
    for (const piece of added) {
      const start = Math.floor(piece.windowStart / this.blockMs) * this.blockMs;
      let block = this.blocks.get(start);
      if (!block || !touched.has(block)) {
        block = { start, pieces: [...(block?.pieces ?? [])], id: '' };
        this.blocks.set(start, block);
        touched.add(block);
      }
      block.pieces.push(piece);
    }
    for (const block of touched) {
      block.pieces.sort((a, b) => a.windowStart - b.windowStart);
      const hash = createHash('sha256');
      for (const piece of block.pieces) hash.update(piece.key).update('\u0000');
      block.id = `${block.start}.${hash.digest('hex').slice(0, 24)}`;
    }
  }

  /** The counted pieces whose window meets [from, to), in time order. */
  countedIn(from: number | undefined, to: number | undefined): CommittedRef[] {
    const first = from === undefined ? 0 : this.firstWhere((p) => p.windowEnd > from);
    const end =
      to === undefined ? this.counted.length : this.firstWhere((p) => p.windowStart >= to);
    return this.counted.slice(first, Math.max(first, end));
  }

  /** The block `piece` is in. */
  blockOf(piece: CommittedRef): CommittedBlock {
    return this.blocks.get(Math.floor(piece.windowStart / this.blockMs) * this.blockMs)!;
  }

  /** What countRejected needs of the counted committed pieces (summarizeRejected). */
  rejectedSummary(): Pick<Piece<unknown>, 'ranges' | 'rejected'>[] {
    return this.summary;
  }

  /** Roughly the bytes the index holds, for the cache's bound. */
  get bytes(): number {
    return this.counted.reduce((n, p) => n + 96 + 2 * p.key.length, 1024);
  }

  private firstWhere(test: (p: CommittedRef) => boolean): number {
    let lo = 0;
    let hi = this.counted.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (test(this.counted[mid]!)) hi = mid;
      else lo = mid + 1;
    }
    return lo;
  }
}

/** Whether any offset of `ranges` is in `refused` (PieceCount's offsets of conflicting pieces). */
function meetsAny(
  refused: PieceCount<never>['refused'],
  ranges: Map<number, OffsetRange[]>,
): boolean {
  for (const [p, list] of ranges)
    for (const r of list)
      for (const x of refused.get(p) ?? [])
        if (x.ranges.some((h) => h.from < r.to && r.from < h.to)) return true;
  return false;
}

/** Two lists of refs, each sorted by window start, as one (new windows mostly come last). */
function mergeByWindow(a: CommittedRef[], b: CommittedRef[]): CommittedRef[] {
  if (b.length === 0) return a;
  if (a.length === 0 || a.at(-1)!.windowStart <= b[0]!.windowStart) return [...a, ...b];
  return [...a, ...b].sort((x, y) => x.windowStart - y.windowStart);
}

/**
 * What countRejected needs of counted pieces, in two pieces: the offsets of those that say their
 * rejected records with the sums of them, and the offsets of those that do not. Its outcome does
 * not depend on how the offsets are split into pieces, only on their union, the sums, and which
 * partitions some piece does not say for.
 */
function summarizeRejected(
  counted: Pick<Piece<unknown>, 'ranges' | 'rejected'>[],
): Pick<Piece<unknown>, 'ranges' | 'rejected'>[] {
  const known = new Map<number, OffsetRange[]>();
  const unknown = new Map<number, OffsetRange[]>();
  const sums = new Map<number, Record<string, number>>();
  for (const piece of counted)
    for (const [p, ranges] of piece.ranges) {
      const into = piece.rejected ? known : unknown;
      const acc = into.get(p) ?? [];
      for (const r of ranges) addRange(acc, r.from, r.to);
      into.set(p, acc);
      if (!piece.rejected) continue;
      const sum = sums.get(p) ?? {};
      for (const [reason, n] of Object.entries(piece.rejected.get(p) ?? {}))
        sum[reason] = (sum[reason] ?? 0) + n;
      sums.set(p, sum);
    }
  return [{ ranges: known, rejected: sums }, ...(unknown.size > 0 ? [{ ranges: unknown }] : [])];
}
