// A deposed operator is fenced. The leader freezes (SIGSTOP at a fault point) in the middle of a
// move, right before it asks the source to drain; its lease runs out and the other operator takes
// over at a higher term, finishes that move and moves the partition back. Thawed (SIGCONT), the
// old leader goes on where it stopped — a drain of a partition that is live again on that replica
// set — and every receiver refuses it (409 StaleLeader, counted); it stops leading and exits, the
// cube keeps its placement and consumes on, and the data is exact: nothing lost, nothing twice.
import type { CubeAssignment } from '../../src/api/cube-assignment.ts';
import { ReceiverApiError } from '../../src/protocol/client.ts';
import { testEnvironment } from '../env/connection.ts';
import { PausableApiProxy } from '../support/api-proxy.ts';
import { cubeApi, leaseHolder, waitForSettled, type OperatorProcess } from '../support/cluster.ts';
import { expectLoadedCubeExact, useLoads } from '../support/loaded-cube.ts';
import { createTopic, testSchema } from '../support/events.ts';
import { SteadyLoad } from '../support/load.ts';
import { useOperatorStack } from '../support/operator-stack.ts';
import { metricValue } from '../support/receiver-checks.ts';
import type { ReceiverProcess } from '../support/receiver-process.ts';
import { waitFor } from '../support/wait.ts';

const cube = 'orders';
const lease = 'streamcube-operator';
// The first leader freezes when it enters Draining: the move of partition 2 off rs-b (a first
// placement has nothing to drain and goes from Pausing to Starting).
// It talks to the API server through a proxy that the test silences when it thaws it: the thawed
// leader cannot read the Lease and find out that it lost it before its next call reaches a
// receiver, which is the receivers' fence to show. (Through a connection of its own, its read of
// the Lease may come first: it then stops before calling, which is right but shows nothing.)
const proxy = new PausableApiProxy();
await proxy.start(testEnvironment().kube.kubeconfig);
const stack = useOperatorStack({
  name: 'op-fencing',
  replicaSets: ['rs-a', 'rs-b'],
  replicas: 2,
  operatorEnv: { STREAMCUBE_FAULT: 'reassign-Draining', STREAMCUBE_FAULT_SIGNAL: 'SIGSTOP' },
  operatorKubeconfig: proxy.kubeconfig,
});

const suite = useLoads(stack);
let load: SteadyLoad;
let topic: string;

const assigned = (c: CubeAssignment, expected: Record<string, number[]>): boolean =>
  JSON.stringify(c.status?.assignment) === JSON.stringify(expected);

const allReceivers = (): ReceiverProcess[] => Object.values(stack.replicas).flat();

/** One metric of the cube on every receiver, summed. */
async function receiverMetric(name: string): Promise<number> {
  let total = 0;
  for (const r of allReceivers()) {
    const text = await (await fetch(`${r.baseUrl}/metrics`)).text();
    total += metricValue(text, name, { cube }) ?? 0;
  }
  return total;
}

/** The term an operator logged when it started leading. */
function leadingTerm(op: OperatorProcess): number | undefined {
  for (const line of op.log().split('\n')) {
    if (!line.includes('leading: reconciling cube assignments')) continue;
    return (JSON.parse(line) as { term?: number }).term;
  }
  return undefined;
}

/** The states of the cube's partitions on a receiver, `absent` when it does not hold the cube. */
async function states(r: ReceiverProcess): Promise<Record<number, string> | 'absent'> {
  try {
    const status = await r.client.cubeStatus(cube);
    return Object.fromEntries(status.partitions.map((p) => [p.partition, p.state]));
  } catch (error) {
    if (error instanceof ReceiverApiError && error.status === 404) return 'absent';
    throw error;
  }
}

beforeAll(async () => {
  topic = await createTopic(stack.admin, 4);
  load = new SteadyLoad(suite.producer(), topic, 4, 10, 100);
  suite.loads.push(load);
});

afterAll(() => proxy.close());

test('a leader frozen mid-move past its lease is refused by every receiver once thawed; the new leader moves away and back; data exact', async () => {
  const { kc, namespace } = stack;
  const old = stack.operator;
  await waitFor('the first operator to lead', async () =>
    (await leaseHolder(kc, namespace, lease)) === old.identity ? true : undefined,
  );
  const successor = await stack.startOperator();

  load.start(Date.UTC(2026, 1, 1));
  const api = cubeApi(kc);
  await api.create(namespace, cube, {
    source: { brokers: [stack.env.kafka.bootstrap], topic, startingOffsets: 'earliest' },
    schema: testSchema,
    replicaSets: ['rs-a', 'rs-b'],
    strategy: 'range',
  });
  await waitForSettled(kc, namespace, cube, (c) => assigned(c, { 'rs-a': [0, 1], 'rs-b': [2, 3] }));
  // The first leader's term: the Lease's leaseTransitions when it created it.
  expect(leadingTerm(old)).toBe(0);

  // Move 1 (partition 2: rs-b → rs-a): the leader pauses it on rs-b and freezes before the drain.
  await api.patchSpec(namespace, cube, { pins: { 'rs-a': [0, 1, 2] } });
  await waitFor('the leader to freeze in Draining', () =>
    Promise.resolve(old.stopped || undefined),
  );
  const frozen = await api.get(namespace, cube);
  expect(frozen.status?.reassign).toMatchObject({ phase: 'Draining', moves: [{ partition: 2 }] });

  // Its lease runs out: the successor leads at a higher term and finishes the move…
  await waitFor(
    'the successor to take the lease',
    async () =>
      (await leaseHolder(kc, namespace, lease)) === successor.identity ? true : undefined,
    30_000,
  );
  await waitForSettled(kc, namespace, cube, (c) => assigned(c, { 'rs-a': [0, 1, 2], 'rs-b': [3] }));
  expect(leadingTerm(successor)).toBe(1);
  // … then moves partition 2 back to rs-b, where it is live again under a new epoch.
  await api.patchSpec(namespace, cube, { pins: null });
  const back = await waitForSettled(kc, namespace, cube, (c) =>
    assigned(c, { 'rs-a': [0, 1], 'rs-b': [2, 3] }),
  );
  expect(back.status?.epochs?.['2']).toBe(3);
  for (const r of allReceivers()) {
    const text = await (await fetch(`${r.baseUrl}/metrics`)).text();
    expect([r.options.id, metricValue(text, 'streamcube_receiver_leader_term', { cube })]).toEqual([
      r.options.id,
      1,
    ]);
  }
  expect(await receiverMetric('streamcube_receiver_stale_leader_requests_total')).toBe(0);

  // Thawed, with the API server silent to it, the old leader goes on with its drain of partition
  // 2 on rs-b at term 0: refused.
  proxy.pause();
  old.child?.kill('SIGCONT');
  await waitFor(
    'a receiver to refuse the thawed leader',
    async () =>
      (await receiverMetric('streamcube_receiver_stale_leader_requests_total')) > 0 || undefined,
    20_000,
  );
  proxy.resume();
  await old.waitForExit(30_000);
  expect(old.child?.exitCode).toBe(1);
  // It stopped leading on the refusal (or on reading the Lease once it could again, the refusal
  // under way), at once and without reporting the phase blocked.
  expect(old.log()).toMatch(
    /a receiver refused a call as coming from a stale leader|lost leader lease/,
  );
  expect(old.log()).not.toMatch(/"message":"reassign blocked"/);

  // Nothing it started took effect: partition 2 consumes on both replicas of rs-b, still owned
  // there, and the successor keeps leading.
  for (const r of stack.replicas['rs-b']!) {
    expect([r.options.id, await states(r)]).toEqual([
      r.options.id,
      { 2: 'consuming', 3: 'consuming' },
    ]);
  }
  for (const r of stack.replicas['rs-a']!) {
    const held = await states(r);
    expect([r.options.id, held]).toEqual([
      r.options.id,
      expect.objectContaining({ 0: 'consuming', 1: 'consuming' }),
    ]);
    expect(held !== 'absent' && held[2]).not.toBe('consuming');
  }
  const after = await waitForSettled(kc, namespace, cube);
  expect(after.status?.assignment).toEqual({ 'rs-a': [0, 1], 'rs-b': [2, 3] });
  expect(await leaseHolder(kc, namespace, lease)).toBe(successor.identity);

  await expectLoadedCubeExact(stack, {
    cube,
    topic,
    load,
    owned: { 'rs-a': [0, 1], 'rs-b': [2, 3] },
  });
});
