// A CubeAssignment's life beyond placement: spec.suspend pauses consumption while events keep
// coming and resuming catches up exactly; deleting the object runs the finalizer, which seals and
// hands off every receiver's data before the object goes, and the hand-offs hold every event.
import { setTimeout as sleep } from 'node:timers/promises';
import { logLevel, type Admin, type Producer } from 'kafkajs';
import { createKafka } from '../../src/kafka/client.ts';
import type { CubeAssignment } from '../../src/api/cube-assignment.ts';
import { cubeSpecDigest } from '../../src/api/cube.ts';
import { finalizer } from '../../src/operator/cube/index.ts';
import { rangesFromJson } from '../../src/receiver/offset-ranges.ts';
import { ReceiverApiError } from '../../src/protocol/client.ts';
import { adminKubeConfig, testEnvironment } from '../env/connection.ts';
import { freePort } from '../../src/local/processes.ts';
import { ReceiverProcess, tempDir } from '../support/receiver-process.ts';
import { createTopic, highWatermarks, testSchema, totalsOf } from '../support/events.ts';
import { SteadyLoad } from '../support/load.ts';
import {
  OperatorProcess,
  applyCrd,
  conditionOf,
  createNamespace,
  cubeApi,
  waitForCubeGone,
  cubeEvents,
  startReceiverPod,
  setPodReady,
  waitForCube,
  waitForSettled,
} from '../support/cluster.ts';
import { addTotals, handOffTotals, handOffs } from '../support/hand-offs.ts';
import {
  expectTiling,
  expectTotals,
  positionsOf,
  rangesOf,
  totalsFromQuery,
  waitForPositions,
} from '../support/receiver-checks.ts';
import { waitFor } from '../support/wait.ts';

const env = testEnvironment();
const kc = adminKubeConfig();
const kafka = createKafka({
  clientId: 'operator-lifecycle-test',
  brokers: [env.kafka.bootstrap],
  logLevel: logLevel.NOTHING,
});
const token = `test-token-${Date.now()}-lifecycle`;
const range = { 'rs-a': [0, 1], 'rs-b': [2, 3] };

let admin: Admin;
let producer: Producer;
let namespace: string;
let operator: OperatorProcess;
let receiverPort: number;
const receivers: Record<string, ReceiverProcess> = {};
const deep = tempDir('deep-lifecycle');

const assigned = (c: CubeAssignment, expected: Record<string, number[]>): boolean =>
  JSON.stringify(c.status?.assignment) === JSON.stringify(expected);

async function createCube(
  name: string,
  topic: string,
  replicaSets = ['rs-a', 'rs-b'],
  expected: Record<string, number[]> = range,
): Promise<CubeAssignment> {
  await cubeApi(kc).create(namespace, name, {
    source: { brokers: [env.kafka.bootstrap], topic, startingOffsets: 'earliest' },
    schema: testSchema,
    replicaSets,
    strategy: 'range',
  });
  return waitForSettled(kc, namespace, name, (c) => assigned(c, expected));
}

async function waitUntilGone(cube: string): Promise<void> {
  await waitForCubeGone(kc, namespace, cube, 60_000);
}

/** After the finalizer ran: both replica sets handed off, no receiver knows the cube, nothing lost. */
async function expectHandedOff(
  cube: string,
  produced: ReturnType<SteadyLoad['all']>,
  hw: Map<number, bigint>,
): Promise<void> {
  const list = handOffs(deep, cube);
  expect([...new Set(list.map((h) => h.manifest.replicaSet))].sort()).toEqual(['rs-a', 'rs-b']);
  for (const r of Object.values(receivers)) {
    const answer = await r.client.cubeStatus(cube).catch((error: unknown) => error);
    expect(answer).toBeInstanceOf(ReceiverApiError);
    expect((answer as ReceiverApiError).status).toBe(404);
  }
  expectTotals(handOffTotals(list), totalsOf(produced));
  for (const [p, end] of hw) {
    const ranges = list.flatMap((h) => rangesFromJson(h.manifest.offsetRanges[String(p)] ?? []));
    expectTiling(ranges, 0n, end);
  }
  const events = await cubeEvents(kc, namespace, cube);
  expect(events.map((e) => e.reason)).toContain('Finalized');
}

/** Every partition's position on its owner, from the receivers themselves. */
async function positions(cube: string): Promise<Record<number, string>> {
  return {
    ...positionsOf(await receivers['rs-a']!.client.cubeStatus(cube)),
    ...positionsOf(await receivers['rs-b']!.client.cubeStatus(cube)),
  };
}

/** Waits until both receivers hold every event of their partitions up to the high watermarks. */
async function caughtUp(cube: string, topic: string): Promise<Map<number, bigint>> {
  const hw = await highWatermarks(kafka, topic);
  const end = Object.fromEntries(hw);
  await waitForPositions(receivers['rs-a']!.client, cube, { 0: end[0]!, 1: end[1]! });
  await waitForPositions(receivers['rs-b']!.client, cube, { 2: end[2]!, 3: end[3]! });
  return hw;
}

beforeAll(async () => {
  admin = kafka.admin();
  producer = kafka.producer();
  await Promise.all([admin.connect(), producer.connect(), applyCrd()]);
  namespace = await createNamespace(kc, 'op-life');
  const port = (receiverPort = await freePort());
  for (const [name, rs, ip] of [
    ['rs-a-0', 'rs-a', '127.0.0.35'],
    ['rs-b-0', 'rs-b', '127.0.0.36'],
  ] as const) {
    receivers[rs] = await startReceiverPod(kc, namespace, {
      name: name,
      replicaSet: rs,
      ip: ip,
      port: port,
      token,
      deepStorageDir: deep,
    });
  }
  operator = new OperatorProcess({ namespace, receiverToken: token, receiverPort: port });
  await operator.start();
});

afterAll(async () => {
  await operator?.kill('SIGTERM');
  for (const r of Object.values(receivers)) await r.stop();
  await Promise.all([admin?.disconnect(), producer?.disconnect()]);
});

test('suspend pauses consumption under load; resume catches up exactly', async () => {
  const cube = 'napping';
  const topic = await createTopic(admin, 4);
  const load = new SteadyLoad(producer, topic, 4);
  load.start(Date.UTC(2026, 3, 1));
  await createCube(cube, topic);
  const api = cubeApi(kc);

  await api.patchSpec(namespace, cube, { suspend: true });
  const suspended = await waitForCube(kc, namespace, cube, 'Ready False (Suspended)', (c) => {
    const ready = conditionOf(c, 'Ready');
    return ready?.status === 'False' && ready.reason === 'Suspended';
  });
  expect(suspended.status?.observedGeneration).toBe(suspended.metadata?.generation);
  const frozen = await positions(cube);
  for (const rs of ['rs-a', 'rs-b'])
    for (const p of (await receivers[rs]!.client.cubeStatus(cube)).partitions)
      expect(p.state).toBe('paused');

  // Events keep coming; the positions do not move.
  await sleep(2_000);
  expect(await positions(cube)).toEqual(frozen);
  const hw = await highWatermarks(kafka, topic);
  for (const [p, end] of hw) expect(end).toBeGreaterThan(BigInt(frozen[p]!));
  // Still Suspended after a few resyncs (--resync=1s).
  expect(conditionOf(await api.get(namespace, cube), 'Ready')?.reason).toBe('Suspended');

  await api.patchSpec(namespace, cube, { suspend: false });
  await waitForSettled(kc, namespace, cube, (c) => assigned(c, range));
  await load.stop();
  const end = await caughtUp(cube, topic);
  const [a, b] = [receivers['rs-a']!, receivers['rs-b']!];
  const [statusA, statusB] = [await a.client.cubeStatus(cube), await b.client.cubeStatus(cube)];
  expectTotals(
    addTotals(
      totalsFromQuery(await a.client.query(cube, {})),
      totalsFromQuery(await b.client.query(cube, {})),
    ),
    totalsOf(load.all()),
  );
  for (const [p, to] of end) expectTiling(rangesOf(p, statusA.segments, statusB.segments), 0n, to);
  // Resuming is what the user asked for, not a fault worth a Warning.
  const warnings = (await cubeEvents(kc, namespace, cube)).filter((e) => e.type === 'Warning');
  expect(warnings.map((e) => `${e.reason}: ${e.message}`)).toEqual([]);
});

test('a brokers edit reaches every receiver before observedGeneration moves; nothing is lost', async () => {
  const cube = 'rerouted';
  const topic = await createTopic(admin, 4);
  const load = new SteadyLoad(producer, topic, 4);
  load.start(Date.UTC(2026, 3, 15));
  const before = await createCube(cube, topic);
  const api = cubeApi(kc);
  const source = { brokers: [env.kafka.bootstrap], topic, startingOffsets: 'earliest' };
  const newSource = { ...source, brokers: [env.kafka.bootstrap, env.kafka.bootstrap] };
  const wanted = cubeSpecDigest({ source: newSource, schema: testSchema });
  expect(cubeSpecDigest({ source, schema: testSchema })).not.toBe(wanted);

  // rs-b's receiver is down (its pod still says Ready): the edit cannot reach it yet.
  await receivers['rs-b']!.stop();
  const edited = await api.patchSpec(namespace, cube, { source: { brokers: newSource.brokers } });
  expect(edited.metadata?.generation).toBe((before.metadata?.generation ?? 0) + 1);
  const rolling = await waitForCube(kc, namespace, cube, 'Progressing RollingOut', (c) => {
    const p = conditionOf(c, 'Progressing');
    return p?.status === 'True' && p.reason === 'RollingOut';
  });
  expect(rolling.status?.observedGeneration).toBe(before.metadata?.generation);
  expect(conditionOf(rolling, 'Ready')?.reason).toBe('SpecNotRolledOut');
  expect((await receivers['rs-a']!.client.cubeStatus(cube)).specDigest).toBe(wanted);
  await sleep(1_500); // a few resyncs: still waiting for rs-b
  expect((await api.get(namespace, cube)).status?.observedGeneration).toBe(
    before.metadata?.generation,
  );

  // Back with the old source from its checkpoint; the operator brings it to the new one.
  await receivers['rs-b']!.start();
  const applied = await waitForSettled(kc, namespace, cube, (c) => assigned(c, range));
  expect(applied.status?.observedGeneration).toBe(edited.metadata?.generation);
  for (const rs of ['rs-a', 'rs-b'])
    expect((await receivers[rs]!.client.cubeStatus(cube)).specDigest).toBe(wanted);

  await load.stop();
  const end = await caughtUp(cube, topic);
  const [a, b] = [receivers['rs-a']!, receivers['rs-b']!];
  expectTotals(
    addTotals(
      totalsFromQuery(await a.client.query(cube, {})),
      totalsFromQuery(await b.client.query(cube, {})),
    ),
    totalsOf(load.all()),
  );
  const [statusA, statusB] = [await a.client.cubeStatus(cube), await b.client.cubeStatus(cube)];
  for (const [p, to] of end) expectTiling(rangesOf(p, statusA.segments, statusB.segments), 0n, to);
});

test('deleting the cube seals and hands off every receiver, then the object is gone', async () => {
  const cube = 'retired';
  const topic = await createTopic(admin, 4);
  const load = new SteadyLoad(producer, topic, 4);
  load.start(Date.UTC(2026, 4, 1));
  const created = await createCube(cube, topic);
  expect(created.metadata?.finalizers).toContain(finalizer);
  await sleep(1_000);
  await load.stop();
  const hw = await caughtUp(cube, topic);
  expect(handOffs(deep, cube)).toEqual([]);

  await cubeApi(kc).delete(namespace, cube);
  await waitUntilGone(cube);
  await expectHandedOff(cube, load.all(), hw);
});

test('a replica set without a ready pod holds the deletion until it is back, then hands off too', async () => {
  const cube = 'interrupted';
  const topic = await createTopic(admin, 4);
  const load = new SteadyLoad(producer, topic, 4);
  load.start(Date.UTC(2026, 5, 1));
  await createCube(cube, topic);
  await sleep(500);
  await load.stop();
  const hw = await caughtUp(cube, topic);

  // rs-b's only pod stops being Ready (the receiver keeps its data), and the operator has seen it.
  await setPodReady(kc, namespace, 'rs-b-0', '127.0.0.36', false);
  try {
    await waitForCube(kc, namespace, cube, 'Degraded: rs-b unavailable', (c) => {
      const d = conditionOf(c, 'Degraded');
      return d?.status === 'True' && d.reason === 'ReplicaSetUnavailable';
    });
    await cubeApi(kc).delete(namespace, cube);
    const blocked = await waitForCube(kc, namespace, cube, 'Degraded FinalizeBlocked', (c) => {
      const d = conditionOf(c, 'Degraded');
      return d?.status === 'True' && d.reason === 'FinalizeBlocked';
    });
    expect(conditionOf(blocked, 'Degraded')?.message).toContain('rs-b');
    await waitFor('a Warning Event FinalizeBlocked', async () =>
      (await cubeEvents(kc, namespace, cube)).some(
        (e) => e.type === 'Warning' && e.reason === 'FinalizeBlocked',
      ),
    );
    await sleep(1_500);
    expect((await cubeApi(kc).get(namespace, cube)).metadata?.finalizers).toContain(finalizer);
    expect((await receivers['rs-b']!.client.cubeStatus(cube)).segments.length).toBeGreaterThan(0);
  } finally {
    await setPodReady(kc, namespace, 'rs-b-0', '127.0.0.36', true);
  }
  await waitUntilGone(cube);
  await expectHandedOff(cube, load.all(), hw);
});

test('deleting the cube in the middle of a reassign also hands off the replica set it moved to', async () => {
  const cube = 'relocated';
  const topic = await createTopic(admin, 4);
  const load = new SteadyLoad(producer, topic, 4);
  load.start(Date.UTC(2026, 6, 1));
  // This operator dies when a reassign first reaches Sealing (the initial assignment, a first
  // placement, has nothing to seal): rs-b has started every partition, status.assignment still
  // names rs-a alone.
  await operator.kill('SIGTERM');
  operator = new OperatorProcess({ namespace, receiverToken: token, receiverPort });
  await operator.start({ STREAMCUBE_FAULT: 'reassign-Sealing' });
  await createCube(cube, topic, ['rs-a'], { 'rs-a': [0, 1, 2, 3] });
  // Ready says rs-a consumes, not that it has read anything yet: it must hold data of its own
  // before the move, or rs-b starts from offset 0 and rs-a has nothing to hand off.
  await waitFor('rs-a to have consumed every partition', async () =>
    (await receivers['rs-a']!.client.cubeStatus(cube)).partitions.every(
      (p) => BigInt(p.position) > 0n,
    ),
  );
  await cubeApi(kc).patchSpec(namespace, cube, { replicaSets: ['rs-b'] });
  await operator.waitForExit(60_000);
  const stranded = await cubeApi(kc).get(namespace, cube);
  expect(stranded.status?.reassign?.phase).toBe('Sealing');
  expect(stranded.status?.assignment).toEqual({ 'rs-a': [0, 1, 2, 3] });
  await load.stop();
  const hw = await highWatermarks(kafka, topic);
  await waitForPositions(receivers['rs-b']!.client, cube, Object.fromEntries(hw));

  await cubeApi(kc).delete(namespace, cube);
  operator = new OperatorProcess({ namespace, receiverToken: token, receiverPort });
  await operator.start();
  await waitUntilGone(cube);
  await expectHandedOff(cube, load.all(), hw);
});
