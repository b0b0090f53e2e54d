// A cube deleted and made again under the same name (issue 27), told apart by its uid: the first
// cube reads a topic from `earliest` and is deleted (its finalizer hands off and commits every
// window); a cube of the same name, with one more dimension, reads the same topic from `earliest`
// again, and more events past it. The new cube's receivers commit every window themselves, past
// the first cube's record versions, into hand-offs of their own; the query service counts every
// event exactly once, from the new cube's records only, and says the answer is complete.
import { readFileSync, statSync } from 'node:fs';
import { readCommittedView, readHandOffManifest } from '../../src/query/committed-view.ts';
import { FilesystemDeepStorage } from '../../src/receiver/deep-storage-filesystem.ts';
import { commitRecordName } from '../../src/receiver/hand-off-commit.ts';
import { type OffsetRange, addRange, rangesFromJson } from '../../src/receiver/offset-ranges.ts';
import {
  type TestEvent,
  createTopic,
  highWatermarks,
  produceEach,
  windowedSchema,
} from '../support/events.ts';
import { cubeApi, waitForCubeGone } from '../support/cluster.ts';
import { useOperatorStack } from '../support/operator-stack.ts';
import { QueryServerProcess } from '../support/query-server-process.ts';
import { waitForPositions } from '../support/receiver-checks.ts';
import { waitFor } from '../support/wait.ts';

const stack = useOperatorStack({
  name: 'cube-again',
  replicaSets: ['rs-a'],
  replicas: 2,
  // Idle partitions seal their windows soon: every window is handed off and committed.
  receiver: { idleTimeout: '2s', flushInterval: '1s' },
});
const cube = 'orders';
const partitions = [0, 1];
const server = new QueryServerProcess(stack);

afterAll(() => server.stop());

/** The first cube groups by country alone; the one made again by country and device. */
const firstSchema = { ...windowedSchema, dimensions: ['country'] };

/** Byte length of each receiver's log now: lines after it are the new cube's. */
const logMarks = () => stack.replicas['rs-a']!.map((r) => statSync(r.logFile).size);

interface HandedOff {
  cube?: string;
  message?: string;
  windowStart?: number;
  commit?: string;
  commitVersion?: number;
}

/** "segment handed off" lines of the cube written to each receiver's log since `marks`. */
function handedOffSince(marks: number[]): HandedOff[] {
  return stack.replicas['rs-a']!.flatMap((r, i) =>
    readFileSync(r.logFile)
      .subarray(marks[i])
      .toString('utf8')
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as HandedOff)
      .filter((l) => l.message === 'segment handed off' && l.cube === cube),
  );
}

/** Whether `ranges` (merged) hold every offset of [0, end). */
const holdsAll = (ranges: OffsetRange[] | undefined, end: bigint): boolean =>
  end === 0n || (ranges ?? []).some((r) => r.from === 0n && r.to >= end);

test('a cube made again under the same name commits its own windows, and its answer counts every event once', async () => {
  const storage = new FilesystemDeepStorage(stack.deepStorageDir);
  const topic = await createTopic(stack.admin, partitions.length);
  const t0 = Date.UTC(2026, 2, 1, 10);
  // Two 1-minute windows of each partition, read by both cubes.
  const first = (await produceEach(stack.producer, topic, partitions, 30, t0, 4_000)).flat();

  await stack.createCube(cube, topic, { replicaSets: ['rs-a'], schema: firstSchema });
  const old = await stack.waitForSettled(cube);
  const oldUid = old.metadata.uid!;
  const read = Object.fromEntries(await highWatermarks(stack.kafka, topic));
  for (const r of stack.replicas['rs-a']!)
    await waitForPositions(r.client.inNamespace(stack.namespace), cube, read);
  // Deleting it hands off and commits every window of every receiver before the object goes.
  await cubeApi(stack.kc).delete(stack.namespace, cube);
  await waitForCubeGone(stack.kc, stack.namespace, cube, 60_000);
  const oldView = await readCommittedView(storage, { namespace: stack.namespace, cube });
  expect(oldView.length).toBeGreaterThan(0);
  expect(oldView.every((w) => w.record.cubeUid === oldUid)).toBe(true);

  // More events in two later windows: read by the new cube only.
  const later = (
    await produceEach(stack.producer, topic, partitions, 30, t0 + 600_000, 4_000, 1)
  ).flat();
  const events: TestEvent[] = [...first, ...later];
  const hw = await highWatermarks(stack.kafka, topic);
  const marks = logMarks();
  await stack.createCube(cube, topic, { replicaSets: ['rs-a'], schema: windowedSchema });
  const made = await stack.waitForSettled(cube);
  const newUid = made.metadata.uid!;
  expect(newUid).not.toBe(oldUid);
  await server.start();

  // Every window of the new cube committed by it: its newest record of each window (another
  // cube's never hides it) says its uid, and they cover every offset of the topic.
  const where = { namespace: stack.namespace, cube, uid: newUid };
  await waitFor(
    'the new cube to commit every offset',
    async () => {
      const view = await readCommittedView(storage, where);
      const covered = new Map<number, OffsetRange[]>();
      for (const w of view)
        if (!w.otherCube)
          for (const [p, list] of Object.entries(w.record.offsetRanges)) {
            const acc = covered.get(Number(p)) ?? [];
            for (const r of rangesFromJson(list)) addRange(acc, r.from, r.to);
            covered.set(Number(p), acc);
          }
      return [...hw].every(([p, end]) => holdsAll(covered.get(p), end));
    },
    45_000,
    500,
  );
  const view = await readCommittedView(storage, where);
  expect(view.filter((w) => w.otherCube)).toEqual([]);
  for (const w of view) {
    expect(w.record.cubeUid).toBe(newUid);
    // Its hand-offs are its own, not the first cube's of the same offsets and epochs.
    for (const key of w.handOffKeys)
      expect((await readHandOffManifest(storage, key)).cubeUid).toBe(newUid);
  }
  // The windows both cubes read: the new cube's records come past the first cube's versions.
  const again = view.filter((w) => oldView.some((o) => o.dir === w.dir));
  expect(again.length).toBe(oldView.length);
  for (const w of again)
    expect(w.record.version).toBeGreaterThan(oldView.find((o) => o.dir === w.dir)!.record.version);

  // Each receiver's commit of each window: its own copy committed, or covered by its sibling's
  // record of this cube — never by the first cube's.
  const outcomes = handedOffSince(marks);
  expect(outcomes.length).toBeGreaterThan(0);
  for (const o of outcomes) {
    expect(['committed', 'covered']).toContain(o.commit);
    const w = view.find((v) => v.windowStart === o.windowStart)!;
    const text = await storage.readObject(`${w.dir}/${commitRecordName(o.commitVersion!)}`);
    expect((JSON.parse(text!) as { cubeUid?: string }).cubeUid).toBe(newUid);
  }

  // The answer: every event once, complete, none of the first cube's hand-offs counted.
  const answer = await waitFor(
    'a complete answer',
    async () => {
      const a = await server.query(cube, { groupBy: ['device'], measures: ['events'] });
      return a.complete ? a : undefined;
    },
    15_000,
    500,
  );
  const byDevice: Record<string, number> = {};
  for (const e of events) byDevice[e.device] = (byDevice[e.device] ?? 0) + 1;
  expect(Object.fromEntries(answer.rows as [string, number][])).toEqual(byDevice);
  expect(
    Object.fromEntries(
      answer.partitions.map((p) => [p.partition, [p.from, p.to, p.covered.length]]),
    ),
  ).toEqual(Object.fromEntries([...hw].map(([p, end]) => [p, ['0', end.toString(), 1]])));
  expect(answer.sources.committed.handOffs).toBeGreaterThan(0);
  expect(answer.sources.committed.predating).toBeUndefined();
});
