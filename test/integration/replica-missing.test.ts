// Replicas and replica sets missing in the middle of a move (issue 9, items 2 and 4), on real
// receivers, two replicas per replica set:
// - every receiver of the source set stops right after Draining: the move blocks in Starting,
//   Degraded (SourceReplicaSetUnavailable) with a Warning Event, nothing is released or lost; the
//   set comes back on its volumes, the move completes and the totals are exact.
import type { Producer } from 'kafkajs';
import type { CubeAssignment } from '../../src/api/cube-assignment.ts';
import {
  conditionOf,
  cubeApi,
  cubeEvents,
  setPodReady,
  waitForCube,
  waitForSettled,
} from '../support/cluster.ts';
import { expectExactAndTiled } from '../support/cube-audit.ts';
import { createTopic, highWatermarks, testSchema, totalsOf } from '../support/events.ts';
import { SteadyLoad } from '../support/load.ts';
import { useOperatorStack } from '../support/operator-stack.ts';
import { waitForPositions } from '../support/receiver-checks.ts';
import type { ReceiverProcess } from '../support/receiver-process.ts';
import { waitFor } from '../support/wait.ts';

const stack = useOperatorStack({
  name: 'replica-missing',
  replicaSets: ['rs-a', 'rs-b'],
  replicas: 2,
});

let producer: Producer;
const loads: SteadyLoad[] = [];

beforeAll(async () => {
  producer = stack.kafka.producer();
  await producer.connect();
});

afterAll(async () => {
  for (const load of loads) await load.stop();
  await producer?.disconnect();
});

const assigned =
  (expected: Record<string, number[]>) =>
  (c: CubeAssignment): boolean =>
    JSON.stringify(c.status?.assignment) === JSON.stringify(expected);

async function setReady(r: ReceiverProcess, ready: boolean): Promise<void> {
  await setPodReady(stack.kc, stack.namespace, r.options.id, r.options.host!, ready);
}

/** A cube over a 4-partition topic under steady load, settled as range: rs-a 0,1 and rs-b 2,3. */
async function loadedCube(cube: string): Promise<{ topic: string; load: SteadyLoad }> {
  const topic = await createTopic(stack.admin, 4);
  const load = new SteadyLoad(producer, topic, 4, 10, 100);
  loads.push(load);
  load.start(Date.UTC(2026, 2, 1));
  await cubeApi(stack.kc).create(stack.namespace, cube, {
    source: { brokers: [stack.env.kafka.bootstrap], topic, startingOffsets: 'earliest' },
    schema: testSchema,
    replicaSets: ['rs-a', 'rs-b'],
    strategy: 'range',
  });
  await waitForSettled(
    stack.kc,
    stack.namespace,
    cube,
    assigned({ 'rs-a': [0, 1], 'rs-b': [2, 3] }),
  );
  return { topic, load };
}

/** Stops the load, waits for every replica of `owners` to reach the end, audits every replica. */
async function expectExact(
  cube: string,
  topic: string,
  load: SteadyLoad,
  owners: ReceiverProcess[],
): Promise<void> {
  await load.stop();
  const hw = await highWatermarks(stack.kafka, topic);
  for (const r of owners) await waitForPositions(r.client, cube, Object.fromEntries(hw));
  await expectExactAndTiled({
    cube,
    deepStorageDir: stack.deepStorageDir,
    replicaSets: stack.replicas,
    highWatermarks: hw,
    expected: totalsOf(load.all()),
  });
}

test('every receiver of the source set stops after Draining: the move blocks, Degraded, and completes when the set is back', async () => {
  const cube = 'lost-source';
  const { topic, load } = await loadedCube(cube);
  const api = cubeApi(stack.kc);

  // An operator that dies as it enters Starting: the sources are drained, nothing is released.
  await stack.operator.kill('SIGTERM');
  const doomed = await stack.startOperator({ STREAMCUBE_FAULT: 'reassign-Starting' });
  await api.patchSpec(stack.namespace, cube, { pins: { 'rs-b': [0, 1, 2, 3] } });
  await doomed.waitForExit();
  expect(doomed.exitSignal).toBe('SIGKILL');

  // The whole source set goes away; a new operator resumes the journal at Starting.
  const sources = stack.replicas['rs-a']!;
  for (const r of sources) {
    await setReady(r, false);
    await r.stop();
  }
  stack.operator = await stack.startOperator();
  let blocked = await waitForCube(
    stack.kc,
    stack.namespace,
    cube,
    'Degraded=True with reason SourceReplicaSetUnavailable',
    (c) => conditionOf(c, 'Degraded')?.reason === 'SourceReplicaSetUnavailable',
  );
  const message =
    'replica set rs-a (source of partitions 0, 1) has no ready receiver; partitions 0, 1, drained to their stop offsets, cannot be released';
  expect(conditionOf(blocked, 'Degraded')?.message).toContain(message);
  expect(conditionOf(blocked, 'Ready')).toMatchObject({
    status: 'False',
    reason: 'SourceReplicaSetUnavailable',
  });
  const warnings = (await cubeEvents(stack.kc, stack.namespace, cube)).filter(
    (e) => e.type === 'Warning' && e.reason === 'SourceReplicaSetUnavailable',
  );
  expect(warnings.map((e) => e.message)).toEqual([expect.stringContaining(message)]);

  // Retried, it stays there: nothing released, the assignment and epochs unchanged.
  const reconciles = await stack.operator.reconciles();
  await waitFor('three more reconciles', async () => {
    return (await stack.operator.reconciles()) >= reconciles + 3;
  });
  blocked = await api.get(stack.namespace, cube);
  expect(blocked.status?.reassign?.phase).toBe('Starting');
  expect(conditionOf(blocked, 'Degraded')?.reason).toBe('SourceReplicaSetUnavailable');
  expect(blocked.status?.assignment).toEqual({ 'rs-a': [0, 1], 'rs-b': [2, 3] });
  expect(blocked.status?.epochs).toEqual({ '0': 1, '1': 1, '2': 1, '3': 1 });

  // Back on its volumes: the set releases, rs-b takes 0 and 1, rs-a seals and hands off.
  for (const r of sources) {
    await r.start();
    await setReady(r, true);
  }
  const settled = await waitForSettled(
    stack.kc,
    stack.namespace,
    cube,
    assigned({ 'rs-a': [], 'rs-b': [0, 1, 2, 3] }),
  );
  expect(settled.status?.epochs).toEqual({ '0': 2, '1': 2, '2': 1, '3': 1 });
  expect(conditionOf(settled, 'Degraded')).toMatchObject({ status: 'False' });
  await expectExact(cube, topic, load, stack.replicas['rs-b']!);
});
