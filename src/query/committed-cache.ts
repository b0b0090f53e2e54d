// The query service's cache of the committed view, bounded in bytes. What it keeps never changes
// once written (docs/deep-storage.md): a commit record's key names one version, created once by
// compare-and-set; a hand-off's manifest is written after its data file and a rewrite writes the
// same bytes at the same key. So entries are kept by key until the bound evicts the least
// recently used. The listing of a cube's records is the one thing that goes stale: it is reused
// while younger than `listMaxAgeMs`, then listed again from its newest windows on (resumed), and
// in whole whenever an answer made from it is not complete (a window committed since is then a
// gap in the offsets, never a silent miss) or the last full listing is old enough. With a
// listing it keeps its index (committed-index.ts: the committed pieces, merged once), and
// rollups of whole blocks of counted pieces; these two under half of the bound of their own, so
// that a scan of every hand-off (a cold question over the whole cube) does not evict them.
import type { CubeSchema } from '../api/cube.ts';
import type { ResetAccounting } from '../api/reset-ranges.ts';
import type { DeepStorage } from '../receiver/deep-storage.ts';
import type { PieceRow } from './answer.ts';
import { CommittedIndex } from './committed-index.ts';
import { cubeDir } from '../receiver/hand-off-commit.ts';
import {
  type CommittedCube,
  type HandOffRow,
  type RecordReader,
  type RecordVersions,
  addRecordKeys,
  listRecordVersions,
  readHandOffRows,
  readRecords,
} from './committed-view.ts';

/** A map whose entries weigh bytes, the least recently used dropped past `maxBytes`. */
export class ByteBoundedLru<V> {
  private readonly entries = new Map<string, { value: V; bytes: number }>();
  private total = 0;
  readonly maxBytes: number;

  constructor(maxBytes: number) {
    this.maxBytes = maxBytes;
  }

  get bytes(): number {
    return this.total;
  }

  get size(): number {
    return this.entries.size;
  }

  get(key: string): V | undefined {
    const e = this.entries.get(key);
    if (!e) return undefined;
    // Map keeps insertion order: moving the entry to the end makes it the most recent.
    this.entries.delete(key);
    this.entries.set(key, e);
    return e.value;
  }

  /** Keeps `value` unless it alone is over the bound; evicts the oldest entries to fit. */
  set(key: string, value: V, bytes: number): void {
    this.delete(key);
    if (bytes > this.maxBytes) return;
    this.entries.set(key, { value, bytes });
    this.total += bytes;
    for (const [oldest, e] of this.entries) {
      if (this.total <= this.maxBytes) break;
      this.entries.delete(oldest);
      this.total -= e.bytes;
    }
  }

  delete(key: string): void {
    const e = this.entries.get(key);
    if (!e) return;
    this.entries.delete(key);
    this.total -= e.bytes;
  }
}

export type CacheKind = 'listing' | 'record' | 'rows' | 'rollup';

export interface CommittedCacheOptions {
  maxBytes: number;
  /** A cube's listing is reused this long (unless an answer from it was incomplete). */
  listMaxAgeMs: number;
  /**
   * A listing past its age lists only the newest windows again (resumed, see `resumeAfter`) while
   * the last full listing is younger than this; absent: 10 minutes.
   */
  fullListMaxAgeMs?: number;
  /** Window directories a listing that resumes lists again (resumeAfter); absent: 60. */
  relistedWindows?: number;
  now?: () => number;
  /** Told of each look-up, for metrics. */
  onLookup?: (kind: CacheKind, hit: boolean) => void;
  /** Told of the bytes held after each change. */
  onBytes?: (bytes: number) => void;
  /** Told of each listing: of every key, or resumed from the last one's newest windows. */
  onListing?: (kind: 'full' | 'resumed') => void;
}

/**
 * What V8 (64-bit, no pointer compression) holds for values the cache keeps, measured against the
 * heap (bench/README.md): a string 16 bytes of header and its characters, one byte each when
 * they are Latin-1 (JSON and Arrow's ASCII), rounded up to 8; a row an object of two fields (40),
 * two arrays (32 each, and a backing store of 16 and 8 a slot), a slot in its hand-off's array (8,
 * and as much again of spare capacity); each value a boxed number (16) or a bigint (24).
 */
const stringBytes = (s: string): number => 16 + 8 * Math.ceil(Math.max(1, s.length) / 8);
const rowBytes = (dimensions: readonly string[], values: number): number =>
  144 + dimensions.reduce((n, d) => n + 8 + stringBytes(d), 0) + 32 * values;
/** A commit record's text, and the entry around it. */
export const recordBytes = (text: string): number => 64 + stringBytes(text);
/** A hand-off's rows as `rows` decoded them. */
export const handOffRowsBytes = (rows: readonly HandOffRow[]): number =>
  rows.reduce((n, r) => n + rowBytes(r.dimensions, r.values.length), 64);
/** A rollup's rows, and its key. */
export const rollupBytes = (key: string, rows: readonly PieceRow[]): number =>
  rows.reduce((n, r) => n + rowBytes(r.dims, r.values.length), 64 + stringBytes(key));

/** By uid too: a cube made again under the same name leaves out records another one counted. */
const listingId = (cube: CommittedCube): string =>
  `${cube.namespace ?? ''}/${cube.cube}\u0000${cube.uid ?? ''}`;

/**
 * A cube's listing, kept as its index and the versions of the records it read (the records' text
 * is kept apart, by key), and where a listing that resumes from it starts.
 */
interface Listing {
  at: number;
  index: CommittedIndex;
  versions: RecordVersions;
  /** When the listing of every key this one stems from ran. */
  fullAt: number;
  /** Keys after this one are listed again by a listing that resumes; undefined: list them all. */
  resumeAfter: string | undefined;
  /** The resets its merge counted replays of (ResetAccounting.key), and where the cube began. */
  replays: string;
}

/** Window directories listed again by a listing that resumes: an hour of 1-minute windows. */
const defaultRelistedWindows = 60;

/**
 * Where a listing resumes: at the `relistedWindows`-th last window directory in key order, so
 * that those (where new record versions come: later generations, a sibling replica covering
 * more) are listed again, and every key after them (new windows) is listed. A record written
 * into an older window is not seen until the next full listing; until then its offsets, held by
 * no receiver once committed, are a gap, and an answer with a gap lists everything again.
 */
export function resumeAfter(
  versions: RecordVersions,
  relistedWindows = defaultRelistedWindows,
): string | undefined {
  const windows = [...new Set([...versions.keys()].map((at) => at.slice(0, at.indexOf('/'))))];
  if (windows.length === 0) return undefined;
  windows.sort();
  return windows[Math.max(0, windows.length - relistedWindows)];
}

const defaultFullListMaxAgeMs = 10 * 60_000;

export class CommittedViewCache {
  /** Records and rows: what is read from deep storage. */
  private readonly lru: ByteBoundedLru<unknown>;
  /** Listings (their indexes) and rollups: what is made of it, small, and dear to make again. */
  private readonly derived: ByteBoundedLru<unknown>;
  private readonly options: CommittedCacheOptions;
  private readonly now: () => number;
  /** Listings under way, by cube and window length. */
  private readonly listings = new Map<string, Promise<CommittedIndex>>();

  constructor(options: CommittedCacheOptions) {
    this.options = options;
    const derivedBytes = Math.floor(options.maxBytes / 2);
    this.derived = new ByteBoundedLru(derivedBytes);
    this.lru = new ByteBoundedLru(options.maxBytes - derivedBytes);
    this.now = options.now ?? Date.now;
  }

  get bytes(): number {
    return this.lru.bytes + this.derived.bytes;
  }

  private lookup<V>(kind: CacheKind, key: string): V | undefined {
    const value = this.lruOf(kind).get(`${kind}\u0000${key}`) as V | undefined;
    this.options.onLookup?.(kind, value !== undefined);
    return value;
  }

  private keep(kind: CacheKind, key: string, value: unknown, bytes: number): void {
    const id = `${kind}\u0000${key}`;
    // The entry itself: its key, a slot of the map and the object holding value and size.
    this.lruOf(kind).set(id, value, bytes + 96 + stringBytes(id));
    this.options.onBytes?.(this.bytes);
  }

  private lruOf(kind: CacheKind): ByteBoundedLru<unknown> {
    return kind === 'listing' || kind === 'rollup' ? this.derived : this.lru;
  }

  /**
   * The cube's committed view as an index (committed-index.ts): the cached one while young
   * enough and `relist` is false, else a new listing (records read only when their key is not
   * cached), indexed once, so an answer from a cached listing parses and merges no record again.
   */
  async index(
    storage: DeepStorage,
    cube: CommittedCube,
    windowMs: number,
    o: {
      relist: boolean;
      signal?: AbortSignal;
      replays?: ResetAccounting;
      /** Where the cube began reading each partition (CommittedIndex's `began`). */
      began?: ReadonlyMap<number, bigint>;
    },
  ): Promise<{ index: CommittedIndex; cached: boolean }> {
    const id = listingId(cube);
    // A cube made again under the same name begins elsewhere: its listing is its own.
    const replays = `${o.replays?.key ?? ''}\u0000${beganKey(o.began)}`;
    // A listing whose merge counted other resets' replays is neither used nor resumed from.
    const cached = o.relist ? undefined : this.lookup<Listing>('listing', id);
    const listed = cached?.replays === replays ? cached : undefined;
    if (
      listed &&
      listed.index.windowMs === windowMs &&
      this.now() - listed.at < this.options.listMaxAgeMs
    )
      return { index: listed.index, cached: true };
    // Answers that find the listing stale at once share one new listing (a month of windows
    // takes seconds to list); one asking to list again because its answer had a gap makes its own.
    const inFlight = o.relist
      ? undefined
      : this.listings.get(`${id}\u0000${windowMs}\u0000${replays}`);
    if (inFlight) return { index: await inFlight, cached: false };
    // A listing asked for because an answer had a gap lists everything; one past its age resumes.
    const listing = this.list(storage, cube, windowMs, o.signal, listed, o);
    if (!o.relist) {
      const key = `${id}\u0000${windowMs}\u0000${replays}`;
      this.listings.set(key, listing);
      const done = () => {
        if (this.listings.get(key) === listing) this.listings.delete(key);
      };
      listing.then(done, done);
    }
    return { index: await listing, cached: false };
  }

  private async list(
    storage: DeepStorage,
    cube: CommittedCube,
    windowMs: number,
    signal: AbortSignal | undefined,
    previous: Listing | undefined,
    accounting: { replays?: ResetAccounting; began?: ReadonlyMap<number, bigint> },
  ): Promise<CommittedIndex> {
    const replays = accounting.replays;
    const began = accounting.began;
    const at = this.now();
    const fullMaxAge = this.options.fullListMaxAgeMs ?? defaultFullListMaxAgeMs;
    const resume =
      previous && previous.index.windowMs === windowMs && at - previous.fullAt < fullMaxAge
        ? previous.resumeAfter
        : undefined;
    let versions: RecordVersions;
    let index: CommittedIndex | undefined;
    if (previous && resume !== undefined) {
      versions = new Map(previous.versions);
      const keys = await storage.listKeys(cubeDir(cube), signal, resume);
      const changed = addRecordKeys(
        versions,
        keys.filter((k) => k > resume),
      );
      this.options.onListing?.('resumed');
      if (changed.length === 0) index = previous.index;
      else if (changed.every((w) => !previous.versions.has(w))) {
        // Only new windows: their records alone are read and merged into the index, unless
        // their offsets meet some it holds (then the index of everything is made again).
        const added = await readRecords(
          cube,
          new Map(changed.map((w) => [w, versions.get(w)!])),
          this.readRecord(storage),
          signal,
        );
        const extended = new CommittedIndex(
          added,
          windowMs,
          previous.index,
          replays?.replayOf,
          began,
        );
        if (extended.extendsCleanly) index = extended;
      }
    } else {
      versions = await listRecordVersions(storage, cube, signal);
      this.options.onListing?.('full');
    }
    index ??= new CommittedIndex(
      await readRecords(cube, versions, this.readRecord(storage), signal),
      windowMs,
      undefined,
      replays?.replayOf,
      began,
    );
    const listing: Listing = {
      at,
      index,
      versions,
      fullAt: previous && resume !== undefined ? previous.fullAt : at,
      resumeAfter: resumeAfter(versions, this.options.relistedWindows),
      replays: `${replays?.key ?? ''}\u0000${beganKey(began)}`,
    };
    // The versions weigh about as much as the index's references (a key, a few numbers each).
    this.keep('listing', listingId(cube), listing, index.bytes + 160 * versions.size);
    return index;
  }

  /** Commit records by key, through the cache: a record never changes once written. */
  private readRecord(storage: DeepStorage): RecordReader {
    return async (key, s) => {
      const cached = this.lookup<string>('record', key);
      if (cached !== undefined) return cached;
      const text = await storage.readObject(key, s);
      if (text !== undefined) this.keep('record', key, text, recordBytes(text));
      return text;
    };
  }

  /** The rows of a rollup at `key` (a block's id and a query's shape), if kept. */
  rollup(key: string): PieceRow[] | undefined {
    return this.lookup<PieceRow[]>('rollup', key);
  }

  keepRollup(key: string, rows: PieceRow[]): void {
    this.keep('rollup', key, rows, rollupBytes(key, rows));
  }

  /** The rows of the hand-off at `key`, decoded in the schema's column order. */
  async rows(
    storage: DeepStorage,
    key: string,
    schema: Pick<CubeSchema, 'dimensions' | 'measures'>,
    signal?: AbortSignal,
  ): Promise<HandOffRow[]> {
    // The schema of a cube does not change (the CRD refuses it); the names make the key exact.
    const id = `${key}\u0000${schema.dimensions.join(',')}\u0000${schema.measures.map((m) => m.name).join(',')}`;
    const cached = this.lookup<HandOffRow[]>('rows', id);
    if (cached) return cached;
    const rows = await readHandOffRows(storage, key, schema, undefined, signal);
    this.keep('rows', id, rows, handOffRowsBytes(rows));
    return rows;
  }
}

/** `began` as a cache key: partition=offset pairs, in partition order. */
function beganKey(began: ReadonlyMap<number, bigint> | undefined): string {
  return [...(began ?? [])]
    .sort(([a], [b]) => a - b)
    .map(([p, o]) => `${p}=${o}`)
    .join(',');
}
