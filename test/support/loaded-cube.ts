// Where operator suites with two replica sets start: a cube over a new topic (4 partitions unless
// told) under steady load, settled by `range` on rs-a (partitions 0, 1) and rs-b (2, 3).
import type { Producer } from 'kafkajs';
import type { CubeAssignment } from '../../src/api/cube-assignment.ts';
import { cubeApi, waitForSettled } from './cluster.ts';
import { expectExactOnceCaughtUp } from './cube-audit.ts';
import { type TestEvent, createTopic, makeEvents, testSchema, windowedSchema } from './events.ts';
import { type JavaProducer, startJavaProducer } from './java-producer.ts';
import { SteadyLoad } from './load.ts';
import type { CubeSpecOptions, OperatorStack } from './operator-stack.ts';

/**
 * A producer for a suite's loads, connected in beforeAll; every load the suite registers in
 * `loads`, then the producer, stopped in afterAll.
 */
export function useLoads(stack: OperatorStack): { producer: () => Producer; loads: SteadyLoad[] } {
  let producer: Producer | undefined;
  const loads: SteadyLoad[] = [];
  beforeAll(async () => {
    // Idempotent, as Kafka's Java producer is by default: a send retried after the broker wrote it
    // (a broker restart, a request timed out on a busy machine) is not written twice. Without it a
    // 30-minute chaos run (seed 1767996316) found one round's batch of three partitions twice in
    // the topic (offsets 97390-97399 and 97400-97409): the receivers counted the log exactly, 30
    // events more than the load's ground truth.
    producer = stack.kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
    await producer.connect();
  });
  afterAll(async () => {
    for (const load of loads) await load.stop();
    await producer?.disconnect();
  });
  return {
    producer: () => {
      if (!producer) throw new Error('the producer connects in beforeAll');
      return producer;
    },
    loads,
  };
}

/** A check for waitForSettled: status.assignment is exactly `expected`. */
export const assigned =
  (expected: Record<string, number[]>) =>
  (c: CubeAssignment): boolean =>
    JSON.stringify(c.status?.assignment) === JSON.stringify(expected);

/** A loaded cube's topic and load: 4 partitions, 10 events each every 100 ms unless told. */
export interface LoadShape {
  partitions?: number;
  perRound?: number;
  pauseMs?: number;
}

/**
 * Creates the cube with its load started at event time `start`; the load is registered with the
 * suite's (useLoads) first, so that it is stopped even when the cube does not settle. `range`
 * gives rs-a the first half of the partitions (one more when odd), rs-b the rest.
 */
export async function loadedCube(
  stack: OperatorStack,
  suite: { producer: () => Producer; loads: SteadyLoad[] },
  cube: string,
  start: number,
  { partitions = 4, perRound = 10, pauseMs = 100 }: LoadShape = {},
): Promise<{ topic: string; load: SteadyLoad }> {
  const topic = await createTopic(stack.admin, partitions);
  const load = new SteadyLoad(suite.producer(), topic, partitions, perRound, pauseMs);
  suite.loads.push(load);
  load.start(start);
  await cubeApi(stack.kc).create(stack.namespace, cube, {
    source: { brokers: [stack.env.kafka.bootstrap], topic, startingOffsets: 'earliest' },
    schema: testSchema,
    replicaSets: ['rs-a', 'rs-b'],
    strategy: 'range',
  });
  const all = [...Array(partitions).keys()];
  const half = Math.ceil(partitions / 2);
  await waitForSettled(
    stack.kc,
    stack.namespace,
    cube,
    assigned({ 'rs-a': all.slice(0, half), 'rs-b': all.slice(half) }),
  );
  return { topic, load };
}

/**
 * Stops a cube's load and audits the cube on the stack's replicas and deep storage
 * (expectExactOnceCaughtUp): every replica of a set that owns partitions caught up, every event
 * once, every partition's log tiled.
 */
export function expectLoadedCubeExact(
  stack: OperatorStack,
  o: {
    cube: string;
    topic: string;
    load: SteadyLoad;
    owned: Record<string, number[]>;
    committedSets?: string[];
  },
): Promise<void> {
  return expectExactOnceCaughtUp({
    kafka: stack.kafka,
    deepStorageDir: stack.deepStorageDir,
    replicaSets: stack.replicas,
    ...o,
  });
}

/** An event of partition `p` at wall-clock time `now`: event `i + salt` of makeEvents, at `now`. */
export const eventAt = (p: number, i: number, now: number, salt = 0): TestEvent => ({
  ...makeEvents(p, 1, now, 0, i + salt)[0]!,
  ts: now,
});

/**
 * A cube of 1-minute windows (windowedSchema) over a new topic of `partitions`, sticky on rs-a and
 * rs-b, settled, and Kafka's Java producer (lz4, 20 ms linger) on the topic, added to `producers`
 * (which the suite kills in afterAll).
 */
export async function javaProducedCube(
  stack: OperatorStack,
  producers: JavaProducer[],
  cube: string,
  partitions: number,
  schema: CubeSpecOptions['schema'] = windowedSchema,
): Promise<{ topic: string; java: JavaProducer }> {
  const topic = await createTopic(stack.admin, partitions);
  await stack.createCube(cube, topic, {
    schema,
    replicaSets: ['rs-a', 'rs-b'],
    strategy: 'sticky',
  });
  const java = await startJavaProducer({ topic, compression: 'lz4', lingerMs: 20 });
  producers.push(java);
  await stack.waitForSettled(cube);
  return { topic, java };
}
