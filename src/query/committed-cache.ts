// The query service's cache of the committed view, bounded in bytes. What it keeps never changes
// once written (docs/deep-storage.md): a commit record's key names one version, created once by
// compare-and-set; a hand-off's manifest is written after its data file and a rewrite writes the
// same bytes at the same key. So entries are kept by key until the bound evicts the least
// recently used. The listing of a cube's records is the one thing that goes stale: it is reused
// while younger than `listMaxAgeMs`, and listed again whenever an answer made from it is not
// complete (a window committed since is then a gap in the offsets, never a silent miss). With a
// listing it keeps its index (committed-index.ts: the committed pieces, merged once), and
// rollups of whole blocks of counted pieces; these two under half of the bound of their own, so
// that a scan of every hand-off (a cold question over the whole cube) does not evict them.
import type { CubeSchema } from '../api/cube.ts';
import type { ResetAccounting } from '../api/reset-ranges.ts';
import type { DeepStorage } from '../receiver/deep-storage.ts';
import type { PieceRow } from './answer.ts';
import { CommittedIndex } from './committed-index.ts';
import {
  type CommittedCube,
  type HandOffRow,
  readCommittedView,
  readHandOffRows,
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
  now?: () => number;
  /** Told of each look-up, for metrics. */
  onLookup?: (kind: CacheKind, hit: boolean) => void;
  /** Told of the bytes held after each change. */
  onBytes?: (bytes: number) => void;
}

/** Roughly what a value holds in memory: strings two bytes a character, numbers eight. */
const rowBytes = (row: HandOffRow): number =>
  48 + row.dimensions.reduce((n, d) => n + 16 + 2 * d.length, 0) + 8 * row.values.length;

const listingId = (cube: CommittedCube): string => `${cube.namespace ?? ''}/${cube.cube}`;

/** A cube's listing, kept as its index only (the records' text is kept apart, by key). */
interface Listing {
  at: number;
  index: CommittedIndex;
  /** The resets its merge counted replays of (ResetAccounting.key). */
  replays: string;
}

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
    this.lruOf(kind).set(`${kind}\u0000${key}`, value, bytes);
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
    o: { relist: boolean; signal?: AbortSignal; replays?: ResetAccounting },
  ): Promise<{ index: CommittedIndex; cached: boolean }> {
    const id = listingId(cube);
    const replays = o.replays?.key ?? '';
    if (!o.relist) {
      const listed = this.lookup<Listing>('listing', id);
      if (
        listed &&
        listed.index.windowMs === windowMs &&
        listed.replays === replays &&
        this.now() - listed.at < this.options.listMaxAgeMs
      )
        return { index: listed.index, cached: true };
    }
    // Answers that find the listing stale at once share one new listing (a month of windows
    // takes seconds to list); one asking to list again because its answer had a gap makes its own.
    const inFlight = o.relist
      ? undefined
      : this.listings.get(`${id}\u0000${windowMs}\u0000${replays}`);
    if (inFlight) return { index: await inFlight, cached: false };
    const listing = this.list(storage, cube, windowMs, o.signal, o.replays);
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
    replays?: ResetAccounting,
  ): Promise<CommittedIndex> {
    const at = this.now();
    const windows = await readCommittedView(storage, cube, signal, async (key, s) => {
      const cached = this.lookup<string>('record', key);
      if (cached !== undefined) return cached;
      const text = await storage.readObject(key, s);
      if (text !== undefined) this.keep('record', key, text, 64 + 2 * text.length);
      return text;
    });
    const index = new CommittedIndex(windows, windowMs, replays?.replayOf);
    this.keep(
      'listing',
      listingId(cube),
      { at, index, replays: replays?.key ?? '' } satisfies Listing,
      index.bytes,
    );
    return index;
  }

  /** The rows of a rollup at `key` (a block's id and a query's shape), if kept. */
  rollup(key: string): PieceRow[] | undefined {
    return this.lookup<PieceRow[]>('rollup', key);
  }

  keepRollup(key: string, rows: PieceRow[]): void {
    this.keep(
      'rollup',
      key,
      rows,
      rows.reduce(
        (n, r) => n + 48 + r.dims.reduce((m, d) => m + 16 + 2 * d.length, 0) + 16 * r.values.length,
        64 + 2 * key.length,
      ),
    );
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
    this.keep(
      'rows',
      id,
      rows,
      rows.reduce((n, r) => n + rowBytes(r), 64),
    );
    return rows;
  }
}
