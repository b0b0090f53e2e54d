// spec.approval: manual against the real operator, API server, receivers and broker, under steady
// load: an edit of pins becomes status.proposal and nothing moves however often the operator
// reconciles; an edit since replaces the proposal, and an approval of the replaced one starts
// nothing but a Warning naming the current one; the current one approved moves exactly its
// partitions. Then a second proposal is approved and the leader dies right after journaling it:
// the standby resumes the move to Done, and every event is counted once.
import type { CoreV1Event } from '@kubernetes/client-node';
import { approveAnnotation, type CubeAssignment } from '../../src/api/cube-assignment.ts';
import { cubeApi, conditionOf, kubectl, recordVersions } from '../support/cluster.ts';
import { useOperatorStack } from '../support/operator-stack.ts';
import { assigned, expectLoadedCubeExact, loadedCube, useLoads } from '../support/loaded-cube.ts';
import { metricValue } from '../support/receiver-checks.ts';
import type { SteadyLoad } from '../support/load.ts';
import { waitFor } from '../support/wait.ts';

const stack = useOperatorStack({
  name: 'plan-approval',
  replicaSets: ['rs-a', 'rs-b'],
  // The second approved move kills the leader right after its journal is written.
  operatorEnv: { STREAMCUBE_FAULT: 'approval-journaled:2' },
});
const suite = useLoads(stack);
const cube = 'orders';
const api = () => cubeApi(stack.kc);

let topic: string;
let load: SteadyLoad;
let recording: Awaited<ReturnType<typeof recordVersions>> | undefined;

afterAll(() => recording?.stop());

/** Waits until the operator wrote a proposal for the cube's current generation. */
const proposedForSpec = (): Promise<CubeAssignment> =>
  stack.waitForCube(
    cube,
    'a proposal of the current spec',
    (c) => c.status?.proposal?.generation === c.metadata?.generation,
  );

const approve = (id: string): Promise<string> =>
  kubectl(
    'annotate',
    'cube',
    cube,
    '-n',
    stack.namespace,
    `${approveAnnotation}=${id}`,
    '--overwrite',
  );

/** The cube's Events of `reason`. */
const eventsOf = async (reason: string): Promise<CoreV1Event[]> =>
  (await stack.cubeEvents(cube)).filter((e) => e.reason === reason);

/** Lets the operator reconcile the cube `n` more times (it resyncs every second in tests). */
async function reconcilesPass(n: number): Promise<void> {
  const from = await stack.operator.reconciles();
  await waitFor(
    `${n} more reconciles`,
    async () => (await stack.operator.reconciles()) >= from + n,
  );
}

/** Journals the recording has seen since it started. */
const journalsSeen = () =>
  recording!.versions.flatMap((v) => (v.cube.status?.reassign ? [v.cube.status.reassign] : []));

test('manual: a pins edit is proposed, and nothing moves while it waits', async () => {
  ({ topic, load } = await loadedCube(stack, suite, cube, Date.UTC(2026, 2, 1)));
  await api().patchSpec(stack.namespace, cube, { approval: 'manual' });
  const manual = await stack.waitForSettled(cube);
  recording = await recordVersions(
    stack.kc,
    stack.namespace,
    cube,
    manual.metadata?.resourceVersion,
  );

  const edited = await api().patchSpec(stack.namespace, cube, { pins: { 'rs-a': [0, 1, 2] } });
  const proposed = await proposedForSpec();
  const proposal = proposed.status!.proposal!;
  expect(proposal).toMatchObject({
    id: expect.stringMatching(new RegExp(`^p-${edited.metadata?.generation}-`)) as string,
    moves: [{ partition: 2, from: 'rs-b', to: 'rs-a' }],
    replicaSets: ['rs-a', 'rs-b'],
  });
  expect(conditionOf(proposed, 'Progressing')).toMatchObject({
    status: 'False',
    reason: 'AwaitingApproval',
  });
  expect(conditionOf(proposed, 'Progressing')?.message).toContain(
    `${approveAnnotation}=${proposal.id}`,
  );
  expect(conditionOf(proposed, 'Ready')?.status).toBe('True');
  expect(await kubectl('get', 'cube', cube, '-n', stack.namespace, '-o', 'wide')).toMatch(
    new RegExp(`PROPOSAL[\\s\\S]*\\s${proposal.id}\\s`),
  );
  // The edit is not applied yet.
  expect(proposed.status?.observedGeneration).toBeLessThan(proposed.metadata.generation!);

  // Resync after resync, the operator plans the same move again, and starts nothing.
  await reconcilesPass(5);
  const held = await api().get(stack.namespace, cube);
  expect(journalsSeen()).toEqual([]);
  expect(held.status?.assignment).toEqual({ 'rs-a': [0, 1], 'rs-b': [2, 3] });
  expect(held.status?.epochs).toEqual({ '0': 1, '1': 1, '2': 1, '3': 1 });
  // The same proposal, as first written: no flapping.
  expect(held.status?.proposal).toEqual(proposal);
  const p2 = (await stack.receivers['rs-b']!.client.cubeStatus(cube)).partitions.find(
    (p) => p.partition === 2,
  );
  expect(p2?.state).toBe('consuming');
  expect((await eventsOf('ReassignProposed')).map((e) => e.message)).toEqual([
    expect.stringContaining(proposal.id) as string,
  ]);
});

let current = '';

test('an edit replaces the proposal; approving the replaced one starts nothing but a Warning', async () => {
  const replaced = (await api().get(stack.namespace, cube)).status!.proposal!.id;
  await api().patchSpec(stack.namespace, cube, { pins: { 'rs-a': [0, 1, 3] } });
  const proposed = await proposedForSpec();
  current = proposed.status!.proposal!.id;
  expect(current).not.toBe(replaced);
  expect(proposed.status?.proposal?.moves).toEqual([{ partition: 3, from: 'rs-b', to: 'rs-a' }]);

  await approve(replaced);
  const warnings = await waitFor('a Warning ApprovalStale', async () => {
    const found = await eventsOf('ApprovalStale');
    return found.length > 0 ? found : undefined;
  });
  expect(warnings.map((e) => [e.type, e.message])).toEqual([
    [
      'Warning',
      `${approveAnnotation}=${replaced} names no current proposal, so nothing was started: the current proposal is ${current} (generation ${proposed.metadata?.generation}: 3 rs-b→rs-a)`,
    ],
  ]);
  await reconcilesPass(3);
  const after = await api().get(stack.namespace, cube);
  expect(journalsSeen()).toEqual([]);
  expect(after.status?.assignment).toEqual({ 'rs-a': [0, 1], 'rs-b': [2, 3] });
  expect(after.status?.proposal?.id).toBe(current);
  // Nothing changed: the annotation is the user's to correct.
  expect(after.metadata?.annotations?.[approveAnnotation]).toBe(replaced);
});

test('the current proposal approved: exactly its move runs to Done', async () => {
  await approve(current);
  // Settled, and Progressing back to Stable: the journal's completion and the next pass's
  // conditions are two status writes, the second maybe a resync later on a loaded machine.
  const placed = assigned({ 'rs-a': [0, 1, 3], 'rs-b': [2] });
  const settled = await stack.waitForSettled(
    cube,
    (c) =>
      placed(c) &&
      conditionOf(c, 'Progressing')?.reason === 'Stable' &&
      c.metadata?.annotations?.[approveAnnotation] === undefined,
  );
  expect(settled.status?.epochs).toEqual({ '0': 1, '1': 1, '2': 1, '3': 2 });
  expect(settled.status?.proposal).toBeUndefined();
  expect(settled.metadata?.annotations?.[approveAnnotation]).toBeUndefined();
  const journals = journalsSeen();
  expect(new Set(journals.map((j) => j.proposal))).toEqual(new Set([current]));
  for (const j of journals) expect(j.moves).toEqual([{ partition: 3, from: 'rs-b', to: 'rs-a' }]);
  expect((await eventsOf('ReassignPlanned')).map((e) => e.message)).toEqual([
    expect.stringContaining(`(proposal ${current}, approved)`) as string,
  ]);
});

test('approved, the leader killed before Done: the standby resumes the move, exact', async () => {
  const leader = stack.operator;
  const standby = await stack.startOperator();
  await api().patchSpec(stack.namespace, cube, { replicaSets: ['rs-b'], pins: null });
  const proposal = (await proposedForSpec()).status!.proposal!;
  expect(proposal.moves).toEqual([
    { partition: 0, from: 'rs-a', to: 'rs-b' },
    { partition: 1, from: 'rs-a', to: 'rs-b' },
    { partition: 3, from: 'rs-a', to: 'rs-b' },
  ]);

  await approve(proposal.id);
  await leader.waitForExit();
  expect(leader.exitSignal).toBe('SIGKILL');
  // The journal is written, the approval not yet acted on any further.
  const crashed = await api().get(stack.namespace, cube);
  expect(crashed.status?.reassign).toMatchObject({
    phase: 'Pausing',
    proposal: proposal.id,
    moves: proposal.moves,
  });
  expect(crashed.status?.proposal).toBeUndefined();
  expect(crashed.metadata?.annotations?.[approveAnnotation]).toBe(proposal.id);

  // Moved, and the approval acted on removed (by whichever process ran the journal).
  const movedAll = assigned({ 'rs-b': [0, 1, 2, 3] });
  const settled = await stack.waitForSettled(
    cube,
    (c) => movedAll(c) && c.metadata?.annotations?.[approveAnnotation] === undefined,
  );
  expect(settled.status?.epochs).toEqual({ '0': 2, '1': 2, '2': 1, '3': 3 });
  expect(settled.metadata?.annotations?.[approveAnnotation]).toBeUndefined();
  expect(
    metricValue(await standby.metrics(), 'streamcube_reassigns_total', {
      namespace: stack.namespace,
      cube,
      result: 'completed',
    }),
  ).toBe(1);
  expect(recording!.failure()).toBeUndefined();

  await expectLoadedCubeExact(stack, { cube, topic, load, owned: { 'rs-b': [0, 1, 2, 3] } });
});
