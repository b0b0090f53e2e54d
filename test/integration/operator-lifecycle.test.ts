// A CubeAssignment's life beyond placement: spec.suspend pauses consumption while events keep
// coming and resuming catches up exactly; deleting the object runs the finalizer, which seals and
// hands off every receiver's data before the object goes, and the hand-offs hold every event.
import { setTimeout as sleep } from 'node:timers/promises';
import type { CubeAssignment } from '../../src/api/cube-assignment.ts';
import { cubeSpecDigest } from '../../src/api/cube.ts';
import { finalizer } from '../../src/operator/cube/index.ts';
import { rangesFromJson } from '../../src/receiver/offset-ranges.ts';
import { ReceiverApiError } from '../../src/protocol/client.ts';
import { createTopic, highWatermarks, testSchema, totalsOf } from '../support/events.ts';
import { SteadyLoad } from '../support/load.ts';
import { conditionOf, cubeApi, waitForCubeGone, setPodReady } from '../support/cluster.ts';
import { handOffTotals, handOffs } from '../support/hand-offs.ts';
import {
  expectTiling,
  expectTotals,
  positionsOf,
  rangesOf,
  waitForPositions,
  expectQueriedTotals,
} from '../support/receiver-checks.ts';
import { waitFor } from '../support/wait.ts';
import { useOperatorStack } from '../support/operator-stack.ts';

const stack = useOperatorStack({ name: 'op-life', replicaSets: ['rs-a', 'rs-b'] });
const { kc, env, kafka, receivers } = stack;
const deep = stack.deepStorageDir;
const range = { 'rs-a': [0, 1], 'rs-b': [2, 3] };

const assigned = (c: CubeAssignment, expected: Record<string, number[]>): boolean =>
  JSON.stringify(c.status?.assignment) === JSON.stringify(expected);

async function createCube(
  name: string,
  topic: string,
  replicaSets = ['rs-a', 'rs-b'],
  expected: Record<string, number[]> = range,
): Promise<CubeAssignment> {
  await stack.createCube(name, topic, {
    replicaSets,
    strategy: 'range',
  });
  return stack.waitForSettled(name, (c) => assigned(c, expected));
}

async function waitUntilGone(cube: string): Promise<void> {
  await waitForCubeGone(kc, stack.namespace, cube, 60_000);
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
  const events = await stack.cubeEvents(cube);
  expect(events.map((e) => e.reason)).toContain('Finalized');
}

/** A new topic of four partitions under steady load from event time `start`. */
async function loadedTopic(start: number): Promise<{ topic: string; load: SteadyLoad }> {
  const topic = await createTopic(stack.admin, 4);
  const load = new SteadyLoad(stack.producer, topic, 4);
  load.start(start);
  return { topic, load };
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

test('suspend pauses consumption under load; resume catches up exactly', async () => {
  const cube = 'napping';
  const { topic, load } = await loadedTopic(Date.UTC(2026, 3, 1));
  await createCube(cube, topic);
  const api = cubeApi(kc);

  await api.patchSpec(stack.namespace, cube, { suspend: true });
  const suspended = await stack.waitForCube(cube, 'Ready False (Suspended)', (c) => {
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
  expect(conditionOf(await api.get(stack.namespace, cube), 'Ready')?.reason).toBe('Suspended');

  await api.patchSpec(stack.namespace, cube, { suspend: false });
  await stack.waitForSettled(cube, (c) => assigned(c, range));
  await load.stop();
  const end = await caughtUp(cube, topic);
  const [a, b] = [receivers['rs-a']!, receivers['rs-b']!];
  const [statusA, statusB] = [await a.client.cubeStatus(cube), await b.client.cubeStatus(cube)];
  await expectQueriedTotals([a.client, b.client], cube, load.all());
  for (const [p, to] of end) expectTiling(rangesOf(p, statusA.segments, statusB.segments), 0n, to);
  // Resuming is what the user asked for, not a fault worth a Warning.
  const warnings = (await stack.cubeEvents(cube)).filter((e) => e.type === 'Warning');
  expect(warnings.map((e) => `${e.reason}: ${e.message}`)).toEqual([]);
});

test('a brokers edit reaches every receiver before observedGeneration moves; nothing is lost', async () => {
  const cube = 'rerouted';
  const { topic, load } = await loadedTopic(Date.UTC(2026, 3, 15));
  const before = await createCube(cube, topic);
  const api = cubeApi(kc);
  const source = { brokers: [env.kafka.bootstrap], topic, startingOffsets: 'earliest' };
  const newSource = { ...source, brokers: [env.kafka.bootstrap, env.kafka.bootstrap] };
  const wanted = cubeSpecDigest({ source: newSource, schema: testSchema });
  expect(cubeSpecDigest({ source, schema: testSchema })).not.toBe(wanted);

  // rs-b's receiver is down (its pod still says Ready): the edit cannot reach it yet.
  await receivers['rs-b']!.stop();
  const edited = await api.patchSpec(stack.namespace, cube, {
    source: { brokers: newSource.brokers },
  });
  expect(edited.metadata?.generation).toBe((before.metadata?.generation ?? 0) + 1);
  const rolling = await stack.waitForCube(cube, 'Progressing RollingOut', (c) => {
    const p = conditionOf(c, 'Progressing');
    return p?.status === 'True' && p.reason === 'RollingOut';
  });
  expect(rolling.status?.observedGeneration).toBe(before.metadata?.generation);
  expect(conditionOf(rolling, 'Ready')?.reason).toBe('SpecNotRolledOut');
  expect((await receivers['rs-a']!.client.cubeStatus(cube)).specDigest).toBe(wanted);
  await sleep(1_500); // a few resyncs: still waiting for rs-b
  expect((await api.get(stack.namespace, cube)).status?.observedGeneration).toBe(
    before.metadata?.generation,
  );

  // Back with the old source from its checkpoint; the operator brings it to the new one.
  await receivers['rs-b']!.start();
  const applied = await stack.waitForSettled(cube, (c) => assigned(c, range));
  expect(applied.status?.observedGeneration).toBe(edited.metadata?.generation);
  for (const rs of ['rs-a', 'rs-b'])
    expect((await receivers[rs]!.client.cubeStatus(cube)).specDigest).toBe(wanted);

  await load.stop();
  const end = await caughtUp(cube, topic);
  const [a, b] = [receivers['rs-a']!, receivers['rs-b']!];
  await expectQueriedTotals([a.client, b.client], cube, load.all());
  const [statusA, statusB] = [await a.client.cubeStatus(cube), await b.client.cubeStatus(cube)];
  for (const [p, to] of end) expectTiling(rangesOf(p, statusA.segments, statusB.segments), 0n, to);
});

test('deleting the cube seals and hands off every receiver, then the object is gone', async () => {
  const cube = 'retired';
  const { topic, load } = await loadedTopic(Date.UTC(2026, 4, 1));
  const created = await createCube(cube, topic);
  expect(created.metadata?.finalizers).toContain(finalizer);
  await sleep(1_000);
  await load.stop();
  const hw = await caughtUp(cube, topic);
  expect(handOffs(deep, cube)).toEqual([]);

  await cubeApi(kc).delete(stack.namespace, cube);
  await waitUntilGone(cube);
  await expectHandedOff(cube, load.all(), hw);
});

test('a replica set without a ready pod holds the deletion until it is back, then hands off too', async () => {
  const cube = 'interrupted';
  const { topic, load } = await loadedTopic(Date.UTC(2026, 5, 1));
  await createCube(cube, topic);
  await sleep(500);
  await load.stop();
  const hw = await caughtUp(cube, topic);

  // rs-b's only pod stops being Ready (the receiver keeps its data), and the operator has seen it.
  await setPodReady(kc, stack.namespace, 'rs-b-0', receivers['rs-b']!.options.host!, false);
  try {
    await stack.waitForCube(cube, 'Degraded: rs-b unavailable', (c) => {
      const d = conditionOf(c, 'Degraded');
      return d?.status === 'True' && d.reason === 'ReplicaSetUnavailable';
    });
    await cubeApi(kc).delete(stack.namespace, cube);
    const blocked = await stack.waitForCube(cube, 'Degraded FinalizeBlocked', (c) => {
      const d = conditionOf(c, 'Degraded');
      return d?.status === 'True' && d.reason === 'FinalizeBlocked';
    });
    expect(conditionOf(blocked, 'Degraded')?.message).toContain('rs-b');
    await waitFor('a Warning Event FinalizeBlocked', async () =>
      (await stack.cubeEvents(cube)).some(
        (e) => e.type === 'Warning' && e.reason === 'FinalizeBlocked',
      ),
    );
    await sleep(1_500);
    expect((await cubeApi(kc).get(stack.namespace, cube)).metadata?.finalizers).toContain(
      finalizer,
    );
    expect((await receivers['rs-b']!.client.cubeStatus(cube)).segments.length).toBeGreaterThan(0);
  } finally {
    await setPodReady(kc, stack.namespace, 'rs-b-0', receivers['rs-b']!.options.host!, true);
  }
  await waitUntilGone(cube);
  await expectHandedOff(cube, load.all(), hw);
});

test('deleting the cube in the middle of a reassign also hands off the replica set it moved to', async () => {
  const cube = 'relocated';
  const { topic, load } = await loadedTopic(Date.UTC(2026, 6, 1));
  // This operator dies when a reassign first reaches Sealing (the initial assignment, a first
  // placement, has nothing to seal): rs-b has started every partition, status.assignment still
  // names rs-a alone.
  await stack.operator.kill('SIGTERM');
  stack.operator = await stack.startOperator({ STREAMCUBE_FAULT: 'reassign-Sealing' });
  await createCube(cube, topic, ['rs-a'], { 'rs-a': [0, 1, 2, 3] });
  // Ready says rs-a consumes, not that it has read anything yet: it must hold data of its own
  // before the move, or rs-b starts from offset 0 and rs-a has nothing to hand off.
  await waitFor('rs-a to have consumed every partition', async () =>
    (await receivers['rs-a']!.client.cubeStatus(cube)).partitions.every(
      (p) => BigInt(p.position) > 0n,
    ),
  );
  await cubeApi(kc).patchSpec(stack.namespace, cube, { replicaSets: ['rs-b'] });
  await stack.operator.waitForExit(60_000);
  const stranded = await cubeApi(kc).get(stack.namespace, cube);
  expect(stranded.status?.reassign?.phase).toBe('Sealing');
  expect(stranded.status?.assignment).toEqual({ 'rs-a': [0, 1, 2, 3] });
  await load.stop();
  const hw = await highWatermarks(kafka, topic);
  await waitForPositions(receivers['rs-b']!.client, cube, Object.fromEntries(hw));

  await cubeApi(kc).delete(stack.namespace, cube);
  stack.operator = await stack.startOperator();
  await waitUntilGone(cube);
  await expectHandedOff(cube, load.all(), hw);
});
