// Cubes of one name in several namespaces on the same receivers (issue 11, `cube-namespaces`):
// three CubeAssignments named `orders` — in team namespaces A and B on one topic, and in the
// receivers' own namespace R on another — served by the same two receivers. Each stays apart:
// its totals (through its own query and hand-offs) are exact, its consumer groups, metric series,
// data directory and hand-off paths are its own; a reassign of A moves nothing of B or R; deleting
// B hands off and drops B alone. A and B have operators of their own (a Lease each, watching
// their namespace, finding receivers in R with --receiver-namespace); R's is the stack's.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { CubeAssignment } from '../../src/api/cube-assignment.ts';
import type { CubeStatus } from '../../src/protocol/admin-api.ts';
import { ReceiverApiError } from '../../src/protocol/client.ts';
import {
  createNamespace,
  cubeApi,
  waitForCube,
  waitForCubeGone,
  waitForSettled,
} from '../support/cluster.ts';
import { expectExactAndTiled } from '../support/cube-audit.ts';
import { createTopic, highWatermarks, testSchema, totalsOf } from '../support/events.ts';
import { handOffTotals, handOffs } from '../support/hand-offs.ts';
import { SteadyLoad } from '../support/load.ts';
import { useOperatorStack } from '../support/operator-stack.ts';
import { useLoads } from '../support/loaded-cube.ts';
import { expectTotals, metricValue, waitForPositions } from '../support/receiver-checks.ts';
import type { ReceiverProcess } from '../support/receiver-process.ts';
import { waitFor } from '../support/wait.ts';

const stack = useOperatorStack({ name: 'cube-ns', replicaSets: ['rs-a', 'rs-b'] });
const suite = useLoads(stack);
const cube = 'orders';
/** Namespaces by role: A and B share topic `shared`, R (the receivers' own) reads `other`. */
const ns = { a: '', b: '', r: '' };
let shared: string;
let other: string;
const sharedLoad: SteadyLoad[] = [];
let otherLoad: SteadyLoad;

beforeAll(async () => {
  ns.r = stack.namespace;
  ns.a = await createNamespace(stack.kc, 'team-a');
  ns.b = await createNamespace(stack.kc, 'team-b');
  await stack.startOperator({}, ns.a);
  await stack.startOperator({}, ns.b);
});

const receivers = (): ReceiverProcess[] => Object.values(stack.receivers);
const assigned =
  (expected: Record<string, number[]>) =>
  (c: CubeAssignment): boolean =>
    JSON.stringify(c.status?.assignment) === JSON.stringify(expected);
const range4 = { 'rs-a': [0, 1], 'rs-b': [2, 3] };
const range2 = { 'rs-a': [0], 'rs-b': [1] };

async function createCube(namespace: string, topic: string): Promise<void> {
  await cubeApi(stack.kc).create(namespace, cube, {
    source: { brokers: [stack.env.kafka.bootstrap], topic, startingOffsets: 'earliest' },
    schema: testSchema,
    replicaSets: ['rs-a', 'rs-b'],
    strategy: 'range',
  });
}

/** Each receiver's owned partitions of the cube of `namespace` at the end of `topic`. */
async function caughtUp(
  namespace: string,
  topic: string,
  owners: Record<string, number[]>,
): Promise<Map<number, bigint>> {
  const hw = await highWatermarks(stack.kafka, topic);
  for (const [rs, partitions] of Object.entries(owners)) {
    const client = stack.receivers[rs]!.client.inNamespace(namespace);
    await waitForPositions(
      client,
      cube,
      Object.fromEntries(partitions.map((p) => [p, hw.get(p)!])),
    );
  }
  return hw;
}

/**
 * The cube of `namespace` holds exactly `expected` (its query and hand-offs, offsets tiled), and
 * its operator reports, in status.partitions, its own receivers' positions: the topic's end.
 */
async function audit(
  namespace: string,
  topic: string,
  owners: Record<string, number[]>,
  expected: ReturnType<typeof totalsOf>,
): Promise<void> {
  const hw = await caughtUp(namespace, topic, owners);
  await expectExactAndTiled({
    cube,
    namespace,
    deepStorageDir: stack.deepStorageDir,
    replicaSets: stack.replicas,
    highWatermarks: hw,
    expected,
  });
  const want = Object.entries(owners).flatMap(([rs, partitions]) =>
    partitions.map((p) => `${p}:${rs}@${hw.get(p)}`),
  );
  let seen: string[] = [];
  await waitForCube(stack.kc, namespace, cube, `status.partitions ${want.join(' ')}`, (c) => {
    seen = (c.status?.partitions ?? []).map((p) => `${p.partition}:${p.replicaSet}@${p.position}`);
    return JSON.stringify(seen) === JSON.stringify(want);
  }).catch((error: unknown) => {
    throw new Error(`${(error as Error).message}; last seen ${seen.join(' ')}`, { cause: error });
  });
}

/** Per receiver, each partition's "state@position/epoch" of the cube of `namespace` (or absent). */
async function footprint(namespace: string): Promise<Record<string, string[]>> {
  const out: Record<string, string[]> = {};
  for (const r of receivers()) {
    let status: CubeStatus;
    try {
      status = await r.client.inNamespace(namespace).cubeStatus(cube);
    } catch (error) {
      if (!(error instanceof ReceiverApiError && error.status === 404)) throw error;
      out[r.options.id] = ['absent'];
      continue;
    }
    out[r.options.id] = status.partitions.map(
      (p) => `${p.partition}:${p.state}@${p.position}/e${p.epoch}`,
    );
  }
  return out;
}

const groupsOf = (namespace: string): string[] =>
  receivers().map((r) => `streamcube.${namespace}.${cube}.${r.options.id}`);

async function listedGroups(): Promise<string[]> {
  const { groups } = await stack.admin.listGroups();
  return groups
    .map((g) => g.groupId)
    .filter((id) => id.endsWith(`.${cube}.rs-a-0`) || id.endsWith(`.${cube}.rs-b-0`));
}

/** The operator's status period (the stack starts it with --resync=1s). */
const resyncMs = 1_000;

/** PUTs (assigns) a receiver has answered, whatever the route or status (its own metrics). */
async function assignsAnswered(r: ReceiverProcess): Promise<number> {
  const text = await fetch(`${r.baseUrl}/metrics`).then((res) => res.text());
  let n = 0;
  for (const [, count] of text.matchAll(
    /^streamcube_receiver_admin_request_duration_seconds_count\{method="PUT",[^}]*\} (\d+)$/gm,
  ))
    n += Number(count);
  return n;
}

const allShared = (): ReturnType<typeof totalsOf> =>
  totalsOf(sharedLoad.flatMap((load) => load.all()));

test('three cubes named `orders` on the same receivers, two of them on one topic: totals, groups, series and directories stay apart', async () => {
  shared = await createTopic(stack.admin, 4);
  other = await createTopic(stack.admin, 2);
  sharedLoad.push(new SteadyLoad(suite.producer(), shared, 4, 10, 100));
  otherLoad = new SteadyLoad(suite.producer(), other, 2, 7, 100);
  suite.loads.push(sharedLoad[0]!, otherLoad);
  sharedLoad[0]!.start(Date.UTC(2026, 6, 1));
  otherLoad.start(Date.UTC(2026, 6, 2));
  await Promise.all([createCube(ns.a, shared), createCube(ns.b, shared), createCube(ns.r, other)]);
  await Promise.all([
    waitForSettled(stack.kc, ns.a, cube, assigned(range4)),
    waitForSettled(stack.kc, ns.b, cube, assigned(range4)),
    waitForSettled(stack.kc, ns.r, cube, assigned(range2)),
  ]);
  await sharedLoad[0]!.stop();
  await otherLoad.stop();

  // Each cube answers its own query with its own topic's totals, none with another's.
  await audit(ns.a, shared, range4, allShared());
  await audit(ns.b, shared, range4, allShared());
  await audit(ns.r, other, range2, totalsOf(otherLoad.all()));
  expect(allShared().events).not.toBe(totalsOf(otherLoad.all()).events);

  for (const r of receivers()) {
    // One status call lists the three, by namespace and name.
    const listed = (await r.client.cubes()).cubes.map((c) => `${c.namespace}/${c.cube}:${c.topic}`);
    expect(listed.sort()).toEqual(
      [`${ns.a}/${cube}:${shared}`, `${ns.b}/${cube}:${shared}`, `${ns.r}/${cube}:${other}`].sort(),
    );
    for (const namespace of [ns.a, ns.b, ns.r])
      expect(existsSync(join(r.dataDir, 'cubes', namespace, cube, 'checkpoint.json'))).toBe(true);
    // Series per namespace: A's and B's count the same events (same topic, same partitions), R's
    // its own topic's, and none of them is summed into another.
    const text = await fetch(`${r.baseUrl}/metrics`).then((res) => res.text());
    const ingested = (namespace: string) =>
      metricValue(text, 'streamcube_receiver_events_ingested_total', { namespace, cube });
    const a = ingested(ns.a);
    expect(a).toBeGreaterThan(0);
    expect(ingested(ns.b)).toBe(a);
    const owned = r.options.replicaSet === 'rs-a' ? [0] : [1];
    expect(ingested(ns.r)).toBe(
      owned.reduce((n, p) => n + (otherLoad.produced.get(p)?.length ?? 0), 0),
    );
  }
  // Settled, the cubes need no assign: the operators read each cube's own summary from a
  // receiver's one list (another namespace's `orders` there would pass for a stale spec and be
  // "repaired" at every resync).
  const before = await Promise.all(receivers().map(assignsAnswered));
  await new Promise((r) => setTimeout(r, 4 * resyncMs));
  expect(await Promise.all(receivers().map(assignsAnswered))).toEqual(before);
  // One consumer group per (namespace, cube, receiver).
  await waitFor('a consumer group per namespace and receiver', async () => {
    const listed = await listedGroups();
    return [ns.a, ns.b, ns.r].flatMap(groupsOf).every((g) => listed.includes(g)) || undefined;
  });
});

test('a reassign of the cube in A leaves B and R as they were; the hand-offs it makes are A’s', async () => {
  const before = { b: await footprint(ns.b), r: await footprint(ns.r) };
  const bGeneration = (await cubeApi(stack.kc).get(ns.b, cube)).metadata?.generation;
  // A leaves rs-b: rs-b drains, seals and hands off A's segments, then drops A.
  await cubeApi(stack.kc).patchSpec(ns.a, cube, { replicaSets: ['rs-a'] });
  await waitForSettled(stack.kc, ns.a, cube, assigned({ 'rs-a': [0, 1, 2, 3] }));
  await waitFor('rs-b to drop the cube of A', async () => {
    try {
      await stack.receivers['rs-b']!.client.inNamespace(ns.a).cubeStatus(cube);
      return undefined;
    } catch (error) {
      if (error instanceof ReceiverApiError && error.status === 404) return true;
      throw error;
    }
  });

  expect(await footprint(ns.b)).toEqual(before.b);
  expect(await footprint(ns.r)).toEqual(before.r);
  const b = await cubeApi(stack.kc).get(ns.b, cube);
  expect([b.metadata?.generation, b.status?.reassign, b.status?.assignment]).toEqual([
    bGeneration,
    undefined,
    range4,
  ]);
  const aHandOffs = handOffs(stack.deepStorageDir, cube, ns.a);
  expect(aHandOffs.length).toBeGreaterThan(0);
  for (const h of aHandOffs) {
    expect(h.dir.startsWith(join(stack.deepStorageDir, `namespace=${ns.a}`, cube))).toBe(true);
    expect(h.manifest.receiver).toBe('rs-b-0');
  }
  expect(handOffs(stack.deepStorageDir, cube, ns.b)).toEqual([]);
  expect(handOffs(stack.deepStorageDir, cube, ns.r)).toEqual([]);
  await waitFor(`no group of ${ns.a} on rs-b-0`, async () =>
    (await listedGroups()).includes(`streamcube.${ns.a}.${cube}.rs-b-0`) ? undefined : true,
  );
  expect(await listedGroups()).toContain(`streamcube.${ns.b}.${cube}.rs-b-0`);

  // More events: A (all on rs-a now, rs-b's part in deep storage) and B stay exact.
  const more = new SteadyLoad(suite.producer(), shared, 4, 10, 100);
  sharedLoad.push(more);
  suite.loads.push(more);
  more.start(Date.UTC(2026, 6, 3));
  await new Promise((r) => setTimeout(r, 1_500));
  await more.stop();
  await audit(ns.a, shared, { 'rs-a': [0, 1, 2, 3] }, allShared());
  await audit(ns.b, shared, range4, allShared());
});

test('deleting the cube in B hands off and drops B alone: A and R keep their data and positions', async () => {
  const before = { a: await footprint(ns.a), r: await footprint(ns.r) };
  await cubeApi(stack.kc).delete(ns.b, cube);
  await waitForCubeGone(stack.kc, ns.b, cube);
  for (const r of receivers()) {
    await expect(r.client.inNamespace(ns.b).cubeStatus(cube)).rejects.toMatchObject({
      status: 404,
    });
    expect(existsSync(join(r.dataDir, 'cubes', ns.b, cube))).toBe(false);
    // R's cube is on both; A's, since its reassign, on rs-a only.
    expect(existsSync(join(r.dataDir, 'cubes', ns.r, cube, 'checkpoint.json'))).toBe(true);
    expect(existsSync(join(r.dataDir, 'cubes', ns.a, cube, 'checkpoint.json'))).toBe(
      r.options.replicaSet === 'rs-a',
    );
  }
  // B's every event is in deep storage, under B's namespace.
  const bHandOffs = handOffs(stack.deepStorageDir, cube, ns.b);
  for (const h of bHandOffs)
    expect(h.dir.startsWith(join(stack.deepStorageDir, `namespace=${ns.b}`, cube))).toBe(true);
  expectTotals(handOffTotals(bHandOffs), allShared());
  await waitFor(`no consumer group of ${ns.b} left`, async () =>
    (await listedGroups()).some((g) => g.startsWith(`streamcube.${ns.b}.`)) ? undefined : true,
  );

  expect(await footprint(ns.a)).toEqual(before.a);
  expect(await footprint(ns.r)).toEqual(before.r);
  await audit(ns.a, shared, { 'rs-a': [0, 1, 2, 3] }, allShared());
  await audit(ns.r, other, range2, totalsOf(otherLoad.all()));
});
