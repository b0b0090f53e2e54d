// Replicas and replica sets missing in the middle of a move (issue 9, items 2 and 4), on real
// receivers, two replicas per replica set:
// - a replica whose data directory was wiped answers 404 for the cube: a move off its set goes
//   on without it (a Warning Event, counted), and once the move is done the operator gives it the
//   cube at its sibling's positions;
// - every receiver of the source set stops right after Draining: the move blocks in Starting,
//   Degraded (SourceReplicaSetUnavailable) with a Warning Event, nothing is released or lost; the
//   set comes back on its volumes, the move completes and the totals are exact.
import { mkdirSync, rmSync } from 'node:fs';
import { conditionOf, cubeApi, setPodReady } from '../support/cluster.ts';
import { expectExactAndTiled } from '../support/cube-audit.ts';
import { highWatermarks, totalsOf } from '../support/events.ts';
import type { SteadyLoad } from '../support/load.ts';
import { assigned, loadedCube, useLoads } from '../support/loaded-cube.ts';
import { useOperatorStack } from '../support/operator-stack.ts';
import { metricValue, waitForPositions } from '../support/receiver-checks.ts';
import { rangesFromJson, tilingProblems } from '../../src/receiver/offset-ranges.ts';
import type { ReceiverProcess } from '../support/receiver-process.ts';
import { waitFor } from '../support/wait.ts';

const stack = useOperatorStack({
  name: 'replica-missing',
  replicaSets: ['rs-a', 'rs-b'],
  replicas: 2,
});

const suite = useLoads(stack);

async function setReady(r: ReceiverProcess, ready: boolean): Promise<void> {
  await setPodReady(stack.kc, stack.namespace, r.options.id, r.options.host!, ready);
}

/** A cube over a 4-partition topic under steady load, settled as range: rs-a 0,1 and rs-b 2,3. */
const loadedReplicaCube = (cube: string): Promise<{ topic: string; load: SteadyLoad }> =>
  loadedCube(stack, suite, cube, Date.UTC(2026, 2, 1));

/**
 * Stops the load, waits for each owner to reach the end of its partitions, and audits the replicas
 * listed in `replicaSets` (replica i of each set together): exact totals, offsets tiled.
 */
async function expectExact(
  cube: string,
  topic: string,
  load: SteadyLoad,
  owners: [ReceiverProcess, number[]][],
  replicaSets: Record<string, ReceiverProcess[]> = stack.replicas,
): Promise<Map<number, bigint>> {
  await load.stop();
  const hw = await highWatermarks(stack.kafka, topic);
  for (const [r, partitions] of owners) {
    const ends = Object.fromEntries(partitions.map((p) => [p, hw.get(p)!]));
    await waitForPositions(r.client, cube, ends);
  }
  await expectExactAndTiled({
    cube,
    deepStorageDir: stack.deepStorageDir,
    replicaSets,
    highWatermarks: hw,
    expected: totalsOf(load.all()),
  });
  return hw;
}

test('a replica whose data directory was wiped answers 404: a move off its set goes on without it, and it gets the cube back', async () => {
  const cube = 'wiped-replica';
  const { topic, load } = await loadedReplicaCube(cube);
  const api = cubeApi(stack.kc);
  const [a0, a1] = stack.replicas['rs-a']!;
  const [b0, b1] = stack.replicas['rs-b']!;

  // rs-a-1 crashes, its pod still Ready: the move of partition 0 off rs-a blocks on its pause.
  await a1!.kill('SIGKILL');
  await api.patchSpec(stack.namespace, cube, { pins: { 'rs-a': [1], 'rs-b': [0, 2, 3] } });
  await stack.waitForCube(
    cube,
    'Degraded=True with reason PauseFailed naming rs-a-1',
    (c) =>
      conditionOf(c, 'Degraded')?.reason === 'PauseFailed' &&
      (conditionOf(c, 'Degraded')?.message ?? '').includes('rs-a-1'),
  );

  // It comes back on an empty volume: it holds no cube (404), so rs-a-0 alone carries the move.
  rmSync(a1!.dataDir, { recursive: true, force: true });
  mkdirSync(a1!.dataDir, { recursive: true });
  await a1!.start();
  const settled = await stack.waitForSettled(cube, assigned({ 'rs-a': [1], 'rs-b': [0, 2, 3] }));
  expect(settled.status?.epochs).toEqual({ '0': 2, '1': 1, '2': 1, '3': 1 });
  const missing = (await stack.cubeEvents(cube)).filter((e) => e.reason === 'CubeNotOnReceiver');
  expect(missing).toHaveLength(1);
  expect(missing[0]).toMatchObject({ type: 'Warning', count: 1 });
  expect(missing[0]!.message).toMatch(
    /^receiver rs-a-1 \(rs-a\) does not hold the cube: it has no data of partition 0, so reassign \S+ goes on without it/,
  );
  const metrics = await stack.operator.metrics();
  const labels = { cube, replica_set: 'rs-a' };
  expect(metricValue(metrics, 'streamcube_operator_replica_cube_missing_total', labels)).toBe(1);

  // Once the move is done, observe gives rs-a-1 the cube at rs-a-0's positions: partition 1.
  const restored = await waitFor('rs-a-1 given the cube', async () =>
    (await stack.cubeEvents(cube)).find((e) => e.reason === 'CubeRestoredOnReceiver'),
  );
  expect(restored.message).toMatch(
    /^receiver rs-a-1 \(rs-a\) did not hold the cube: given partition 1 at [0-9]+, the positions of rs-a-0$/,
  );
  const start = BigInt(/ at ([0-9]+),/.exec(restored.message!)![1]!);
  const held = await a1!.client.cubeStatus(cube);
  expect(held.partitions.map((p) => [p.partition, p.state, p.epoch])).toEqual([
    [1, 'consuming', 1],
  ]);

  // Replica 0 of each set holds every event once; rs-a-1 holds partition 1 from where it was
  // given it (its copy of the earlier offsets went with its volume: rs-a-0's is the data).
  const hw = await expectExact(
    cube,
    topic,
    load,
    [
      [a0!, [1]],
      [a1!, [1]],
      [b0!, [0, 2, 3]],
      [b1!, [0, 2, 3]],
    ],
    { 'rs-a': [a0!], 'rs-b': [b0!] },
  );
  const ranges = (await a1!.client.cubeStatus(cube)).segments.flatMap((s) =>
    rangesFromJson(s.offsetRanges['1'] ?? []),
  );
  expect(tilingProblems(ranges, start, hw.get(1)!)).toEqual([]);
});

test('every receiver of the source set stops after Draining: the move blocks, Degraded, and completes when the set is back', async () => {
  const cube = 'lost-source';
  const { topic, load } = await loadedReplicaCube(cube);
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
  let blocked = await stack.waitForCube(
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
  const warnings = (await stack.cubeEvents(cube)).filter(
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
  const settled = await stack.waitForSettled(cube, assigned({ 'rs-a': [], 'rs-b': [0, 1, 2, 3] }));
  expect(settled.status?.epochs).toEqual({ '0': 2, '1': 2, '2': 1, '3': 1 });
  expect(conditionOf(settled, 'Degraded')).toMatchObject({ status: 'False' });
  await expectExact(
    cube,
    topic,
    load,
    stack.replicas['rs-b']!.map((r) => [r, [0, 1, 2, 3]]),
  );
});
