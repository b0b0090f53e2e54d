// Where operator suites with two replica sets start: a cube over a new 4-partition topic under
// steady load, settled by `range` on rs-a (partitions 0, 1) and rs-b (2, 3).
import type { Producer } from 'kafkajs';
import type { CubeAssignment } from '../../src/api/cube-assignment.ts';
import { cubeApi, waitForSettled } from './cluster.ts';
import { createTopic, testSchema } from './events.ts';
import { SteadyLoad } from './load.ts';
import type { OperatorStack } from './operator-stack.ts';

/**
 * A producer for a suite's loads, connected in beforeAll; every load the suite registers in
 * `loads`, then the producer, stopped in afterAll.
 */
export function useLoads(stack: OperatorStack): { producer: () => Producer; loads: SteadyLoad[] } {
  let producer: Producer | undefined;
  const loads: SteadyLoad[] = [];
  beforeAll(async () => {
    producer = stack.kafka.producer();
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

/**
 * Creates the cube with its load started at event time `start`; the load is registered with the
 * suite's (useLoads) first, so that it is stopped even when the cube does not settle.
 */
export async function loadedCube(
  stack: OperatorStack,
  suite: { producer: () => Producer; loads: SteadyLoad[] },
  cube: string,
  start: number,
): Promise<{ topic: string; load: SteadyLoad }> {
  const topic = await createTopic(stack.admin, 4);
  const load = new SteadyLoad(suite.producer(), topic, 4, 10, 100);
  suite.loads.push(load);
  load.start(start);
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
