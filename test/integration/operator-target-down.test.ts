// The target of a move is down when the move starts: first its pod still Ready while the process
// refuses connections (a crash the readiness probe has not noticed yet), then its pod not Ready.
// The reassign waits in Starting with Degraded=True naming the receiver and a Warning Event, and
// completes, exact and tiled, once the receiver is back on its data directory.
import { setTimeout as sleep } from 'node:timers/promises';
import { highWatermarks, totalsOf } from '../support/events.ts';
import {
  conditionOf,
  cubeApi,
  cubeEvents,
  kubectl,
  setPodReady,
  waitForCube,
  waitForSettled,
} from '../support/cluster.ts';
import { waitForPositions } from '../support/receiver-checks.ts';
import { expectExactAndTiled } from '../support/cube-audit.ts';
import { useOperatorStack } from '../support/operator-stack.ts';
import { assigned, loadedCube, useLoads } from '../support/loaded-cube.ts';

const stack = useOperatorStack({ name: 'op-down', replicaSets: ['rs-a', 'rs-b'] });
const { kc, kafka, receivers } = stack;
const suite = useLoads(stack);
const cube = 'orders';

test('a move whose target receiver is down waits in Starting, Degraded, and completes when it is back', async () => {
  const { topic, load } = await loadedCube(stack, suite, cube, Date.UTC(2026, 2, 1));
  const api = cubeApi(kc);

  // rs-b-0 crashes; its pod stays Ready (no probe has failed yet), so the planner counts on it.
  const target = receivers['rs-b']!;
  await target.kill('SIGKILL');
  await api.patchSpec(stack.namespace, cube, { pins: { 'rs-b': [0, 1, 2, 3] } });

  let cube1 = await waitForCube(
    kc,
    stack.namespace,
    cube,
    'Degraded=True with reason StartFailed',
    (c) =>
      conditionOf(c, 'Degraded')?.status === 'True' &&
      conditionOf(c, 'Degraded')?.reason === 'StartFailed',
  );
  expect(cube1.status?.reassign?.phase).toBe('Starting');
  const degraded = conditionOf(cube1, 'Degraded')!;
  expect(degraded.message).toContain('receiver rs-b-0 (rs-b)');
  expect(degraded.message).toMatch(/ECONNREFUSED/);
  expect(degraded.message).toContain('partitions 0, 1 (released by rs-a) wait for rs-b');
  expect(conditionOf(cube1, 'Ready')).toMatchObject({ status: 'False', reason: 'StartFailed' });
  const warnings = (await cubeEvents(kc, stack.namespace, cube)).filter(
    (e) => e.type === 'Warning',
  );
  expect(warnings.map((e) => e.reason)).toContain('StartFailed');
  const described = await kubectl('describe', 'cubeassignment', cube, '-n', stack.namespace);
  expect(described).toMatch(/Warning\s+StartFailed\s+.*rs-b-0/);

  // Retries (every 2 s) keep it there: Starting only rolls forward, the sources already released.
  await sleep(4_500);
  cube1 = await api.get(stack.namespace, cube);
  expect(cube1.status?.reassign?.phase).toBe('Starting');
  expect(conditionOf(cube1, 'Degraded')?.reason).toBe('StartFailed');
  expect(cube1.status?.epochs).toEqual({ '0': 1, '1': 1, '2': 1, '3': 1 });

  // The readiness probe notices: discovery drops the pod, the reason says so.
  await setPodReady(kc, stack.namespace, 'rs-b-0', target.options.host!, false);
  cube1 = await waitForCube(
    kc,
    stack.namespace,
    cube,
    'Degraded=True with reason TargetReceiverUnavailable',
    (c) => conditionOf(c, 'Degraded')?.reason === 'TargetReceiverUnavailable',
  );
  expect(cube1.status?.reassign?.phase).toBe('Starting');
  expect(conditionOf(cube1, 'Degraded')?.message).toContain(
    'replica set rs-b (target of a move) has no ready receiver; partitions 0, 1 (released by rs-a) wait for rs-b',
  );

  // Back on the same data directory: it resumes partitions 2 and 3 from its checkpoint and takes
  // 0 and 1 from the stop offsets.
  await target.start();
  await setPodReady(kc, stack.namespace, 'rs-b-0', target.options.host!, true);
  const settled = await waitForSettled(
    kc,
    stack.namespace,
    cube,
    assigned({ 'rs-a': [], 'rs-b': [0, 1, 2, 3] }),
  );
  expect(settled.status?.epochs).toEqual({ '0': 2, '1': 2, '2': 1, '3': 1 });
  expect(conditionOf(settled, 'Degraded')).toMatchObject({ status: 'False' });
  expect(conditionOf(settled, 'Ready')).toMatchObject({ status: 'True' });
  // Both reassigns completed: one Event, its count bumped by the second (client-go's correlation).
  const completed = (await cubeEvents(kc, stack.namespace, cube)).filter(
    (e) => e.reason === 'ReassignCompleted',
  );
  expect(completed.map((e) => e.count)).toEqual([2]);

  await load.stop();
  const hw = await highWatermarks(kafka, topic);
  await waitForPositions(target.client, cube, Object.fromEntries(hw));
  await expectExactAndTiled({
    cube,
    deepStorageDir: stack.deepStorageDir,
    replicaSets: { 'rs-a': [receivers['rs-a']!], 'rs-b': [target] },
    highWatermarks: hw,
    expected: totalsOf(load.all()),
  });
});
