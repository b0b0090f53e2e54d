// The query service's cache of the committed view, bounded in bytes. What it keeps never changes
// once written (docs/deep-storage.md): a commit record's key names one version, created once by
// compare-and-set; a hand-off's manifest is written after its data file and a rewrite writes the
// same bytes at the same key. So entries are kept by key until the bound evicts the least
// recently used. The listing of a cube's records is the one thing that goes stale: it is reused
// while younger than `listMaxAgeMs`, and listed again whenever an answer made from it is not
// complete (a window committed since is then a gap in the offsets, never a silent miss).
import type { CubeSchema } from '../api/cube.ts';
import type { DeepStorage } from '../receiver/deep-storage.ts';
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

export type CacheKind = 'listing' | 'record' | 'rows';

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

const windowBytes = (w: CommittedWindow): number =>
  128 + 2 * (w.dir.length + w.handOffKeys.reduce((n, k) => n + k.length, 0));

export class CommittedViewCache {
  private readonly lru: ByteBoundedLru<unknown>;
  private readonly options: CommittedCacheOptions;
  private readonly now: () => number;

  constructor(options: CommittedCacheOptions) {
    this.options = options;
    this.lru = new ByteBoundedLru(options.maxBytes);
    this.now = options.now ?? Date.now;
  }

  get bytes(): number {
    return this.lru.bytes;
  }

  private lookup<V>(kind: CacheKind, key: string): V | undefined {
    const value = this.lru.get(`${kind}\u0000${key}`) as V | undefined;
    this.options.onLookup?.(kind, value !== undefined);
    return value;
  }

  private keep(kind: CacheKind, key: string, value: unknown, bytes: number): void {
    this.lru.set(`${kind}\u0000${key}`, value, bytes);
    this.options.onBytes?.(this.lru.bytes);
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
    const id = `${cube.namespace ?? ''}/${cube.cube}`;
    if (!o.relist) {
      const listed = this.lookup<{ at: number; windows: CommittedWindow[] }>('listing', id);
      if (listed && this.now() - listed.at < this.options.listMaxAgeMs)
        return { windows: listed.windows, cached: true };
    }
    const at = this.now();
    const windows = await readCommittedView(storage, cube, o.signal, async (key, signal) => {
      const cached = this.lookup<string>('record', key);
      if (cached !== undefined) return cached;
      const text = await storage.readObject(key, signal);
      if (text !== undefined) this.keep('record', key, text, 64 + 2 * text.length);
      return text;
    });
    this.keep(
      'listing',
      id,
      { at, windows },
      windows.reduce((n, w) => n + windowBytes(w), 64),
    );
    return { windows, cached: false };
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
