// A cube deleted and made again under the same name, told apart by its uid (issue 27): the
// committed view of the new cube is the newest record OF THIS CUBE per window and replica set —
// another cube's record, older or newer, never counts and never hides this cube's — and the
// listing cache keeps one listing per uid.
import { CommittedViewCache } from '../../src/query/committed-cache.ts';
import { CommittedIndex } from '../../src/query/committed-index.ts';
import { readCommittedView } from '../../src/query/committed-view.ts';
import { type HandOffTarget, handOffSegment } from '../../src/receiver/hand-off.ts';
import { commitWindow, recordedHandOff } from '../../src/receiver/hand-off-commit.ts';
import type { Segment } from '../../src/receiver/segments.ts';
import { MemoryDeepStorage } from '../support/memory-deep-storage.ts';
import { schemaOf } from '../support/schemas.ts';

const H = 3_600_000;
const w0 = Date.UTC(2026, 0, 1, 10);
const schema = schemaOf(['country'], { events: 'count' }, { window: '1h' });
const oldUid = '0b7c1f6e-old';
const newUid = '5d2e9a40-new';

const target = (cubeUid: string | undefined): HandOffTarget => ({
  namespace: 'shop',
  cube: 'orders',
  ...(cubeUid === undefined ? {} : { cubeUid }),
  replicaSet: 'rs-a',
  receiver: 'rs-a-0',
  schema,
});

const segment = (windowStart: number, from: bigint, to: bigint, events: number): Segment => ({
  key: windowStart,
  windowStart,
  windowEnd: windowStart + H,
  state: 'IMMUTABLE',
  rows: new Map([['de', { dimensions: ['de'], values: [events] }]]),
  delta: new Map(),
  ranges: new Map([[0, [{ from, to }]]]),
  epochs: new Map([[0, 1]]),
});

async function handOffAndCommit(
  storage: MemoryDeepStorage,
  cubeUid: string | undefined,
  s: Segment,
): Promise<number> {
  const t = target(cubeUid);
  await handOffSegment(storage, t, s);
  const outcome = await commitWindow({
    storage,
    target: t,
    windowStart: s.windowStart,
    mine: [recordedHandOff(t, s)],
  });
  expect(outcome.kind).toBe('committed');
  return (outcome as { version: number }).version;
}

/**
 * The old cube read offsets [0, 10) of window 0 and [10, 20) of window 1, from `earliest`; the
 * new cube of the same name reads [0, 10) of window 0 again, from `earliest` too — then a late
 * commit of the old cube lands in window 0 after the new cube's.
 */
async function twoCubes(): Promise<MemoryDeepStorage> {
  const storage = new MemoryDeepStorage();
  expect(await handOffAndCommit(storage, oldUid, segment(w0, 0n, 10n, 10))).toBe(1);
  expect(await handOffAndCommit(storage, oldUid, segment(w0 + H, 10n, 20n, 10))).toBe(1);
  expect(await handOffAndCommit(storage, newUid, segment(w0, 0n, 10n, 10))).toBe(2);
  expect(await handOffAndCommit(storage, oldUid, segment(w0, 0n, 12n, 12))).toBe(3);
  return storage;
}

test("the new cube's view: its own newest record of each window; a window of the old cube's only is the other cube's", async () => {
  const storage = await twoCubes();
  const view = await readCommittedView(storage, { namespace: 'shop', cube: 'orders', uid: newUid });
  expect(
    view.map((w) => ({
      windowStart: w.windowStart,
      version: w.record.version,
      cubeUid: w.record.cubeUid,
      otherCube: w.otherCube ?? false,
    })),
  ).toEqual([
    // The old cube's newer version 3 does not hide the new cube's version 2.
    { windowStart: w0, version: 2, cubeUid: newUid, otherCube: false },
    { windowStart: w0 + H, version: 1, cubeUid: oldUid, otherCube: true },
  ]);
  // The two cubes' hand-offs of the same offsets, epoch and receiver are two directories.
  expect(view[0]!.handOffKeys[0]).not.toBe(
    (await readCommittedView(storage, { namespace: 'shop', cube: 'orders', uid: oldUid }))[0]!
      .handOffKeys[0],
  );

  const index = new CommittedIndex(view, H);
  expect({
    windows: index.windows,
    handOffs: index.handOffs,
    otherCube: index.otherCube,
    predating: index.predating,
    coverage: index.count.coverage,
  }).toEqual({
    windows: 1,
    handOffs: 1,
    otherCube: 1,
    predating: 0,
    coverage: new Map([[0, [{ from: 0n, to: 10n }]]]),
  });
});

test('without a uid (a cube whose uid is not known) the newest record of each window is read, as before', async () => {
  const storage = await twoCubes();
  const view = await readCommittedView(storage, { namespace: 'shop', cube: 'orders' });
  expect(view.map((w) => [w.record.version, w.otherCube ?? false])).toEqual([
    [3, false],
    [1, false],
  ]);
});

test("records without a uid are judged by where the cube began (predatesTheCube), not as another cube's", async () => {
  const storage = new MemoryDeepStorage();
  await handOffAndCommit(storage, undefined, segment(w0, 0n, 10n, 10));
  const view = await readCommittedView(storage, { namespace: 'shop', cube: 'orders', uid: newUid });
  expect(view.map((w) => [w.record.version, w.otherCube ?? false])).toEqual([[1, false]]);
  const began = new Map([[0, 10n]]);
  const index = new CommittedIndex(view, H, undefined, undefined, began);
  expect([index.handOffs, index.predating, index.otherCube]).toEqual([0, 1, 0]);
});

test("the cache keeps a listing per uid: the new cube's answer is never the old cube's listing", async () => {
  const storage = await twoCubes();
  const cache = new CommittedViewCache({ maxBytes: 1 << 20, listMaxAgeMs: 60_000 });
  const cube = { namespace: 'shop', cube: 'orders' };
  const old = await cache.index(storage, { ...cube, uid: oldUid }, H, { relist: false });
  const now = await cache.index(storage, { ...cube, uid: newUid }, H, { relist: false });
  expect([old.cached, now.cached]).toEqual([false, false]);
  expect([old.index.handOffs, old.index.otherCube]).toEqual([2, 0]);
  expect([now.index.handOffs, now.index.otherCube]).toEqual([1, 1]);
  expect((await cache.index(storage, { ...cube, uid: newUid }, H, { relist: false })).cached).toBe(
    true,
  );
});
