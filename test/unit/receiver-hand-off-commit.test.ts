// One committed copy per window and replica set (hand-off-commit.ts): the latest commit record
// names one replica's hand-offs; a new version is written only by a replica covering strictly
// more; a copy overlapping a later epoch's committed copy of another set is refused; two writers
// of one version: exactly one wins. With the hand-off scheduler: two generations handed off in
// one pass are committed together. And the directory store's create-if-absent.
import fc from 'fast-check';
import { Registry } from 'prom-client';
import winston from 'winston';
import { cubeSchema } from '../../src/api/cube.ts';
import { ChannelMetrics } from '../../src/receiver/channel-metrics.ts';
import { FilesystemDeepStorage } from '../../src/receiver/deep-storage-filesystem.ts';
import {
  type CommitRecord,
  commitWindow,
  covers,
  coverageOf,
  decideCommit,
  fenceReplicaSet,
  latestRecords,
  notCommittedMessage,
  windowDir,
} from '../../src/receiver/hand-off-commit.ts';
import type { HandOffTarget } from '../../src/receiver/hand-off.ts';
import { HandOffScheduler } from '../../src/receiver/hand-off-scheduler.ts';
import { createReceiverMetrics } from '../../src/receiver/metrics.ts';
import { SegmentManager } from '../../src/receiver/segments.ts';
import { MemoryDeepStorage } from '../support/memory-deep-storage.ts';
import { scratchDirs } from '../support/scratch-dirs.ts';

const scratch = scratchDirs();

const schema = cubeSchema.parse({
  timestampField: 'ts',
  dimensions: ['country'],
  measures: [{ name: 'events', function: 'count' }],
  window: '1m',
});

const target = (receiver: string, replicaSet = 'rs-a'): HandOffTarget => ({
  namespace: 'a',
  cube: 'orders',
  replicaSet,
  receiver,
  schema,
});

/** A hand-off as a record lists it: partition → [from, to) ranges, one epoch for all. */
function handOff(
  dir: string,
  ranges: Record<number, [number, number][]>,
  epoch = 1,
): CommitRecord['handOffs'][number] {
  return {
    dir,
    offsetRanges: Object.fromEntries(
      Object.entries(ranges).map(([p, list]) => [p, list.map(([f, t]) => [String(f), String(t)])]),
    ),
    epochs: Object.fromEntries(Object.keys(ranges).map((p) => [p, epoch])),
  };
}

async function latest(storage: MemoryDeepStorage, set = 'rs-a'): Promise<CommitRecord | undefined> {
  return (await latestRecords(storage, windowDir(target('x'), 0))).get(set);
}

const commit = (
  storage: MemoryDeepStorage,
  receiver: string,
  mine: CommitRecord['handOffs'],
  set = 'rs-a',
) => commitWindow({ storage, target: target(receiver, set), windowStart: 0, mine });

test('the first copy commits; a sibling covering strictly more replaces it; one covering the same or less does not', async () => {
  const storage = new MemoryDeepStorage();
  expect(await commit(storage, 'r0', [handOff('r0.g0', { 0: [[0, 100]] })])).toEqual({
    kind: 'committed',
    version: 1,
  });
  // r1 cut the window later: its one segment covers what r0's did and more.
  expect(await commit(storage, 'r1', [handOff('r1.g0', { 0: [[0, 150]] })])).toEqual({
    kind: 'committed',
    version: 2,
  });
  // r0's second generation brings it level with r1: nothing to commit.
  expect(
    await commit(storage, 'r0', [
      handOff('r0.g0', { 0: [[0, 100]] }),
      handOff('r0.g1', { 0: [[100, 150]] }),
    ]),
  ).toEqual({ kind: 'covered', by: 'r1', version: 2 });
  const record = (await latest(storage))!;
  expect(record.receiver).toBe('r1');
  expect(record.handOffs.map((h) => h.dir)).toEqual(['r1.g0']);
  expect(record.offsetRanges).toEqual({ '0': [['0', '150']] });
  expect([...storage.objects.keys()].sort()).toEqual([
    'namespace=a/orders/window=0/replicaSet=rs-a/commit.00000001.json',
    'namespace=a/orders/window=0/replicaSet=rs-a/commit.00000002.json',
  ]);
});

test('copies that each hold offsets the other lacks: the committed one stays until one covers the other', async () => {
  const storage = new MemoryDeepStorage();
  await commit(storage, 'r0', [handOff('r0.g0', { 0: [[0, 100]], 1: [[0, 50]] })]);
  expect(await commit(storage, 'r1', [handOff('r1.g0', { 0: [[0, 50]], 1: [[0, 100]] })])).toEqual({
    kind: 'behind',
    by: 'r0',
    version: 1,
    // What r0's record holds: r1's offsets of partition 0 among them are committed all the same.
    offsetRanges: { 0: [['0', '100']], 1: [['0', '50']] },
  });
  expect(
    await commit(storage, 'r1', [
      handOff('r1.g0', { 0: [[0, 50]], 1: [[0, 100]] }),
      handOff('r1.g1', { 0: [[50, 100]] }),
    ]),
  ).toEqual({ kind: 'committed', version: 2 });
  expect((await latest(storage))!.handOffs.map((h) => h.dir)).toEqual(['r1.g0', 'r1.g1']);
});

test("a replica's own earlier record keeps the hand-offs it has purged from memory since", async () => {
  const storage = new MemoryDeepStorage();
  await commit(storage, 'r0', [handOff('r0.g0', { 0: [[0, 100]] })]);
  expect(await commit(storage, 'r0', [handOff('r0.g1', { 0: [[100, 120]] })])).toEqual({
    kind: 'committed',
    version: 2,
  });
  const record = (await latest(storage))!;
  expect(record.handOffs.map((h) => h.dir)).toEqual(['r0.g1', 'r0.g0']);
  expect(record.offsetRanges).toEqual({ '0': [['0', '120']] });
});

test('a copy overlapping what another replica set committed under a later epoch is refused; under an earlier one it commits', async () => {
  const storage = new MemoryDeepStorage();
  // rs-b owns partition 0 from offset 100 under epoch 3.
  await commit(storage, 'b0', [handOff('b0.g0', { 0: [[100, 200]] }, 3)], 'rs-b');
  // r0 of rs-a ran past its stop offset (100) under epoch 2 before it was fenced.
  await expect(commit(storage, 'r0', [handOff('r0.g0', { 0: [[0, 150]] }, 2)])).rejects.toThrow(
    'not committed: this copy is stale: partition 0 offsets [100, 150) under epoch 2 are committed by replica set rs-b (receiver b0) under epoch 3',
  );
  expect(await latest(storage)).toBeUndefined();
  // Its sibling stopped in time.
  expect(await commit(storage, 'r1', [handOff('r1.g0', { 0: [[0, 100]] }, 2)])).toEqual({
    kind: 'committed',
    version: 1,
  });
  // The decision alone: the later epoch is not the stale one.
  expect(
    decideCommit({
      receiver: 'b0',
      mine: [handOff('b0.g0', { 0: [[100, 200]] }, 3)],
      latest: undefined,
      otherSets: [{ ...(await latest(storage))!, offsetRanges: { '0': [['0', '150']] } }],
    }).kind,
  ).toBe('commit');
});

test('two replicas committing at once: each version is written once, and the last covers both', async () => {
  for (let run = 0; run < 20; run++) {
    const storage = new MemoryDeepStorage();
    const outcomes = await Promise.all([
      commit(storage, 'r0', [handOff('r0.g0', { 0: [[0, 100]] })]),
      commit(storage, 'r1', [handOff('r1.g0', { 0: [[0, 150]] })]),
    ]);
    expect(outcomes.filter((o) => o.kind === 'committed').length).toBeGreaterThanOrEqual(1);
    const record = (await latest(storage))!;
    expect(record.receiver).toBe('r1');
    expect(record.offsetRanges).toEqual({ '0': [['0', '150']] });
  }
});

/** The hand-off scheduler of receiver r0 of rs-a, with a manual clock when given. */
function schedulerOf(
  storage: MemoryDeepStorage,
  segments: SegmentManager,
  now?: () => number,
): HandOffScheduler {
  return new HandOffScheduler({
    storage,
    target: target('r0'),
    segments,
    metrics: new ChannelMetrics(createReceiverMetrics(new Registry()), {
      namespace: 'a',
      cube: 'orders',
      topic: 't',
    }),
    logger: winston.createLogger({ silent: true }),
    retentionMs: 60_000,
    lostBefore: () => new Map(),
    onHandedOff: () => undefined,
    ...(now ? { now } : {}),
  });
}

test('the scheduler commits two generations of a window handed off in one pass together', async () => {
  const storage = new MemoryDeepStorage();
  const segments = new SegmentManager(schema);
  const event = { time: 30_000, dimensions: ['de'], values: [1] };
  segments.accept(0, 1, 0n, event);
  segments.seal(segments.segments.get(0)!);
  segments.accept(0, 1, 1n, event);
  const second = [...segments.segments.values()].find((s) => s.state === 'ACTIVE')!;
  segments.seal(second);
  const scheduler = schedulerOf(storage, segments);
  await scheduler.handOffSealed();
  expect([...segments.segments.values()].map((s) => s.state)).toEqual(['HANDED_OFF', 'HANDED_OFF']);
  const record = (await latest(storage))!;
  expect(record.handOffs).toHaveLength(2);
  expect(record.offsetRanges).toEqual({ '0': [['0', '2']] });
  expect(scheduler.report(0)?.commit?.outcome).toBe('committed');
});

test("a copy behind a sibling's record is kept, and of its offsets only those the record holds are reported committed until a record covers it; then retention purges it", async () => {
  const storage = new MemoryDeepStorage();
  const segments = new SegmentManager(schema);
  const event = { time: 30_000, dimensions: ['de'], values: [1] };
  segments.accept(0, 1, 0n, event);
  segments.accept(1, 1, 0n, event);
  segments.seal(segments.segments.get(0)!);
  // The sibling cut the window later on partition 0 and earlier on partition 1.
  await commit(storage, 'r1', [handOff('r1.g0', { 0: [[0, 5]] })]);
  let now = 1_000_000;
  const scheduler = schedulerOf(storage, segments, () => now);
  await scheduler.handOffSealed();
  expect(segments.segments.get(0)!.state).toBe('HANDED_OFF');
  expect(scheduler.report(0)?.commit).toEqual({ outcome: 'behind', by: 'r1', version: 1 });
  const committedCoverage = () =>
    Object.fromEntries(
      [...segments.coverage((s, p, r) => scheduler.committedRange(s.windowStart, p, r))!].map(
        ([p, c]) => [p, c.handedOff.map((r) => [Number(r.from), Number(r.to)])],
      ),
    );
  // Its offset of partition 0 is in the sibling's record: committed, though not by this copy.
  expect(committedCoverage()).toEqual({ 0: [[0, 1]], 1: [] });
  expect(scheduler.expired(Date.now() + 3_600_000)).toEqual([]);

  // The sibling commits the whole window; the next look (10 s on) finds this copy covered.
  await commit(storage, 'r1', [handOff('r1.g0', { 0: [[0, 5]], 1: [[0, 1]] })]);
  now += 5_000;
  await scheduler.handOffSealed();
  expect(scheduler.report(0)?.commit?.outcome).toBe('behind');
  now += 5_000;
  await scheduler.handOffSealed();
  expect(scheduler.report(0)?.commit).toEqual({ outcome: 'covered', by: 'r1', version: 2 });
  expect(committedCoverage()).toEqual({ 0: [[0, 1]], 1: [[0, 1]] });
  expect(scheduler.expired(Date.now() + 3_600_000)).toHaveLength(1);
});

test("a copy behind a sibling's record looks again within a few hundred milliseconds: the sibling's record written just after the first look covers it, without waiting for the recheck", async () => {
  const storage = new MemoryDeepStorage();
  const segments = new SegmentManager(schema);
  const event = { time: 30_000, dimensions: ['de'], values: [1] };
  segments.accept(0, 1, 0n, event);
  segments.accept(1, 1, 0n, event);
  segments.seal(segments.segments.get(0)!);
  await commit(storage, 'r1', [handOff('r1.g0', { 0: [[0, 5]] })]);
  const scheduler = schedulerOf(storage, segments, () => 1_000_000);
  // The sibling commits the whole window 10 ms after this copy's first look (as a sibling
  // releasing at the same stop offsets does); the clock of the recheck stands still.
  const sibling = (async () => {
    await new Promise((resolve) => setTimeout(resolve, 10));
    await commit(storage, 'r1', [handOff('r1.g0', { 0: [[0, 5]], 1: [[0, 1]] })]);
  })();
  await scheduler.handOffSealed();
  await sibling;
  expect(scheduler.report(0)?.commit).toEqual({ outcome: 'covered', by: 'r1', version: 2 });
});

test('in a directory: of two creates of one key exactly one wins; listing gives keys relative to the prefix', async () => {
  const dir = scratch('streamcube-commit-');
  const storage = new FilesystemDeepStorage(dir);
  for (let i = 0; i < 10; i++) {
    const won = await Promise.all([
      storage.createObject(`w/replicaSet=rs-a/commit.${i}.json`, 'one'),
      storage.createObject(`w/replicaSet=rs-a/commit.${i}.json`, 'two'),
    ]);
    expect(won.filter(Boolean)).toHaveLength(1);
  }
  expect(await storage.readObject('w/replicaSet=rs-a/commit.0.json')).toMatch(/^(one|two)$/);
  expect(await storage.readObject('w/replicaSet=rs-a/absent.json')).toBeUndefined();
  expect((await storage.listKeys('w')).sort()).toEqual(
    Array.from({ length: 10 }, (_, i) => `replicaSet=rs-a/commit.${i}.json`).sort(),
  );
  expect(await storage.listKeys('nowhere')).toEqual([]);
});

// Replicas of one set each cut the window into generations at their own offsets, hand them off
// and commit in any order, two at once at times. Whatever the order: the newest record names one
// replica's hand-offs, disjoint; each record covers what the one before did; and once every
// replica has handed off the whole window, the newest record covers all of it.
test('property: one replica per record, records only grow, and the whole window ends committed', async () => {
  const partitions = [0, 1];
  const replica = fc.record({
    // Cut points per partition, one per generation but the last (which ends at the log's end).
    cuts: fc.array(fc.tuple(fc.nat(99), fc.nat(99)), { maxLength: 3 }),
  });
  await fc.assert(
    fc.asyncProperty(
      fc.array(replica, { minLength: 2, maxLength: 3 }),
      fc.array(fc.tuple(fc.nat(2), fc.boolean()), { minLength: 1, maxLength: 20 }),
      fc.tuple(fc.integer({ min: 1, max: 100 }), fc.integer({ min: 1, max: 100 })),
      async (replicas, schedule, ends) => {
        const storage = new MemoryDeepStorage();
        // Each replica's generations: ranges [cut g-1, cut g) per partition, sorted cuts.
        const generations = replicas.map((r, i) => {
          const bounds = partitions.map((p) => [
            0,
            ...r.cuts.map((c) => Math.min(c[p]!, ends[p]! - 1) + 0).sort((a, b) => a - b),
            ends[p]!,
          ]);
          return Array.from({ length: r.cuts.length + 1 }, (_, g) =>
            handOff(
              `r${i}.g${g}`,
              Object.fromEntries(
                partitions.map((p) => [p, [[bounds[p]![g]!, bounds[p]![g + 1]!]]]),
              ) as Record<number, [number, number][]>,
            ),
          );
        });
        const handedOff = replicas.map(() => 0);
        let before: CommitRecord | undefined;
        const step = async (r: number): Promise<void> => {
          if (handedOff[r]! >= generations[r]!.length) return;
          handedOff[r]! += 1;
          await commit(storage, `r${r}`, generations[r]!.slice(0, handedOff[r]));
        };
        const check = async (): Promise<void> => {
          const now = await latest(storage);
          if (!now) return;
          expect(new Set(now.handOffs.map((h) => h.dir.split('.')[0]))).toEqual(
            new Set([now.receiver]),
          );
          const total = now.handOffs.reduce(
            (n, h) =>
              n +
              Object.values(h.offsetRanges)
                .flat()
                .reduce((m, [f, t]) => m + Number(t) - Number(f), 0),
            0,
          );
          const merged = [...coverageOf(now.handOffs).values()]
            .flat()
            .reduce((m, r) => m + Number(r.to - r.from), 0);
          expect(total).toBe(merged);
          if (before)
            expect(covers(coverageOf(now.handOffs), coverageOf(before.handOffs))).toBe(true);
          before = now;
        };
        for (const [r, together] of schedule) {
          const which = r % replicas.length;
          if (together) await Promise.all([step(which), step((which + 1) % replicas.length)]);
          else await step(which);
          await check();
        }
        // Every replica hands off the rest of the window.
        for (let r = 0; r < replicas.length; r++)
          while (handedOff[r]! < generations[r]!.length) {
            await step(r);
            await check();
          }
        const final = coverageOf((await latest(storage))!.handOffs);
        expect(
          Object.fromEntries(
            [...final].map(([p, list]) => [p, list.map((x) => [Number(x.from), Number(x.to)])]),
          ),
        ).toEqual(Object.fromEntries(partitions.map((p) => [p, [[0, ends[p]!]]])));
      },
    ),
    { numRuns: 300 },
  );
});

describe('a failover fence of a lost replica set', () => {
  const storage = () => new MemoryDeepStorage();
  const fence = (s: MemoryDeepStorage, partitions: Record<string, number>, graceMs = 0) =>
    fenceReplicaSet({
      storage: s,
      cube: { namespace: 'a', cube: 'orders' },
      replicaSet: 'rs-a',
      id: 'f-1-abcdef',
      partitions,
      by: 'rs-b-0',
      graceMs,
      sleep: () => Promise.resolve(),
    });

  test('a copy holding a fenced partition under a fenced epoch is never committed; a later epoch is', async () => {
    const s = storage();
    await fence(s, { '0': 1 });
    const at = (epoch: number) =>
      commitWindow({
        storage: s,
        target: target('rs-a-0'),
        windowStart: 0,
        mine: [handOff(`rs-a-0.e${epoch}.x`, { 0: [[0, 10]] }, epoch)],
      });
    expect(await at(1)).toEqual({ kind: 'fenced', by: 'f-1-abcdef', version: 0 });
    expect(await latest(s)).toBeUndefined();
    expect((await at(2)).kind).toBe('committed');
  });

  test('what was committed before the fence stays; a copy covering more after it is not written', async () => {
    const s = storage();
    const commit = (receiver: string, to: number) =>
      commitWindow({
        storage: s,
        target: target(receiver),
        windowStart: 0,
        mine: [handOff(`${receiver}.e1.x`, { 0: [[0, to]], 1: [[0, 5]] })],
      });
    expect((await commit('rs-a-0', 10)).kind).toBe('committed');
    await fence(s, { '0': 1, '1': 1 });
    expect((await commit('rs-a-1', 20)).kind).toBe('fenced');
    // Covered by the record: no write needed, and none made (version 2 is the fence's copy of 1).
    expect((await commit('rs-a-1', 8)).kind).toBe('covered');
    expect(await latest(s)).toMatchObject({ version: 2, receiver: 'rs-a-0', fence: 'f-1-abcdef' });
  });

  test('a copy whose fenced offsets the record holds already commits what it adds under a later epoch', async () => {
    const s = storage();
    await commitWindow({
      storage: s,
      target: target('rs-a-1'),
      windowStart: 0,
      mine: [handOff('rs-a-1.e1.x', { 0: [[0, 10]] })],
    });
    await fence(s, { '0': 1 });
    // rs-a-0's own copy of [0, 10) under the fenced epoch, and a partition it took back since.
    const outcome = await commitWindow({
      storage: s,
      target: target('rs-a-0'),
      windowStart: 0,
      mine: [
        handOff('rs-a-0.e1.x', { 0: [[0, 10]] }),
        handOff('rs-a-0.e3.x', { 3: [[50, 60]] }, 3),
      ],
    });
    // Version 2 is the fence's copy of version 1.
    expect(outcome).toEqual({ kind: 'committed', version: 3 });
    // One offset of the fenced epoch past the record: refused, whatever else it adds.
    const past = await commitWindow({
      storage: s,
      target: target('rs-a-1'),
      windowStart: 0,
      mine: [
        handOff('rs-a-1.e1.y', { 0: [[0, 11]] }),
        handOff('rs-a-1.e3.x', { 3: [[50, 70]] }, 3),
      ],
    });
    expect(past.kind).toBe('fenced');
  });

  test('the fence answers what the set committed of the fenced partitions, over every window', async () => {
    const s = storage();
    const windows: [number, Record<number, [number, number][]>][] = [
      [0, { 0: [[0, 80]], 2: [[0, 7]] }],
      [60_000, { 0: [[90, 95]] }],
    ];
    for (const [windowStart, ranges] of windows)
      await commitWindow({
        storage: s,
        target: target('rs-a-0'),
        windowStart,
        mine: [handOff(`rs-a-0.e1.w${windowStart}`, ranges)],
      });
    // Another set's records are not the lost set's.
    await commitWindow({
      storage: s,
      target: target('rs-b-0', 'rs-b'),
      windowStart: 0,
      mine: [handOff('rs-b-0.e2.x', { 0: [[80, 90]] }, 2)],
    });
    const answer = await fence(s, { '0': 1 });
    expect(answer.records).toBe(2);
    expect([...answer.committed]).toEqual([
      [
        0,
        [
          { from: 0n, to: 80n },
          { from: 90n, to: 95n },
        ],
      ],
    ]);
    // Written once: the same failover again finds its fence.
    await fence(s, { '0': 1 });
    expect((await s.listKeys('namespace=a/orders/fences')).length).toBe(1);
  });

  /** A store where the first create of a commit record of rs-a first lets `before` run. */
  class StallingStorage extends MemoryDeepStorage {
    before: (() => Promise<unknown>) | undefined;
    override async createObject(key: string, body: string): Promise<boolean> {
      const run = /replicaSet=rs-a\/commit\./.test(key) ? this.before : undefined;
      this.before = undefined;
      if (run) await run();
      return super.createObject(key, body);
    }
  }
  const handedOff = (s: MemoryDeepStorage, dir: string): void => {
    s.objects.set(`namespace=a/orders/window=0/replicaSet=rs-a/${dir}/manifest.json`, '{}');
  };

  test('a commit stalled past the grace between its fence check and its record lands nothing: the fence took its version first', async () => {
    const s = new StallingStorage();
    handedOff(s, 'rs-a-0.e1.x');
    let answer: Awaited<ReturnType<typeof fence>> | undefined;
    // rs-a-0 read no fence and no record, then froze before creating version 1; meanwhile the
    // failover fenced rs-a and read what it had committed: nothing.
    s.before = async () => {
      answer = await fence(s, { '0': 1 });
    };
    const outcome = await commitWindow({
      storage: s,
      target: target('rs-a-0'),
      windowStart: 0,
      mine: [handOff('rs-a-0.e1.x', { 0: [[0, 10]] })],
      now: () => 0, // the freeze came after its check of the fences' age
    });
    expect([...answer!.committed]).toEqual([]);
    expect(answer!.records).toBe(0);
    // Version 1 was the fence's (empty): the commit read the fences again and was refused.
    expect(outcome).toEqual({ kind: 'fenced', by: 'f-1-abcdef', version: 1 });
    const record = await latest(s);
    expect(record).toMatchObject({ version: 1, fence: 'f-1-abcdef', handOffs: [] });
    expect(record?.offsetRanges).toEqual({});
  });

  test('a commit whose reads always take longer than the fences may be old creates nothing and says so', async () => {
    const s = new MemoryDeepStorage();
    handedOff(s, 'rs-a-0.e1.x');
    let t = 0;
    const slow = commitWindow({
      storage: s,
      target: target('rs-a-0'),
      windowStart: 0,
      mine: [handOff('rs-a-0.e1.x', { 0: [[0, 10]] })],
      // Each look at the clock is 1.5 s later: the record is ready 3 s after the fences' read.
      now: () => (t += 1_500),
    });
    await expect(slow).rejects.toThrow(
      'not committed after 8 attempts: 8 took over 2000 ms to read the fences and records (deep storage slow to answer), so the fences had to be read again',
    );
    expect(await latest(s)).toBeUndefined();
    expect(notCommittedMessage(3, 5)).toBe(
      'not committed after 8 attempts: 3 found a newer commit record of the window written meanwhile; 5 took over 2000 ms to read the fences and records (deep storage slow to answer), so the fences had to be read again',
    );
  });

  test('a commit that lands before the fence reads is counted as committed, and the barrier copies it once', async () => {
    const s = new StallingStorage();
    handedOff(s, 'rs-a-0.e1.x');
    const outcome = await commitWindow({
      storage: s,
      target: target('rs-a-0'),
      windowStart: 0,
      mine: [handOff('rs-a-0.e1.x', { 0: [[0, 10]] })],
    });
    expect(outcome).toEqual({ kind: 'committed', version: 1 });
    const answer = await fence(s, { '0': 1 });
    expect([...answer.committed]).toEqual([[0, [{ from: 0n, to: 10n }]]]);
    expect(answer.records).toBe(1);
    const barrier = await latest(s);
    expect(barrier).toMatchObject({ version: 2, receiver: 'rs-a-0', fence: 'f-1-abcdef' });
    expect(barrier?.handOffs).toEqual([handOff('rs-a-0.e1.x', { 0: [[0, 10]] })]);
    // The same failover again takes no further version; rs-a-0's copy is still its own.
    await fence(s, { '0': 1 });
    expect((await latest(s))?.version).toBe(2);
    expect(
      await commitWindow({
        storage: s,
        target: target('rs-a-0'),
        windowStart: 0,
        mine: [handOff('rs-a-0.e1.x', { 0: [[0, 10]] })],
      }),
    ).toEqual({ kind: 'committed', version: 2 });
  });
});

describe("a move's stop fence of a source set, from the stop offsets on", () => {
  const fence = (s: MemoryDeepStorage, from: Record<string, string>, id = 'r-1-abcdef-stop') =>
    fenceReplicaSet({
      storage: s,
      cube: { namespace: 'a', cube: 'orders' },
      replicaSet: 'rs-a',
      id,
      partitions: Object.fromEntries(Object.keys(from).map((p) => [p, 1])),
      from,
      by: 'rs-b-0',
      graceMs: 0,
      sleep: () => Promise.resolve(),
    });
  const commitAs = (
    s: MemoryDeepStorage,
    receiver: string,
    ranges: Record<number, [number, number][]>,
    epoch = 1,
  ) =>
    commitWindow({
      storage: s,
      target: target(receiver),
      windowStart: 0,
      mine: [handOff(`${receiver}.e${epoch}.x`, ranges, epoch)],
    });

  test('the record says where the fence begins', async () => {
    const s = new MemoryDeepStorage();
    await fence(s, { '1': '40' });
    const keys = await s.listKeys('namespace=a/orders/fences/replicaSet=rs-a');
    expect(keys).toEqual(['r-1-abcdef-stop.json']);
    const record = JSON.parse(
      (await s.readObject(`namespace=a/orders/fences/replicaSet=rs-a/${keys[0]}`))!,
    ) as { from: Record<string, string>; partitions: Record<string, number> };
    expect(record).toMatchObject({ partitions: { '1': 1 }, from: { '1': '40' } });
  });

  test.each([
    {
      name: 'short of the stop: the set’s own data, committed',
      ranges: { 1: [[0, 40]] },
      epoch: 1,
      kind: 'committed',
    },
    {
      name: 'one offset past the stop under the fenced epoch: refused',
      ranges: { 1: [[0, 41]] },
      epoch: 1,
      kind: 'fenced',
    },
    { name: 'wholly past the stop: refused', ranges: { 1: [[45, 50]] }, epoch: 1, kind: 'fenced' },
    {
      name: 'past the stop under a later epoch (the partition moved back): committed',
      ranges: { 1: [[45, 50]] },
      epoch: 2,
      kind: 'committed',
    },
    {
      name: 'another partition past the offset: not fenced',
      ranges: { 0: [[0, 90]] },
      epoch: 1,
      kind: 'committed',
    },
  ] as { name: string; ranges: Record<number, [number, number][]>; epoch: number; kind: string }[])(
    'a copy $name',
    async ({ ranges, epoch, kind }) => {
      const s = new MemoryDeepStorage();
      await fence(s, { '1': '40' });
      expect((await commitAs(s, 'rs-a-1', ranges, epoch)).kind).toBe(kind);
    },
  );

  test('what the set committed past the stop before the fence stays committed, and the fence answers it', async () => {
    const s = new MemoryDeepStorage();
    expect((await commitAs(s, 'rs-a-1', { 0: [[0, 10]], 1: [[0, 48]] })).kind).toBe('committed');
    const { committed } = await fence(s, { '1': '40' });
    expect(committed.get(1)).toEqual([{ from: 0n, to: 48n }]);
    // Covered by the record, so not refused; more past the stop is.
    expect((await commitAs(s, 'rs-a-0', { 0: [[0, 10]], 1: [[0, 40]] })).kind).toBe('covered');
    expect((await commitAs(s, 'rs-a-1', { 0: [[0, 12]], 1: [[0, 48]] })).kind).toBe('committed');
    expect((await commitAs(s, 'rs-a-1', { 0: [[0, 12]], 1: [[0, 50]] })).kind).toBe('fenced');
  });

  test("a failover's fence of the same partition still fences every offset of its epochs", async () => {
    const s = new MemoryDeepStorage();
    await fence(s, { '1': '40' });
    await fenceReplicaSet({
      storage: s,
      cube: { namespace: 'a', cube: 'orders' },
      replicaSet: 'rs-a',
      id: 'f-2-abcdef',
      partitions: { '1': 1 },
      by: 'rs-b-0',
      graceMs: 0,
      sleep: () => Promise.resolve(),
    });
    expect(await commitAs(s, 'rs-a-1', { 1: [[0, 10]] })).toEqual({
      kind: 'fenced',
      by: 'f-2-abcdef',
      version: 0,
    });
  });
});

describe('records that are not what their writer writes are refused, naming the key and the field', () => {
  const dir = windowDir(target('x'), 0);
  const record = (over: Record<string, unknown>) =>
    JSON.stringify({
      version: 1,
      receiver: 'rs-a-0',
      replicaSet: 'rs-a',
      windowStart: new Date(0).toISOString(),
      handOffs: [handOff('rs-a-0.e1.x', { 0: [[0, 10]] })],
      offsetRanges: { '0': [['0', '10']] },
      committedAt: new Date(0).toISOString(),
      ...over,
    });

  test.each([
    ['not JSON', '{"version": 1,', /not JSON/],
    ['no offsets', record({ offsetRanges: undefined }), /offsetRanges/],
    [
      'an offset as a number',
      record({ offsetRanges: { '0': [[0, 10]] } }),
      /offsetRanges\.0\.0\.0/,
    ],
    ['a negative offset', record({ offsetRanges: { '0': [['-1', '10']] } }), /offsetRanges/],
    ['a partition key that is no number', record({ offsetRanges: { x: [] } }), /offsetRanges/],
    ['hand-offs not a list', record({ handOffs: {} }), /handOffs/],
    [
      'an epoch below 0',
      record({ handOffs: [{ ...handOff('d', { 0: [[0, 1]] }), epochs: { '0': -1 } }] }),
      /handOffs\.0\.epochs/,
    ],
  ])('a commit record with %s', async (_name, text, field) => {
    const s = new MemoryDeepStorage();
    await s.createObject(`${dir}/replicaSet=rs-a/commit.00000001.json`, text);
    const read = latestRecords(s, dir);
    await expect(read).rejects.toThrow(/deep storage record .*commit\.00000001\.json is not valid/);
    await expect(read).rejects.toThrow(field);
    // And a commit of the window stops on it instead of writing over what it cannot read.
    await expect(commit(s, 'rs-a-1', [handOff('rs-a-1.e1.y', { 0: [[0, 20]] })])).rejects.toThrow(
      /is not valid/,
    );
  });

  test('a fence record without its partitions stops a commit of the set: a fence unread is never skipped', async () => {
    const s = new MemoryDeepStorage();
    await s.createObject(
      'namespace=a/orders/fences/replicaSet=rs-a/f-1-abcdef.json',
      JSON.stringify({ id: 'f-1-abcdef', replicaSet: 'rs-a', by: 'rs-b-0', fencedAt: '' }),
    );
    await expect(commit(s, 'rs-a-0', [handOff('rs-a-0.e1.x', { 0: [[0, 10]] })])).rejects.toThrow(
      /fences\/replicaSet=rs-a\/f-1-abcdef\.json is not valid: partitions/,
    );
    expect(await s.listKeys(dir)).toEqual([]);
  });

  test('a record with a field a newer writer added is read, the field kept', async () => {
    const s = new MemoryDeepStorage();
    await s.createObject(`${dir}/replicaSet=rs-a/commit.00000001.json`, record({ extra: 'x' }));
    expect((await latest(s))?.offsetRanges).toEqual({ '0': [['0', '10']] });
  });
});

describe('offsets read again after an offset reset backward', () => {
  const committed: CommitRecord = {
    receiver: 'r1',
    replicaSet: 'rs-a',
    handOffs: [handOff('r1.g0', { 0: [[0, 100]] }, 1)],
    offsetRanges: { '0': [['0', '100']] },
  } as unknown as CommitRecord;

  test.each([
    // [name, receiver, its hand-offs, decision, the dirs it commits]
    [
      "the committing replica's replay: committed beside its first copy",
      'r1',
      [handOff('r1.g1', { 0: [[40, 90]] }, 2)],
      'commit',
      ['r1.g0', 'r1.g1'],
    ],
    [
      "a sibling's replay with its own first copy: its whole copy replaces the record",
      'r0',
      [handOff('r0.g0', { 0: [[0, 100]] }, 1), handOff('r0.g1', { 0: [[40, 130]] }, 2)],
      'commit',
      ['r0.g0', 'r0.g1'],
    ],
    [
      "a sibling's replay without its first copy: behind (one replica's copy per record)",
      'r0',
      [handOff('r0.g1', { 0: [[40, 90]] }, 2)],
      'behind',
      [],
    ],
    [
      'a sibling copy of the same epoch: covered',
      'r0',
      [handOff('r0.g0', { 0: [[0, 100]] }, 1)],
      'covered',
      [],
    ],
    [
      'a copy of an older epoch: covered',
      'r0',
      [handOff('r0.g0', { 0: [[0, 50]] }, 0)],
      'covered',
      [],
    ],
  ] as const)('%s', (_name, receiver, mine, kind, dirs) => {
    const decision = decideCommit({ receiver, mine: [...mine], latest: committed, otherSets: [] });
    expect(decision.kind).toBe(kind);
    if (decision.kind === 'commit')
      expect(decision.handOffs.map((h) => h.dir).sort()).toEqual(dirs);
  });

  test('once the record lists the replay, the same copy is covered', () => {
    const replayed = {
      ...committed,
      handOffs: [...committed.handOffs, handOff('r0.g1', { 0: [[40, 90]] }, 2)],
    };
    expect(
      decideCommit({
        receiver: 'r0',
        mine: [handOff('r0.g1', { 0: [[40, 90]] }, 2)],
        latest: replayed,
        otherSets: [],
      }).kind,
    ).toBe('covered');
  });
});

describe('a cube deleted and made again under the same name: records and fences of another uid', () => {
  const old = 'uid-old';
  const now = 'uid-new';
  const of = (cubeUid: string | undefined, receiver = 'r0', set = 'rs-a'): HandOffTarget => ({
    ...target(receiver, set),
    ...(cubeUid === undefined ? {} : { cubeUid }),
  });
  const commitAs = (
    s: MemoryDeepStorage,
    cubeUid: string | undefined,
    mine: CommitRecord['handOffs'],
    receiver = 'r0',
    set = 'rs-a',
  ) => commitWindow({ storage: s, target: of(cubeUid, receiver, set), windowStart: 0, mine });
  const record = (over: Partial<CommitRecord>): CommitRecord => ({
    version: 1,
    receiver: 'r0',
    replicaSet: 'rs-a',
    windowStart: new Date(0).toISOString(),
    handOffs: [handOff('r0.g0', { 0: [[0, 100]] })],
    offsetRanges: { '0': [['0', '100']] },
    committedAt: new Date(0).toISOString(),
    ...over,
  });

  test.each([
    // The old cube's record covers the new cube's copy: judged by uid-less rules, 'covered'.
    ['covers', record({ cubeUid: old, receiver: 'r1' }), [handOff('r0.g1', { 0: [[0, 50]] })]],
    // The old cube's record (a sibling's) holds offsets the new copy lacks: 'behind' it for good.
    [
      'holds more than',
      record({ cubeUid: old, receiver: 'r1' }),
      [handOff('r0.g1', { 0: [[100, 150]] })],
    ],
    // Written by a receiver of the same name: its hand-offs would be taken as this one's own.
    [
      'is of the same receiver name as',
      record({ cubeUid: old }),
      [handOff('r0.g1', { 0: [[100, 150]] })],
    ],
  ])(
    "another cube's latest record that %s this copy is none of this cube's: the copy commits alone",
    (_, latest, mine) => {
      const alone = { kind: 'commit', handOffs: mine };
      expect(decideCommit({ receiver: 'r0', mine, latest, otherSets: [], cubeUid: now })).toEqual(
        alone,
      );
      // Not knowing its own uid, or the record not saying one: judged as before.
      expect(decideCommit({ receiver: 'r0', mine, latest, otherSets: [] })).not.toEqual(alone);
      expect(
        decideCommit({
          receiver: 'r0',
          mine,
          latest: { ...latest, cubeUid: undefined },
          otherSets: [],
          cubeUid: now,
        }),
      ).not.toEqual(alone);
    },
  );

  test("another cube's record of another set under a later epoch does not make this copy stale", () => {
    const other = record({
      replicaSet: 'rs-b',
      receiver: 'b0',
      handOffs: [handOff('b0.g0', { 0: [[0, 100]] }, 3)],
      cubeUid: old,
    });
    const mine = [handOff('r0.g0', { 0: [[0, 100]] }, 1)];
    const decide = (cubeUid: string | undefined, others: CommitRecord[]) =>
      decideCommit({ receiver: 'r0', mine, latest: undefined, otherSets: others, cubeUid }).kind;
    expect(decide(now, [other])).toBe('commit');
    expect(decide(undefined, [other])).toBe('stale');
    expect(decide(now, [{ ...other, cubeUid: now }])).toBe('stale');
  });

  test("another cube's fence does not fence this cube's epochs; its own and one without a uid do", () => {
    const mine = [handOff('r0.g0', { 0: [[0, 10]] }, 1)];
    const fences = (cubeUid?: string) =>
      new Map([[0, [{ epoch: 1, id: 'f-1-x', ...(cubeUid ? { cubeUid } : {}) }]]]);
    const decide = (f: ReturnType<typeof fences>) =>
      decideCommit({
        receiver: 'r0',
        mine,
        latest: undefined,
        otherSets: [],
        fences: f,
        cubeUid: now,
      });
    expect(decide(fences(old))).toEqual({ kind: 'commit', handOffs: mine });
    expect(decide(fences(now))).toEqual({ kind: 'fenced', by: 'f-1-x' });
    expect(decide(fences())).toEqual({ kind: 'fenced', by: 'f-1-x' });
  });

  test("in deep storage: the new cube commits past the old cube's versions, writes its uid, and the old fence does not hold it", async () => {
    const s = new MemoryDeepStorage();
    expect(await commitAs(s, old, [handOff('r0.e1.a', { 0: [[0, 100]] })])).toEqual({
      kind: 'committed',
      version: 1,
    });
    await fenceReplicaSet({
      storage: s,
      cube: { namespace: 'a', cube: 'orders' },
      replicaSet: 'rs-a',
      id: 'f-1-abcdef',
      partitions: { '0': 1 },
      by: 'rs-b-0',
      graceMs: 0,
      cubeUid: old,
      sleep: () => Promise.resolve(),
    });
    // The old cube's fence barrier is version 2, the old cube's record copied.
    expect(await latest(s)).toMatchObject({ version: 2, cubeUid: old, fence: 'f-1-abcdef' });
    // The new cube reads the same offsets under the same epoch on the same receiver name.
    expect(await commitAs(s, now, [handOff('r0.e1.b', { 0: [[0, 100]] })])).toEqual({
      kind: 'committed',
      version: 3,
    });
    expect(await latest(s)).toMatchObject({
      version: 3,
      cubeUid: now,
      handOffs: [{ dir: 'r0.e1.b' }],
    });
    // Its sibling's copy is covered by the new cube's record, not by the old one's.
    expect(await commitAs(s, now, [handOff('r1.e1.b', { 0: [[0, 100]] })], 'r1')).toEqual({
      kind: 'covered',
      by: 'r0',
      version: 3,
    });
  });

  test("a fence of the new cube over a window holding only the old cube's record takes an empty barrier of its own", async () => {
    const s = new MemoryDeepStorage();
    await commitAs(s, old, [handOff('r0.e1.a', { 0: [[0, 100]] })]);
    const answer = await fenceReplicaSet({
      storage: s,
      cube: { namespace: 'a', cube: 'orders' },
      replicaSet: 'rs-a',
      id: 'f-1-abcdef',
      partitions: { '0': 1 },
      by: 'rs-b-0',
      graceMs: 0,
      cubeUid: now,
      sleep: () => Promise.resolve(),
    });
    // What the old cube committed is not what the new cube's set committed.
    expect(answer).toEqual({ committed: new Map(), records: 0 });
    expect(await latest(s)).toMatchObject({ version: 2, cubeUid: now, handOffs: [] });
    expect(
      JSON.parse(
        (await s.readObject('namespace=a/orders/fences/replicaSet=rs-a/f-1-abcdef.json'))!,
      ),
    ).toMatchObject({ cubeUid: now });
  });
});
