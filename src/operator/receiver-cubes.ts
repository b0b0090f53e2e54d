// What each receiver holds, as the operator reads it: one GET /v1/cubes per receiver per resync
// answers every cube (DESIGN §2), and a cube this operator changed on a receiver since that read
// (assign, pause, drain, seal...) is read alone (GET of that cube) until the next listing. A change
// to one cube used to drop the receiver's whole listing: 1,000 new cubes (bench:scale), each
// placed by an assign, made every observation of every cube read a receiver's 250 cubes anew.
import { cubeKeyString, type CubeKey } from '../protocol/cube-paths.ts';
import type { CubeSummary } from '../protocol/admin-api.ts';
import { SharedReads } from './shared-reads.ts';
import type { Clock } from './runtime/clock.ts';

export interface ReceiverCubesSource {
  /** GET /v1/cubes: every cube of the receiver, of every namespace. */
  list(baseUrl: string): Promise<CubeSummary[]>;
  /** One cube's summary; undefined when the receiver does not hold it (404). */
  one(baseUrl: string, cube: CubeKey, signal?: AbortSignal): Promise<CubeSummary | undefined>;
}

interface Listing {
  /** The sequence number taken when the read began. */
  readAt: number;
  cubes: Map<string, CubeSummary>;
}

interface SingleRead {
  readAt: number;
  summary: CubeSummary | undefined;
}

export class ReceiverCubes {
  private readonly source: ReceiverCubesSource;
  private readonly listings: SharedReads<Listing>;
  /**
   * One sequence for reads begun and changes made: a read reflects a change when it began after
   * the change's call returned (a read under way meanwhile may or may not have seen it).
   */
  private sequence = 0;
  /** Per receiver, per cube key: the sequence number of the last change made to the cube. */
  private readonly changed = new Map<string, Map<string, number>>();
  /** Per receiver, per cube key: the cube read alone after its last change. */
  private readonly singles = new Map<string, Map<string, SingleRead>>();

  constructor(source: ReceiverCubesSource, options: { maxAgeMs: number; clock?: Clock }) {
    this.source = source;
    this.listings = new SharedReads<Listing>({
      fetch: async (baseUrl) => {
        const readAt = ++this.sequence;
        const cubes = new Map(
          (await source.list(baseUrl)).map((c) => [
            cubeKeyString({ namespace: c.namespace, name: c.cube }),
            c,
          ]),
        );
        return { readAt, cubes };
      },
      maxAgeMs: options.maxAgeMs,
      ...(options.clock ? { clock: options.clock } : {}),
    });
  }

  /**
   * A call that may change the receiver's state returned (or failed: the receiver may have acted
   * on it anyway): about one cube, or, without one, about the whole receiver.
   */
  changedOn(baseUrl: string, cube?: CubeKey): void {
    if (cube === undefined) {
      this.listings.invalidate(baseUrl);
      this.singles.delete(baseUrl);
      this.changed.delete(baseUrl);
      return;
    }
    const key = cubeKeyString(cube);
    mapOf(this.changed, baseUrl).set(key, ++this.sequence);
    this.singles.get(baseUrl)?.delete(key);
  }

  /** The cube as the receiver holds it now or at its last listing; undefined: it does not hold it. */
  async get(
    baseUrl: string,
    cube: CubeKey,
    signal?: AbortSignal,
  ): Promise<CubeSummary | undefined> {
    const listing = await this.listings.get(baseUrl, signal);
    const key = cubeKeyString(cube);
    const changedAt = this.changed.get(baseUrl)?.get(key);
    if (changedAt === undefined) return listing.cubes.get(key);
    if (listing.readAt > changedAt) {
      // The listing is newer than the change: the cube needs no read of its own any more.
      this.changed.get(baseUrl)?.delete(key);
      this.singles.get(baseUrl)?.delete(key);
      return listing.cubes.get(key);
    }
    const single = this.singles.get(baseUrl)?.get(key);
    if (single && single.readAt > changedAt) return single.summary;
    const readAt = ++this.sequence;
    const summary = await this.source.one(baseUrl, cube, signal);
    // Kept unless another change came meanwhile (its read then comes after it).
    if ((this.changed.get(baseUrl)?.get(key) ?? 0) < readAt)
      mapOf(this.singles, baseUrl).set(key, { readAt, summary });
    return summary;
  }
}

function mapOf<V>(maps: Map<string, Map<string, V>>, key: string): Map<string, V> {
  let map = maps.get(key);
  if (!map) {
    map = new Map();
    maps.set(key, map);
  }
  return map;
}
