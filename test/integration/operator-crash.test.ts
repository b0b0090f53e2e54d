// The operator killed (SIGKILL, at a fault point) in every phase of a reassign, at the start of the
// phase and between two receiver calls of it, under steady load: a fresh operator resumes the
// journal, and afterwards the assignment is as desired, each moved partition's epoch went up by
// exactly one, and every replica's segments tile the log and add up to what was produced.
import { logLevel, type Admin, type Producer } from 'kafkajs';
import { createKafka } from '../../src/kafka/client.ts';
import type { ReassignPhase } from '../../src/api/cube-assignment.ts';
import { ReceiverApiError } from '../../src/protocol/client.ts';
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
  startReceiverPod,
  waitForSettled,
} from '../support/cluster.ts';
import { metricValue, waitForPositions } from '../support/receiver-checks.ts';
import { expectExactAndTiled } from '../support/cube-audit.ts';
import { handOffs } from '../support/hand-offs.ts';

const env = testEnvironment();
const kc = adminKubeConfig();
const kafka = createKafka({
  clientId: 'operator-crash-test',
  brokers: [env.kafka.bootstrap],
  logLevel: logLevel.NOTHING,
});
const cube = 'orders';
const token = `crash-token-${Date.now()}`;
const partitions = [0, 1, 2, 3];
const replicaSets = ['rs-a', 'rs-b'] as const;
type ReplicaSet = (typeof replicaSets)[number];

let admin: Admin;
let producer: Producer;
let namespace: string;
let receiverPort: number;
let load: SteadyLoad;
let topic: string;
const deep = tempDir('crash-deep');
const receivers: Record<ReplicaSet, ReceiverProcess[]> = { 'rs-a': [], 'rs-b': [] };
const operators: OperatorProcess[] = [];
// Event time starts here and advances 1 s per load round: the test stays inside one 1h window.
const loadStart = Date.UTC(2026, 1, 1);

const newOperator = (): OperatorProcess => {
  const operator = new OperatorProcess({ namespace, receiverToken: token, receiverPort });
  operators.push(operator);
  return operator;
};

/** What a receiver holds of the cube: one state shared by all its partitions, or `absent`. */
async function holding(r: ReceiverProcess): Promise<string> {
  try {
    const states = new Set((await r.client.cubeStatus(cube)).partitions.map((p) => p.state));
    return [...states].sort().join('+');
  } catch (error) {
    if (error instanceof ReceiverApiError && error.status === 404) return 'absent';
    throw error;
  }
}

beforeAll(async () => {
  admin = kafka.admin();
  producer = kafka.producer();
  await Promise.all([admin.connect(), producer.connect(), applyCrd()]);
  namespace = await createNamespace(kc, 'op-crash');
  receiverPort = await freePort();
  let host = 21;
  for (const rs of replicaSets) {
    for (const i of [0, 1]) {
      const ip = `127.0.0.${host++}`;
      const r = await startReceiverPod(kc, namespace, {
        name: `${rs}-${i}`,
        replicaSet: rs,
        ip: ip,
        port: receiverPort,
        token,
        deepStorageDir: deep,
      });
      receivers[rs].push(r);
    }
  }
  topic = await createTopic(admin, partitions.length);
  load = new SteadyLoad(producer, topic, partitions.length, 10, 100);
});

afterAll(async () => {
  await load?.stop();
  for (const o of operators) await o.kill('SIGTERM');
  for (const r of [...receivers['rs-a'], ...receivers['rs-b']]) await r.stop();
  await Promise.all([admin?.disconnect(), producer?.disconnect()]);
});

/** Stops the load, lets the owner's replicas catch up, and audits every replica. */
async function expectExact(owner: ReplicaSet): Promise<void> {
  await load.stop();
  const hw = await highWatermarks(kafka, topic);
  for (const r of receivers[owner]) await waitForPositions(r.client, cube, Object.fromEntries(hw));
  await expectExactAndTiled({
    cube,
    deepStorageDir: deep,
    replicaSets: receivers,
    highWatermarks: hw,
    expected: totalsOf(load.all()),
  });
}

let owner: ReplicaSet = 'rs-a';
let epochs: Record<string, number> = {};

test('initial assignment of every partition to rs-a', async () => {
  load.start(loadStart);
  const operator = newOperator();
  await operator.start();
  await cubeApi(kc).create(namespace, cube, {
    source: { brokers: [env.kafka.bootstrap], topic, startingOffsets: 'earliest' },
    schema: testSchema,
    replicaSets: ['rs-a'],
    strategy: 'range',
  });
  const settled = await waitForSettled(
    kc,
    namespace,
    cube,
    (c) => JSON.stringify(c.status?.assignment) === JSON.stringify({ 'rs-a': partitions }),
  );
  epochs = settled.status?.epochs ?? {};
  expect(epochs).toEqual({ '0': 1, '1': 1, '2': 1, '3': 1 });
  await operator.kill('SIGTERM');
  await expectExact('rs-a');
});

interface Crash {
  /** STREAMCUBE_FAULT of the operator that dies. */
  fault: string;
  phase: ReassignPhase;
  /** What each replica of the source, then of the target, holds when the operator has died. */
  source: [string, string];
  target: [string, string];
}

// The source loses every partition, so Sealing seals, hands off and unassigns on both replicas.
const crashes: Crash[] = [
  {
    fault: 'reassign-Pausing',
    phase: 'Pausing',
    source: ['consuming', 'consuming'],
    target: ['absent', 'absent'],
  },
  {
    fault: 'reassign-Draining',
    phase: 'Draining',
    source: ['paused', 'paused'],
    target: ['absent', 'absent'],
  },
  {
    fault: 'reassign-Starting',
    phase: 'Starting',
    source: ['stopped', 'stopped'],
    target: ['absent', 'absent'],
  },
  {
    fault: 'reassign-Sealing',
    phase: 'Sealing',
    source: ['released', 'released'],
    target: ['consuming', 'consuming'],
  },
  // Done is written with the new assignment and epochs: resuming it must not bump them again.
  {
    fault: 'reassign-Done',
    phase: 'Done',
    source: ['absent', 'absent'],
    target: ['consuming', 'consuming'],
  },
  // Between two receiver calls: after the first pause, the first drain, the first target's
  // assign (the sources released and their data committed first; a point of its own, since the
  // releases run again on each pass that waits for that commit) and the first source's unassign
  // (after its seal).
  {
    fault: 'reassign-Pausing-partial',
    phase: 'Pausing',
    source: ['paused', 'consuming'],
    target: ['absent', 'absent'],
  },
  {
    fault: 'reassign-Draining-partial',
    phase: 'Draining',
    source: ['stopped', 'paused'],
    target: ['absent', 'absent'],
  },
  {
    fault: 'reassign-Starting-target-partial',
    phase: 'Starting',
    source: ['released', 'released'],
    target: ['consuming', 'absent'],
  },
  {
    fault: 'reassign-Sealing-partial:2',
    phase: 'Sealing',
    source: ['absent', 'released'],
    target: ['consuming', 'consuming'],
  },
];

test.each(crashes)(
  'SIGKILL at $fault: a fresh operator finishes the move, exact and tiled',
  async ({ fault, phase, source, target }) => {
    const from = owner;
    const to: ReplicaSet = from === 'rs-a' ? 'rs-b' : 'rs-a';
    load.start(loadStart);

    const doomed = newOperator();
    await doomed.start({ STREAMCUBE_FAULT: fault });
    await cubeApi(kc).patchSpec(namespace, cube, { replicaSets: [to] });
    await doomed.waitForExit();
    expect(doomed.exitSignal).toBe('SIGKILL');

    // Nothing else writes the object now: it shows the journal as the operator left it.
    const crashed = await cubeApi(kc).get(namespace, cube);
    expect(crashed.status?.reassign?.phase).toBe(phase);
    expect(crashed.status?.reassign?.moves).toEqual(
      partitions.map((partition) => ({ partition, from, to })),
    );
    const movedEpochs = Object.fromEntries(
      partitions.map((p) => [String(p), epochs[String(p)]! + 1]),
    );
    expect(crashed.status?.epochs).toEqual(phase === 'Done' ? movedEpochs : epochs);
    if (phase === 'Starting' || phase === 'Sealing') {
      // Drained: every moving partition's watermark is in the journal, for the target to start with.
      expect(Object.keys(crashed.status?.reassign?.watermarks ?? {}).sort()).toEqual(
        partitions.map(String).sort(),
      );
    }
    expect(await Promise.all(receivers[from].map(holding))).toEqual(source);
    expect(await Promise.all(receivers[to].map(holding))).toEqual(target);

    const fresh = newOperator();
    await fresh.start();
    const settled = await waitForSettled(
      kc,
      namespace,
      cube,
      (c) => JSON.stringify(c.status?.assignment) === JSON.stringify({ [to]: partitions }),
    );
    expect(settled.status?.epochs).toEqual(movedEpochs);
    owner = to;
    expect(
      metricValue(await fresh.metrics(), 'streamcube_reassigns_total', {
        cube,
        result: 'completed',
      }),
    ).toBe(1);
    expect(await Promise.all(receivers[from].map(holding))).toEqual(['absent', 'absent']);
    // Sealing did its work on both source replicas: each handed off what it consumed this round.
    const sealed = handOffs(deep, cube).filter((h) =>
      Object.entries(h.manifest.epochs).every(([p, e]) => epochs[p] === e),
    );
    expect(sealed.map((h) => h.manifest.receiver).sort()).toEqual(
      receivers[from].map((r) => r.options.id),
    );
    await fresh.kill('SIGTERM');
    epochs = movedEpochs;

    await expectExact(to);
  },
);
