// Per-replica convergence (issue 9, item 1), on real receivers, two replicas per replica set,
// under continuous load: in each phase of a move one source replica is killed (kill -9, its pod
// NotReady, as a kubelet would mark it) and comes back in the next phase, having missed that one;
// then a target replica misses Starting. The operator is stopped at phase boundaries by its fault
// points, so each replica misses exactly the phase named. At the end: every event counted once,
// every replica's offsets tile every partition's log across the sets, and every replica that owns
// partitions keeps sealing windows.
import type { CubeAssignment, ReassignPhase } from '../../src/api/cube-assignment.ts';
import { nextPhase } from '../../src/operator/reassign/index.ts';
import { ReceiverApiError } from '../../src/protocol/client.ts';
import { cubeApi, cubeEvents, waitForSettled } from '../support/cluster.ts';
import { assigned, expectLoadedCubeExact, loadedCube, useLoads } from '../support/loaded-cube.ts';
import { bringBack, takeDown, useOperatorStack } from '../support/operator-stack.ts';
import { metricValue } from '../support/receiver-checks.ts';
import type { ReceiverProcess } from '../support/receiver-process.ts';
import { waitFor } from '../support/wait.ts';

// Hour windows (testSchema): none seals while the load runs, so no moved partition meets a window
// its new set sealed already (issue 9, item 8). Once the load stops, every partition that is
// consuming falls silent and every window seals after the idle timeout; a partition left paused or
// stopped on a replica never counts as idle, so that replica would seal nothing.
const stack = useOperatorStack({
  name: 'replica-repair',
  replicaSets: ['rs-a', 'rs-b'],
  replicas: 2,
  receiver: { idleTimeout: '10s' },
});

const suite = useLoads(stack);

/**
 * Moves to `pins` with `replica` missing `phase`: an operator stops as the phase begins, the
 * replica goes down, a second operator runs the phase without it and stops as the next begins,
 * the replica comes back, and a third operator finishes the move.
 */
async function moveMissing(
  cube: string,
  pins: Record<string, number[]>,
  phase: ReassignPhase,
  replica: ReceiverProcess,
): Promise<CubeAssignment> {
  await stack.operator.kill('SIGTERM');
  const before = await stack.startOperator({ STREAMCUBE_FAULT: `reassign-${phase}` });
  await cubeApi(stack.kc).patchSpec(stack.namespace, cube, { pins });
  await before.waitForExit();
  expect(before.exitSignal).toBe('SIGKILL');
  await takeDown(stack, replica);
  // The phase after it, or past the move's end when it is the last (Sealing writes the completion).
  const next = nextPhase[phase] === phase ? 'completed' : nextPhase[phase];
  const during = await stack.startOperator({ STREAMCUBE_FAULT: `reassign-${next}` });
  await during.waitForExit();
  expect(during.exitSignal).toBe('SIGKILL');
  await bringBack(stack, replica);
  stack.operator = await stack.startOperator();
  const expected = Object.fromEntries(
    ['rs-a', 'rs-b'].map((rs) => [rs, [...(pins[rs] ?? [])].sort((a, b) => a - b)]),
  );
  return waitForSettled(stack.kc, stack.namespace, cube, assigned(expected));
}

/** Newest window start that `r` holds sealed (IMMUTABLE or handed off), or -Infinity. */
/**
 * The key of the last segment `r` sealed (window start plus generation: a release seals the
 * windows holding what it released, and the kept partitions' later events open the next
 * generation of the same window).
 */
async function lastSealed(r: ReceiverProcess, cube: string): Promise<number> {
  const status = await r.client.cubeStatus(cube);
  return Math.max(
    -Infinity,
    ...status.segments
      .filter((s) => s.state !== 'ACTIVE')
      .map((s) => s.windowStart + (s.generation ?? 0)),
  );
}

test('replicas that miss a phase of a move are brought to their set state: totals exact, offsets tiled, windows sealing', async () => {
  const cube = 'repaired';
  const { topic, load } = await loadedCube(stack, suite, cube, Date.UTC(2026, 3, 1));
  const [, a1] = stack.replicas['rs-a']!;
  const [, b1] = stack.replicas['rs-b']!;

  // Source rs-a-1 misses Pausing (not paused; it comes back consuming, maybe past the stop).
  await moveMissing(cube, { 'rs-a': [1], 'rs-b': [0, 2, 3] }, 'Pausing', a1!);
  // Source rs-b-1 misses Draining (paused short of the stop offset).
  await moveMissing(cube, { 'rs-a': [0, 1], 'rs-b': [2, 3] }, 'Draining', b1!);
  // Source rs-a-1 misses Starting (drained, never released; rs-a keeps partition 0).
  await moveMissing(cube, { 'rs-a': [0], 'rs-b': [1, 2, 3] }, 'Starting', a1!);
  // Source rs-a-1 misses Sealing (rs-a loses its last partition: never sealed nor handed off).
  await moveMissing(cube, { 'rs-a': [], 'rs-b': [0, 1, 2, 3] }, 'Sealing', a1!);
  await waitFor('rs-a-1 sealed, handed off and dropped the cube', async () => {
    const held = await a1!.client.cubeStatus(cube).catch((e: unknown) => e);
    return held instanceof ReceiverApiError && held.status === 404;
  });
  // Target rs-a-1 misses Starting (never given partitions 0 and 1).
  const settled = await moveMissing(cube, { 'rs-a': [0, 1], 'rs-b': [2, 3] }, 'Starting', a1!);
  expect(settled.status?.epochs).toEqual({ '0': 5, '1': 3, '2': 1, '3': 1 });

  // Every replica holds its set's partitions, consuming, under the set's epochs.
  const owned: Record<string, number[]> = { 'rs-a': [0, 1], 'rs-b': [2, 3] };
  for (const [rs, replicas] of Object.entries(stack.replicas)) {
    for (const r of replicas) {
      await waitFor(`${r.options.id} consuming ${owned[rs]!.join(', ')}`, async () => {
        const held = (await r.client.cubeStatus(cube)).partitions
          .filter((p) => p.state !== 'released')
          .map((p) => [p.partition, p.state, p.epoch]);
        const wanted = owned[rs]!.map((p) => [p, 'consuming', settled.status!.epochs![p]]);
        return JSON.stringify(held) === JSON.stringify(wanted);
      });
    }
  }

  // Each repair was told: rs-a-1 released the partition whose release it missed, was sealed once
  // its set owned nothing, and took the partitions it missed as a target from the stop offsets.
  const repairs = (await cubeEvents(stack.kc, stack.namespace, cube))
    .filter((e) => e.reason === 'ReplicaRepaired')
    .map((e) => e.message ?? '');
  const told = "receiver rs-a-1 (rs-a) brought to its replica set's state: ";
  expect(repairs).toEqual(
    expect.arrayContaining([
      expect.stringContaining(`${told}released partition 1 at`),
      expect.stringContaining(
        `${told}sealed, handed off and dropped the cube, of which its set owns nothing`,
      ),
      expect.stringMatching(
        /^receiver rs-a-1 \(rs-a\) brought to its replica set's state: assigned 0 at [0-9]+ \(epoch 5\), 1 at [0-9]+ \(epoch 3\)$/,
      ),
    ]),
  );
  const metrics = await stack.operator.metrics();
  expect(
    metricValue(metrics, 'streamcube_operator_replica_repairs_total', {
      cube,
      replica_set: 'rs-a',
      repair: 'assign',
    }),
  ).toBe(1);

  // Windows keep sealing on every replica: once the load stops, each seals a segment it had not.
  await load.stop();
  const sealedBefore = new Map<ReceiverProcess, number>();
  for (const r of Object.values(stack.replicas).flat())
    sealedBefore.set(r, await lastSealed(r, cube));
  for (const [r, before] of sealedBefore) {
    await waitFor(
      `${r.options.id} seals a segment after ${before === -Infinity ? 'none' : `${new Date(before).toISOString()} (key ${before})`}`,
      async () => (await lastSealed(r, cube)) > before,
      60_000,
      500,
    );
  }

  // Every event once, every partition's log tiled, by replica 0 and by replica 1 of the sets.
  await expectLoadedCubeExact(stack, {
    cube,
    topic,
    load,
    owned,
  });
}, 300_000);
