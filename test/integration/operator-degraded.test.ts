// What only the operator can find wrong with a CubeAssignment — a replica set without pods, a pin
// to a partition the topic lacks, a topic that does not exist — becomes Degraded with a reason, a
// Warning Event, and no crash loop: the rest keeps consuming, and fixing the cause clears it.
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { CubeAssignment } from '../../src/api/cube-assignment.ts';
import { createTopic, highWatermarks, type TestEvent, produceEach } from '../support/events.ts';
import { conditionOf, cubeApi } from '../support/cluster.ts';
import { waitForPositions, expectQueriedTotals } from '../support/receiver-checks.ts';
import { waitFor } from '../support/wait.ts';
import { useOperatorStack } from '../support/operator-stack.ts';

const stack = useOperatorStack({ name: 'op-degraded', replicaSets: ['rs-a', 'rs-b'] });
const { kc, env, kafka, receivers } = stack;

function source(topic: string) {
  return { brokers: [env.kafka.bootstrap], topic, startingOffsets: 'earliest' as const };
}

/** Produces `count` events to each partition and returns them. */
async function produceTo(topic: string, partitions: number, count: number): Promise<TestEvent[]> {
  const all = [...Array(partitions).keys()];
  return (
    await produceEach(stack.producer, topic, all, count, Date.UTC(2026, 2, 1), 500, (p) => p)
  ).flat();
}

const degradedWith = (c: CubeAssignment, reason: string): boolean => {
  const d = conditionOf(c, 'Degraded');
  return (
    d?.status === 'True' &&
    d.reason === reason &&
    d.observedGeneration === c.metadata?.generation &&
    !c.status?.reassign
  );
};

async function warningEvent(cube: string, reason: string, text: string) {
  return waitFor(
    `a Warning Event ${reason} naming ${text} on ${cube}`,
    async () =>
      (await stack.cubeEvents(cube)).find(
        (e) => e.type === 'Warning' && e.reason === reason && e.message?.includes(text),
      ),
    15_000,
  );
}

/** The operator is the same process as at the start, and it keeps reconciling. */
async function expectAliveAndReconciling(): Promise<void> {
  expect(stack.operator.alive).toBe(true);
  const before = await stack.operator.reconciles();
  await sleep(1_500);
  expect(stack.operator.alive).toBe(true);
  expect(await stack.operator.reconciles()).toBeGreaterThan(before);
}

test('a replica set without pods: Degraded and a Warning Event, the others consume, fixing the spec clears it', async () => {
  const cube = 'ghosted';
  const topic = await createTopic(stack.admin, 4);
  const produced = await produceTo(topic, 4, 200);
  const api = cubeApi(kc);
  await stack.createCube(cube, topic, {
    replicaSets: ['rs-a', 'rs-b', 'rs-ghost'],
    strategy: 'range',
  });

  const degraded = await stack.waitForCube(
    cube,
    'Degraded ReplicaSetUnavailable with every partition placed',
    (c) =>
      degradedWith(c, 'ReplicaSetUnavailable') &&
      [...(c.status?.assignment?.['rs-a'] ?? []), ...(c.status?.assignment?.['rs-b'] ?? [])]
        .sort()
        .join() === '0,1,2,3',
  );
  expect(conditionOf(degraded, 'Degraded')?.message).toContain('rs-ghost');
  // rs-ghost holds nothing: every partition is read by the others, so the cube is Ready.
  await stack.waitForCube(
    cube,
    'Ready with rs-ghost away',
    (c) => conditionOf(c, 'Ready')?.status === 'True' && degradedWith(c, 'ReplicaSetUnavailable'),
  );
  expect(degraded.status?.assignment?.['rs-ghost'] ?? []).toEqual([]);
  await warningEvent(cube, 'ReplicaSetUnavailable', 'rs-ghost');

  // The known replica sets consume everything.
  const hw = Object.fromEntries(await highWatermarks(kafka, topic));
  const ownerOf = (p: number) =>
    degraded.status?.assignment?.['rs-a']?.includes(p) ? receivers['rs-a']! : receivers['rs-b']!;
  for (const p of [0, 1, 2, 3]) await waitForPositions(ownerOf(p).client, cube, { [p]: hw[p]! });
  await expectQueriedTotals([receivers['rs-a']!.client, receivers['rs-b']!.client], cube, produced);
  await expectAliveAndReconciling();

  await api.patchSpec(stack.namespace, cube, { replicaSets: ['rs-a', 'rs-b'] });
  const fixed = await stack.waitForSettled(cube);
  expect(conditionOf(fixed, 'Degraded')).toMatchObject({ status: 'False' });
  expect(fixed.status?.assignment).toMatchObject(degraded.status?.assignment ?? {});
});

test('a pin to a partition the topic lacks: Degraded InvalidPin and an Event; the valid pins hold', async () => {
  const cube = 'mispinned';
  const topic = await createTopic(stack.admin, 2);
  const api = cubeApi(kc);
  await stack.createCube(cube, topic, {
    replicaSets: ['rs-a', 'rs-b'],
    strategy: 'range',
    pins: { 'rs-b': [0, 7] },
  });

  const degraded = await stack.waitForCube(
    cube,
    'Degraded InvalidPin with both partitions placed',
    (c) =>
      degradedWith(c, 'InvalidPin') &&
      JSON.stringify(c.status?.assignment) === JSON.stringify({ 'rs-a': [1], 'rs-b': [0] }),
  );
  expect(conditionOf(degraded, 'Degraded')?.message).toMatch(/partition 7 .*rs-b/);
  await warningEvent(cube, 'InvalidPin', 'partition 7');
  await expectAliveAndReconciling();

  await api.patchSpec(stack.namespace, cube, { pins: { 'rs-b': [0] } });
  const fixed = await stack.waitForSettled(cube);
  expect(conditionOf(fixed, 'Degraded')).toMatchObject({ status: 'False' });
  expect(fixed.status?.assignment).toEqual({ 'rs-a': [1], 'rs-b': [0] });
});

test('a topic that does not exist: Degraded TopicNotFound and an Event; creating it starts consumption', async () => {
  const cube = 'early';
  const topic = `events-missing-${randomUUID().slice(0, 8)}`;
  await stack.createCube(cube, topic, {
    replicaSets: ['rs-a', 'rs-b'],
    strategy: 'range',
  });

  const degraded = await stack.waitForCube(cube, 'Degraded TopicNotFound', (c) =>
    degradedWith(c, 'TopicNotFound'),
  );
  expect(conditionOf(degraded, 'Ready')).toMatchObject({ status: 'False' });
  expect(Object.values(degraded.status?.assignment ?? {}).flat()).toEqual([]);
  await warningEvent(cube, 'TopicNotFound', 'topic');
  await expectAliveAndReconciling();

  await stack.admin.createTopics({ topics: [{ topic, numPartitions: 3 }], waitForLeaders: true });
  const produced = await produceTo(topic, 3, 100);
  const settled = await stack.waitForSettled(
    cube,
    (c) => JSON.stringify(c.status?.assignment) === JSON.stringify({ 'rs-a': [0, 1], 'rs-b': [2] }),
  );
  expect(conditionOf(settled, 'Degraded')).toMatchObject({ status: 'False' });
  const hw = Object.fromEntries(await highWatermarks(kafka, topic));
  await waitForPositions(receivers['rs-a']!.client, cube, { 0: hw[0]!, 1: hw[1]! });
  await waitForPositions(receivers['rs-b']!.client, cube, { 2: hw[2]! });
  await expectQueriedTotals([receivers['rs-a']!.client, receivers['rs-b']!.client], cube, produced);
});

test('brokers that cannot be reached: Degraded SourceUnavailable naming them, not TopicNotFound', async () => {
  const cube = 'astray';
  const topic = await createTopic(stack.admin, 2);
  const nowhere = '127.0.0.39:9';
  const api = cubeApi(kc);
  await stack.createCube(cube, topic, {
    source: { ...source(topic), brokers: [nowhere] },
    replicaSets: ['rs-a', 'rs-b'],
    strategy: 'range',
  });

  const degraded = await stack.waitForCube(
    cube,
    'Degraded',
    (c) => conditionOf(c, 'Degraded')?.status === 'True',
  );
  expect(conditionOf(degraded, 'Degraded')).toMatchObject({ reason: 'SourceUnavailable' });
  expect(conditionOf(degraded, 'Degraded')?.message).toContain(nowhere);
  expect(conditionOf(degraded, 'Degraded')?.message).toContain(topic);
  await warningEvent(cube, 'SourceUnavailable', nowhere);
  await expectAliveAndReconciling();

  await api.patchSpec(stack.namespace, cube, { source: source(topic) });
  const settled = await stack.waitForSettled(
    cube,
    (c) => JSON.stringify(c.status?.assignment) === JSON.stringify({ 'rs-a': [0], 'rs-b': [1] }),
  );
  expect(conditionOf(settled, 'Degraded')).toMatchObject({ status: 'False' });
});
