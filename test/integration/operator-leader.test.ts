// Two `streamcube operator` processes on one Lease: only the holder reconciles; a holder killed
// with SIGKILL is succeeded after the lease duration and its successor finishes a move asked for
// after the kill; a holder stopped with SIGTERM releases the Lease so a third takes over at once.
import { setTimeout as sleep } from 'node:timers/promises';
import { logLevel, type Admin, type Producer } from 'kafkajs';
import { createKafka } from '../../src/kafka/client.ts';
import type { CubeAssignment } from '../../src/api/cube-assignment.ts';
import { adminKubeConfig, testEnvironment } from '../env/connection.ts';
import { freePort } from '../../src/local/processes.ts';
import { ReceiverProcess, tempDir } from '../support/receiver-process.ts';
import { createTopic, highWatermarks, testSchema, totalsOf } from '../support/events.ts';
import { SteadyLoad } from '../support/load.ts';
import {
  OperatorProcess,
  applyCrd,
  createNamespace,
  cubeApi,
  cubeEvents,
  leaseHolder,
  startReceiverPod,
  waitForSettled,
} from '../support/cluster.ts';
import {
  expectTiling,
  expectTotals,
  metricValue,
  rangesOf,
  totalsFromQuery,
  waitForPositions,
} from '../support/receiver-checks.ts';
import { addTotals, handOffTotals, handOffs } from '../support/hand-offs.ts';
import { waitFor } from '../support/wait.ts';

const env = testEnvironment();
const kc = adminKubeConfig();
const kafka = createKafka({
  clientId: 'operator-leader-test',
  brokers: [env.kafka.bootstrap],
  logLevel: logLevel.NOTHING,
});
const cube = 'clicks';
const lease = 'streamcube-operator';
// The harness runs operators with --lease-duration=4s --retry-period=500ms; a candidate retries
// every retry period × [1, 2.2].
const leaseDurationMs = 4_000;
const maxRetryMs = 1_100;
const token = `test-token-${Date.now()}-leader`;

let admin: Admin;
let producer: Producer;
let namespace: string;
let receiverPort: number;
const operators: OperatorProcess[] = [];
const receivers: Record<string, ReceiverProcess> = {};
const deep = tempDir('deep-leader');

function newOperator(): OperatorProcess {
  const op = new OperatorProcess({
    namespace,
    receiverToken: token,
    receiverPort,
    leaseName: lease,
  });
  operators.push(op);
  return op;
}

const assigned = (c: CubeAssignment, expected: Record<string, number[]>): boolean =>
  JSON.stringify(c.status?.assignment) === JSON.stringify(expected);

async function holderAmong(candidates: OperatorProcess[]): Promise<OperatorProcess> {
  return waitFor(
    `one of ${candidates.map((c) => c.identity).join(', ')} to hold the lease`,
    async () => {
      const holder = await leaseHolder(kc, namespace, lease);
      return candidates.find((c) => c.identity === holder);
    },
    20_000,
    50,
  );
}

async function reassignsCompleted(op: OperatorProcess): Promise<number> {
  return (
    metricValue(await op.metrics(), 'streamcube_reassigns_total', {
      cube,
      result: 'completed',
    }) ?? 0
  );
}

beforeAll(async () => {
  admin = kafka.admin();
  producer = kafka.producer();
  await Promise.all([admin.connect(), producer.connect(), applyCrd()]);
  namespace = await createNamespace(kc, 'op-leader');
  receiverPort = await freePort();
  for (const [name, rs, ip] of [
    ['rs-a-0', 'rs-a', '127.0.0.31'],
    ['rs-b-0', 'rs-b', '127.0.0.32'],
  ] as const) {
    receivers[rs] = await startReceiverPod(kc, namespace, {
      name: name,
      replicaSet: rs,
      ip: ip,
      port: receiverPort,
      token,
      deepStorageDir: deep,
    });
  }
});

afterAll(async () => {
  for (const op of operators) await op.kill('SIGKILL');
  for (const r of Object.values(receivers)) await r.stop();
  await Promise.all([admin?.disconnect(), producer?.disconnect()]);
});

test('only the holder reconciles; after kill -9 the other takes over within the lease duration and finishes a move', async () => {
  const first = [newOperator(), newOperator()];
  await Promise.all(first.map((op) => op.start()));
  const holder = await holderAmong(first);
  const follower = first.find((op) => op !== holder)!;

  const topic = await createTopic(admin, 4);
  const load = new SteadyLoad(producer, topic, 4);
  load.start(Date.UTC(2026, 1, 1));
  const api = cubeApi(kc);
  await api.create(namespace, cube, {
    source: { brokers: [env.kafka.bootstrap], topic, startingOffsets: 'earliest' },
    schema: testSchema,
    replicaSets: ['rs-a', 'rs-b'],
    strategy: 'range',
  });
  await waitForSettled(kc, namespace, cube, (c) => assigned(c, { 'rs-a': [0, 1], 'rs-b': [2, 3] }));

  // Over a few resync periods (--resync=1s) the holder keeps reconciling, the follower never does.
  const before = [await holder.reconciles(), await follower.reconciles()];
  await sleep(2_500);
  const after = [await holder.reconciles(), await follower.reconciles()];
  expect(before[0]).toBeGreaterThan(0);
  expect(after[0]).toBeGreaterThan(before[0]! + 1);
  expect(after[1]).toBe(0);
  expect(await leaseHolder(kc, namespace, lease)).toBe(holder.identity);
  const statusOf = async (op: OperatorProcess) =>
    metricValue(await op.metrics(), 'leader_election_master_status', { name: lease });
  expect(await statusOf(holder)).toBe(1);
  expect(await statusOf(follower)).toBe(0);
  expect(holder.log()).toContain('leading: reconciling cube assignments');
  expect(follower.log()).not.toContain('leading: reconciling cube assignments');
  expect(await reassignsCompleted(holder)).toBe(1);

  // The holder dies without a word; the move asked for afterwards waits for the successor.
  const killedAt = Date.now();
  await holder.kill('SIGKILL');
  await api.patchSpec(namespace, cube, { pins: { 'rs-a': [0, 1, 2] } });
  await holderAmong([follower]);
  const tookOver = Date.now() - killedAt;
  // Not before the lease could have expired (the last renewal came at most one retry period
  // before the kill), and not much after: the lease duration, one observation and one retry.
  expect(tookOver).toBeGreaterThanOrEqual(leaseDurationMs - 1_000);
  expect(tookOver).toBeLessThan(leaseDurationMs + 2 * maxRetryMs + 1_000);

  await waitForSettled(kc, namespace, cube, (c) => assigned(c, { 'rs-a': [0, 1, 2], 'rs-b': [3] }));
  expect(await reassignsCompleted(follower)).toBe(1);
  expect(await follower.reconciles()).toBeGreaterThan(0);
  expect(follower.log()).toContain('leading: reconciling cube assignments');
  const events = await cubeEvents(kc, namespace, cube);
  expect(events.filter((e) => e.reason === 'ReassignCompleted')).toHaveLength(2);

  // Nothing lost or doubled across the change of leader.
  await load.stop();
  const hw = await highWatermarks(kafka, topic);
  const expected = Object.fromEntries(hw);
  const [a, b] = [receivers['rs-a']!, receivers['rs-b']!];
  const statusA = await waitForPositions(a.client, cube, {
    0: expected[0]!,
    1: expected[1]!,
    2: expected[2]!,
  });
  await waitForPositions(b.client, cube, { 3: expected[3]! });
  // rs-b sealed the window holding partition 2 when it released it: that segment's events are in
  // deep storage, the rest answer live (read once every sealed segment is handed off).
  const handedOff = async (r: typeof a) => {
    const status = await r.client.cubeStatus(cube);
    return status.segments.every((s) => s.state !== 'IMMUTABLE') ? status : undefined;
  };
  const statusB = await waitFor('rs-b handed off what it sealed', () => handedOff(b));
  const totals = [
    totalsFromQuery(await a.client.query(cube, {})),
    totalsFromQuery(await b.client.query(cube, {})),
    handOffTotals(handOffs(deep, cube)),
  ].reduce(addTotals);
  expectTotals(totals, totalsOf(load.all()));
  for (const [p, end] of hw) expectTiling(rangesOf(p, statusA.segments, statusB.segments), 0n, end);
});

test('SIGTERM releases the lease: a waiting operator takes over well before the lease duration', async () => {
  const holder = await holderAmong(operators.filter((op) => op.alive));
  const successor = newOperator();
  await successor.start();
  // The successor has read the lease and knows it is held.
  await waitFor(
    'the successor to see the holder',
    () => Promise.resolve(successor.log().includes('new leader observed')),
    10_000,
  );
  expect(await leaseHolder(kc, namespace, lease)).toBe(holder.identity);

  const stoppedAt = Date.now();
  const acquiredAt = holderAmong([successor]).then(() => Date.now());
  await holder.kill('SIGTERM');
  expect(holder.child?.exitCode).toBe(0);
  expect(holder.log()).toContain('released leader lease');
  expect(['', successor.identity]).toContain(await leaseHolder(kc, namespace, lease));
  // Without the release the successor would wait out the lease: at least ~3.5 s here.
  expect((await acquiredAt) - stoppedAt).toBeLessThan(leaseDurationMs / 2 + 500);

  // And it reconciles: back to the range placement.
  await cubeApi(kc).patchSpec(namespace, cube, { pins: null });
  await waitForSettled(kc, namespace, cube, (c) => assigned(c, { 'rs-a': [0, 1], 'rs-b': [2, 3] }));
  expect(await reassignsCompleted(successor)).toBe(1);
});
