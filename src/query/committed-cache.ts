// The query service's cache of the committed view, bounded in bytes. What it keeps never changes
// once written (docs/deep-storage.md): a commit record's key names one version, created once by
// compare-and-set; a hand-off's manifest is written after its data file and a rewrite writes the
// same bytes at the same key. So entries are kept by key until the bound evicts the least
// recently used. The listing of a cube's records is the one thing that goes stale: it is reused
// while younger than `listMaxAgeMs`, and listed again whenever an answer made from it is not
// complete (a window committed since is then a gap in the offsets, never a silent miss). With a
// listing it keeps its index (committed-index.ts: the committed pieces, merged once); beside it,
// rollups of whole blocks of counted pieces, under a quarter of the bound of their own so that a
// scan of every hand-off (a cold question over the whole cube) does not evict them.
import type { CubeSchema } from '../api/cube.ts';
import type { DeepStorage } from '../receiver/deep-storage.ts';
import type { PieceRow } from './answer.ts';
import { CommittedIndex } from './committed-index.ts';
import {
  type CommittedCube,
  type CommittedWindow,
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

const windowBytes = (w: CommittedWindow): number =>
  128 + 2 * (w.dir.length + w.handOffKeys.reduce((n, k) => n + k.length, 0));

interface Listing {
  at: number;
  windows: CommittedWindow[];
  /** Built on first use, for the window length it was built with. */
  index?: { windowMs: number; index: CommittedIndex };
}

const listingBytes = (windows: CommittedWindow[]): number =>
  windows.reduce((n, w) => n + windowBytes(w), 64);

export class CommittedViewCache {
  private readonly lru: ByteBoundedLru<unknown>;
  private readonly rollups: ByteBoundedLru<PieceRow[]>;
  private readonly options: CommittedCacheOptions;
  private readonly now: () => number;

  constructor(options: CommittedCacheOptions) {
    this.options = options;
    const rollupBytes = Math.floor(options.maxBytes / 4);
    this.rollups = new ByteBoundedLru(rollupBytes);
    this.lru = new ByteBoundedLru(options.maxBytes - rollupBytes);
    this.now = options.now ?? Date.now;
  }

  get bytes(): number {
    return this.lru.bytes + this.rollups.bytes;
  }

  private lookup<V>(kind: CacheKind, key: string): V | undefined {
    const value = (
      kind === 'rollup' ? this.rollups.get(key) : this.lru.get(`${kind}\u0000${key}`)
    ) as V | undefined;
    this.options.onLookup?.(kind, value !== undefined);
    return value;
  }

  private keep(kind: CacheKind, key: string, value: unknown, bytes: number): void {
    if (kind === 'rollup') this.rollups.set(key, value as PieceRow[], bytes);
    else this.lru.set(`${kind}\u0000${key}`, value, bytes);
    this.options.onBytes?.(this.bytes);
  }

  /**
   * The cube's committed view as an index (committed-index.ts), kept with its listing: built once
   * per listing, so an answer from a cached listing parses and merges none of its records again.
   */
  async index(
    storage: DeepStorage,
    cube: CommittedCube,
    windowMs: number,
    o: { relist: boolean; signal?: AbortSignal },
  ): Promise<{ index: CommittedIndex; cached: boolean }> {
    const { listing, cached } = await this.listing(storage, cube, o);
    if (listing.index?.windowMs !== windowMs) {
      listing.index = { windowMs, index: new CommittedIndex(listing.windows, windowMs) };
      // Weighed again with its index, which holds a piece per hand-off.
      this.keep(
        'listing',
        listingId(cube),
        listing,
        listingBytes(listing.windows) + listing.index.index.bytes,
      );
    }
    return { index: listing.index.index, cached };
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

  /**
   * The cube's committed view: the cached listing while young enough and `relist` is false, else
   * a new listing whose records are read only when their key is not cached.
   */
  async view(
    storage: DeepStorage,
    cube: CommittedCube,
    o: { relist: boolean; signal?: AbortSignal },
  ): Promise<{ windows: CommittedWindow[]; cached: boolean }> {
    const { listing, cached } = await this.listing(storage, cube, o);
    return { windows: listing.windows, cached };
  }

  private async listing(
    storage: DeepStorage,
    cube: CommittedCube,
    o: { relist: boolean; signal?: AbortSignal },
  ): Promise<{ listing: Listing; cached: boolean }> {
    const id = listingId(cube);
    if (!o.relist) {
      const listed = this.lookup<Listing>('listing', id);
      if (listed && this.now() - listed.at < this.options.listMaxAgeMs)
        return { listing: listed, cached: true };
    }
    const at = this.now();
    const windows = await readCommittedView(storage, cube, o.signal, async (key, signal) => {
      const cached = this.lookup<string>('record', key);
      if (cached !== undefined) return cached;
      const text = await storage.readObject(key, signal);
      if (text !== undefined) this.keep('record', key, text, 64 + 2 * text.length);
      return text;
    });
    const listing: Listing = { at, windows };
    this.keep('listing', id, listing, listingBytes(windows));
    return { listing, cached: false };
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
