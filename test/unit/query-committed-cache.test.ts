// The committed view's cache: bounded in bytes (least recently used out first); a warm answer
// reads nothing from deep storage; a window committed since the cached listing shows as a gap in
// the offsets, so the answer lists again and reads only the new record and hand-off. A listing
// past its age resumes from the newest windows, and lists every key again now and then.
import type { QueryResponse } from '../../src/protocol/admin-api.ts';
import { ByteBoundedLru, CommittedViewCache } from '../../src/query/committed-cache.ts';
import type { Segment } from '../../src/receiver/segments.ts';
import { MemoryDeepStorage } from '../support/memory-deep-storage.ts';
import {
  commitSegments,
  countByCountry,
  oneReceiverService,
  oneSetCube,
} from '../support/query-fixtures.ts';

const M = 60_000;

test('the LRU keeps within its bound, drops the least recently used, refuses one entry over it', () => {
  const lru = new ByteBoundedLru<string>(100);
  lru.set('a', 'a', 40);
  lru.set('b', 'b', 40);
  expect(lru.get('a')).toBe('a'); // a is now the most recent
  lru.set('c', 'c', 40);
  expect([lru.get('a'), lru.get('b'), lru.get('c')]).toEqual(['a', undefined, 'c']);
  expect(lru.bytes).toBe(80);
  lru.set('huge', 'h', 101);
  expect(lru.get('huge')).toBeUndefined();
  lru.set('a', 'a2', 60); // replacing counts the new size only
  expect(lru.bytes).toBe(100);
  expect(lru.size).toBe(2);
});

/** Deep storage in memory that counts every call. */
class CountingStorage extends MemoryDeepStorage {
  readonly calls = { list: 0, record: 0, manifest: 0, data: 0 };
  /** Where each listing started after (undefined: every key). */
  readonly listedAfter: (string | undefined)[] = [];
  override listKeys(prefix: string, signal?: AbortSignal, startAfter?: string): Promise<string[]> {
    this.calls.list += 1;
    this.listedAfter.push(startAfter);
    return super.listKeys(prefix, signal, startAfter);
  }
  override readObject(key: string): Promise<string | undefined> {
    this.calls.record += 1;
    return super.readObject(key);
  }
  override readManifest(key: string): Promise<string | undefined> {
    this.calls.manifest += 1;
    return super.readManifest(key);
  }
  override readBytes(key: string): Promise<Uint8Array | undefined> {
    this.calls.data += 1;
    return super.readBytes(key);
  }
  reset(): void {
    Object.assign(this.calls, { list: 0, record: 0, manifest: 0, data: 0 });
  }
}

const schema = countByCountry;

/** Window w of partition 0, offsets [10w, 10w + 10), `10` events of 'de'. */
const windowSegment = (w: number): Segment => ({
  key: w * M,
  windowStart: w * M,
  windowEnd: (w + 1) * M,
  state: 'IMMUTABLE',
  rows: new Map([['de', { dimensions: ['de'], values: [10] }]]),
  delta: new Map(),
  ranges: new Map([[0, [{ from: BigInt(10 * w), to: BigInt(10 * w + 10) }]]]),
  epochs: new Map([[0, 1]]),
});

const commit = (storage: MemoryDeepStorage, w: number): Promise<void> =>
  commitSegments(storage, schema, [windowSegment(w)]);

/** The receiver holds windows `live` (not handed off), and knows the partition up to `to`. */
const liveAnswer = (live: number[], to: number): QueryResponse => ({
  columns: ['events'],
  rows: [],
  offsetRanges: {},
  segments: live.length,
  pieces: live.map((w) => ({
    windowStart: w * M,
    windowEnd: (w + 1) * M,
    epochs: { '0': 1 },
    offsetRanges: { '0': [[String(10 * w), String(10 * w + 10)]] },
    inRange: true,
    rows: [[10]],
  })),
  held: { '0': { to: String(to), pending: [] } },
});

function setup(maxBytes = 1 << 20) {
  const storage = new CountingStorage();
  let now = 0;
  let answer = liveAnswer([], 0);
  const cache = new CommittedViewCache({ maxBytes, listMaxAgeMs: 5000, now: () => now });
  const service = oneReceiverService({
    cube: oneSetCube(schema),
    storage,
    cache,
    answer: () => answer,
  });
  return {
    storage,
    cache,
    ask: () => service.answer('shop', 'orders', {}),
    live: (a: QueryResponse) => (answer = a),
    advance: (ms: number) => (now += ms),
  };
}

test('warm: no read at all; a window committed since: listed again, only the new record and hand-off read', async () => {
  const t = setup();
  await commit(t.storage, 0);
  await commit(t.storage, 1);
  t.live(liveAnswer([2], 30));
  t.storage.reset();
  const cold = await t.ask();
  expect([cold.complete, cold.rows]).toEqual([true, [[30]]]);
  expect(t.storage.calls).toEqual({ list: 1, record: 2, manifest: 2, data: 2 });

  t.storage.reset();
  const warm = await t.ask();
  expect([warm.complete, warm.rows]).toEqual([true, [[30]]]);
  expect(t.storage.calls).toEqual({ list: 0, record: 0, manifest: 0, data: 0 });

  // Window 2 is committed and purged from the receiver: the cached listing lacks it (a gap).
  await commit(t.storage, 2);
  t.storage.reset();
  t.live(liveAnswer([], 30));
  const after = await t.ask();
  expect([after.complete, after.rows]).toEqual([true, [[30]]]);
  expect(t.storage.calls).toEqual({ list: 1, record: 1, manifest: 1, data: 1 });

  // The listing's age runs out: listed again, every record and hand-off from the cache.
  t.advance(5000);
  t.storage.reset();
  expect((await t.ask()).rows).toEqual([[30]]);
  expect(t.storage.calls).toEqual({ list: 1, record: 0, manifest: 0, data: 0 });
});

test('answers that find the listing stale at once share one new listing', async () => {
  const t = setup();
  for (let w = 0; w < 3; w++) await commit(t.storage, w);
  t.live(liveAnswer([], 30));
  await t.ask();
  t.advance(5000);
  t.storage.reset();
  const answers = await Promise.all([t.ask(), t.ask(), t.ask()]);
  expect(answers.map((a) => [a.complete, a.rows])).toEqual(Array(3).fill([true, [[30]]]));
  expect(t.storage.calls.list).toBe(1);
});

test('a cache smaller than the rows: within its bound, answers still right, rows read again', async () => {
  const t = setup(400);
  for (let w = 0; w < 6; w++) await commit(t.storage, w);
  t.live(liveAnswer([], 60));
  for (let i = 0; i < 3; i++) {
    t.storage.reset();
    const answer = await t.ask();
    expect([answer.complete, answer.rows]).toEqual([true, [[60]]]);
    expect(t.cache.bytes).toBeLessThanOrEqual(400);
    expect(t.storage.calls.data).toBeGreaterThan(0);
  }
});

test('deep storage down with a cached listing: answers from the cache, a new listing fails honestly', async () => {
  const t = setup();
  await commit(t.storage, 0);
  t.live(liveAnswer([], 10));
  expect((await t.ask()).complete).toBe(true);
  t.storage.down = true;
  expect((await t.ask()).rows).toEqual([[10]]);
  t.advance(5000);
  const stale = await t.ask();
  expect(stale.complete).toBe(false);
  expect(stale.sources.committed.error).toMatch(/deep storage/);
});

test('a listing past its age resumes from the newest windows; every key is listed again now and then, or after a gap', async () => {
  const storage = new CountingStorage();
  let now = 0;
  const listings: string[] = [];
  const cache = new CommittedViewCache({
    maxBytes: 1 << 20,
    listMaxAgeMs: 5000,
    fullListMaxAgeMs: 60_000,
    relistedWindows: 2,
    now: () => now,
    onListing: (kind) => listings.push(kind),
    onLookup: (kind) => kind === 'record' && (recordLookups += 1),
  });
  let recordLookups = 0;
  // Windows of 2026 (keys of 13 digits sort as their times do), partition 0, 10 offsets each.
  const base = Date.UTC(2026, 0, 1);
  const commitAt = (w: number) =>
    commitSegments(storage, schema, [
      {
        ...windowSegment(w),
        key: base + w * M,
        windowStart: base + w * M,
        windowEnd: base + (w + 1) * M,
      },
    ]);
  const index = (relist = false) =>
    cache.index(storage, { namespace: 'shop', cube: 'orders' }, M, { relist });
  for (let w = 0; w < 5; w++) await commitAt(w);
  expect((await index()).index.handOffs).toBe(5);

  // Window 5 committed; the listing's age runs out: only windows 3 on are listed again, and
  // only the new record is read (merged into the index, not the index made again).
  await commitAt(5);
  now += 5000;
  storage.reset();
  recordLookups = 0;
  const resumed = (await index()).index;
  expect(resumed.handOffs).toBe(6);
  expect(storage.listedAfter.at(-1)).toBe(`window=${base + 3 * M}`);
  expect([storage.calls.record, recordLookups]).toEqual([1, 1]);

  // Nothing new: the same index, no record read.
  now += 5000;
  storage.reset();
  expect((await index()).index).toBe(resumed);
  expect(storage.calls).toMatchObject({ list: 1, record: 0 });

  // A record of a window before those listed again is not seen by a listing that resumes...
  await commitAt(-10);
  now += 5000;
  expect((await index()).index.handOffs).toBe(6);
  // ...but by a listing of every key: once the last is old enough, or when an answer had a gap.
  expect((await index(true)).index.handOffs).toBe(7);
  await commitAt(-20);
  now += 60_000;
  expect((await index()).index.handOffs).toBe(8);
  expect(storage.listedAfter.at(-1)).toBeUndefined();
  expect(listings).toEqual(['full', 'resumed', 'resumed', 'resumed', 'full', 'full']);
});
