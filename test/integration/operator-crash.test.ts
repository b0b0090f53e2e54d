// The operator killed (SIGKILL, at a fault point) in every phase of a reassign, at the start of the
// phase and between two receiver calls of it, under steady load: a fresh operator resumes the
// journal, and afterwards the assignment is as desired, each moved partition's epoch went up by
// exactly one, and every replica's segments tile the log and add up to what was produced.
import type { ReassignPhase } from '../../src/api/cube-assignment.ts';
import { ReceiverApiError } from '../../src/protocol/client.ts';
import { ReceiverProcess } from '../support/receiver-process.ts';
import { createTopic, highWatermarks, testSchema, totalsOf } from '../support/events.ts';
import { SteadyLoad } from '../support/load.ts';
import { cubeApi, waitForSettled } from '../support/cluster.ts';
import { waitFor } from '../support/wait.ts';
import { metricValue, waitForPositions } from '../support/receiver-checks.ts';
import { expectExactAndTiled } from '../support/cube-audit.ts';
import { handOffs } from '../support/hand-offs.ts';
import { useOperatorStack } from '../support/operator-stack.ts';
import { useLoads } from '../support/loaded-cube.ts';

const replicaSets = ['rs-a', 'rs-b'] as const;
type ReplicaSet = (typeof replicaSets)[number];
// Two replicas a set; each test starts the operators it kills.
const stack = useOperatorStack({
  name: 'op-crash',
  replicaSets: [...replicaSets],
  replicas: 2,
  operator: false,
});
const { kc, env, kafka } = stack;
const receivers = stack.replicas as Record<ReplicaSet, ReceiverProcess[]>;
const deep = stack.deepStorageDir;
const suite = useLoads(stack);
const cube = 'orders';
const partitions = [0, 1, 2, 3];

let load: SteadyLoad;
let topic: string;
// Event time starts here and advances 1 s per load round: the test stays inside one 1h window.
const loadStart = Date.UTC(2026, 1, 1);

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
  topic = await createTopic(stack.admin, partitions.length);
  load = new SteadyLoad(suite.producer(), topic, partitions.length, 10, 100);
  suite.loads.push(load);
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
  const operator = await stack.startOperator();
  await cubeApi(kc).create(stack.namespace, cube, {
    source: { brokers: [env.kafka.bootstrap], topic, startingOffsets: 'earliest' },
    schema: testSchema,
    replicaSets: ['rs-a'],
    strategy: 'range',
  });
  const settled = await waitForSettled(
    kc,
    stack.namespace,
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

/**
 * A row: the fault point, the journal's phase it leaves, each side's holdings (space-separated;
 * `a|b`: either, for a replica whose call was under way when the operator died).
 */
const crash = (fault: string, phase: ReassignPhase, source: string, target: string): Crash => ({
  fault,
  phase,
  source: source.split(' ') as [string, string],
  target: target.split(' ') as [string, string],
});

// The source loses every partition, so Sealing seals, hands off and unassigns on both replicas.
const crashes: Crash[] = [
  crash('reassign-Pausing', 'Pausing', 'consuming consuming', 'absent absent'),
  crash('reassign-Draining', 'Draining', 'paused paused', 'absent absent'),
  crash('reassign-Starting', 'Starting', 'stopped stopped', 'absent absent'),
  crash('reassign-Sealing', 'Sealing', 'released released', 'consuming consuming'),
  // Between two receiver calls: after the first pause, the first drain, the first target's
  // assign (the sources released and their data committed first; a point of its own, since the
  // releases run again on each pass that waits for that commit) and the first source's unassign
  // (after its seal).
  crash('reassign-Pausing-partial', 'Pausing', 'paused consuming', 'absent absent'),
  crash('reassign-Draining-partial', 'Draining', 'stopped paused', 'absent absent'),
  // The targets' assigns run at once: the second may have ended before the operator died.
  crash(
    'reassign-Starting-target-partial',
    'Starting',
    'released released',
    'consuming absent|consuming',
  ),
  crash('reassign-Sealing-partial:2', 'Sealing', 'absent released', 'consuming consuming'),
];

test.each(crashes)(
  'SIGKILL at $fault: a fresh operator finishes the move, exact and tiled',
  async ({ fault, phase, source, target }) => {
    const from = owner;
    const to: ReplicaSet = from === 'rs-a' ? 'rs-b' : 'rs-a';
    load.start(loadStart);

    const doomed = await stack.startOperator({ STREAMCUBE_FAULT: fault });
    await cubeApi(kc).patchSpec(stack.namespace, cube, { replicaSets: [to] });
    await doomed.waitForExit();
    expect(doomed.exitSignal).toBe('SIGKILL');

    // Nothing else writes the object now: it shows the journal as the operator left it.
    const crashed = await cubeApi(kc).get(stack.namespace, cube);
    expect(crashed.status?.reassign?.phase).toBe(phase);
    expect(crashed.status?.reassign?.moves).toEqual(
      partitions.map((partition) => ({ partition, from, to })),
    );
    const movedEpochs = Object.fromEntries(
      partitions.map((p) => [String(p), epochs[String(p)]! + 1]),
    );
    // Until the move's end writes them, the epochs are those from before it.
    expect(crashed.status?.epochs).toEqual(epochs);
    if (phase === 'Starting' || phase === 'Sealing') {
      // Drained: every moving partition's watermark is in the journal, for the target to start with.
      expect(Object.keys(crashed.status?.reassign?.watermarks ?? {}).sort()).toEqual(
        partitions.map(String).sort(),
      );
    }
    const holds = async (side: ReplicaSet, expected: [string, string]) => {
      const held = await Promise.all(receivers[side].map(holding));
      expect(held.map((h, i) => (expected[i]!.split('|').includes(h) ? expected[i] : h))).toEqual(
        expected,
      );
    };
    await holds(from, source);
    await holds(to, target);

    const before = epochs;
    const fresh = await stack.startOperator();
    // Stopped whatever this test finds: a fresh operator left running would hold the lease
    // against the next row's doomed one, which then never reaches its fault point.
    try {
      const settled = await waitForSettled(
        kc,
        stack.namespace,
        cube,
        (c) => JSON.stringify(c.status?.assignment) === JSON.stringify({ [to]: partitions }),
      );
      expect(settled.status?.epochs).toEqual(movedEpochs);
      owner = to;
      epochs = movedEpochs;
      // The counter goes up once the completing write's answer is read, which can come after
      // another reader already sees that write: wait for it, then require exactly one.
      const completed = async () =>
        metricValue(await fresh.metrics(), 'streamcube_reassigns_total', {
          cube,
          result: 'completed',
        });
      await waitFor('the fresh operator counts the move completed', async () =>
        ((await completed()) ?? 0) >= 1 ? true : undefined,
      );
      expect(await completed()).toBe(1);
      expect(await Promise.all(receivers[from].map(holding))).toEqual(['absent', 'absent']);
      // Sealing did its work on both source replicas: each handed off what it consumed this round.
      const sealed = handOffs(deep, cube).filter((h) =>
        Object.entries(h.manifest.epochs).every(([p, e]) => before[p] === e),
      );
      expect(sealed.map((h) => h.manifest.receiver).sort()).toEqual(
        receivers[from].map((r) => r.options.id),
      );
    } finally {
      await fresh.kill('SIGTERM');
    }

    await expectExact(to);
  },
);
