// A cube is never Ready while a receiver cannot read it, and never silently so: a Kafka consumer
// that fails — on a batch it cannot decode, or with its broker gone — makes the cube Degraded
// ConsumerFailed and Ready=False within seconds, with a Warning Event naming the receiver and the
// error, and the receiver counts it. The receiver restarts the consumer with backoff from the
// positions it holds; once the fault is gone the cube is Ready again with every event counted
// once. Late data is visible the same way: mostly too-late events make it Degraded EventsRejected.
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type Producer } from 'kafkajs';
import type { CubeAssignment } from '../../src/api/cube-assignment.ts';
import type { CubeStatus } from '../../src/protocol/admin-api.ts';
import { type KafkaBroker, startKafka } from '../../src/local/kafka.ts';
import { stopService } from '../../src/local/processes.ts';
import { type ReceiverProcess } from '../support/receiver-process.ts';
import { createTopic, highWatermarks, type TestEvent, produceEach } from '../support/events.ts';
import { conditionOf, cubeApi } from '../support/cluster.ts';
import { metricValue, waitForPositions, expectQueriedTotals } from '../support/receiver-checks.ts';
import { waitFor } from '../support/wait.ts';
import { useOperatorStack } from '../support/operator-stack.ts';
import { useBrokerClients } from '../support/kafka-clients.ts';
import { tempDir } from '../support/scratch-dirs.ts';

/** Faults of receiver rs-a-1, switched on and off by files (STREAMCUBE_FAULT_DIR). */
const faults = tempDir('faults');
const stack = useOperatorStack({
  name: 'op-consumer-failed',
  replicaSets: ['rs-a', 'rs-b'],
  replicas: { 'rs-a': 2, 'rs-b': 1 },
  podEnv: { 'rs-a-1': { STREAMCUBE_FAULT_DIR: faults } },
  // A short window, so that the EventsRejected test also sees the condition clear.
  operatorArgs: ['--rejected-events-window=15s'],
});
const { kc, env } = stack;
const T0 = Date.UTC(2026, 3, 1);
/**
 * How long a failure may take to show before the test gives up: the receiver's first restart is
 * due 1 s after it, so this is a hang guard; a loaded machine only makes the test slower.
 */
const failureShowsWithinMs = 60_000;
const connect = useBrokerClients();

afterAll(() => rmSync(faults, { recursive: true, force: true }));

const degradedBy = (reason: string) => (c: CubeAssignment) =>
  conditionOf(c, 'Degraded')?.status === 'True' &&
  conditionOf(c, 'Degraded')?.reason === reason &&
  !c.status?.reassign;

async function warningEvents(cube: string, reason: string) {
  return (await stack.cubeEvents(cube)).filter((e) => e.type === 'Warning' && e.reason === reason);
}

async function consumerFailures(receiver: ReceiverProcess, cube: string): Promise<number> {
  const text = await (await fetch(`${receiver.baseUrl}/metrics`)).text();
  return metricValue(text, 'streamcube_receiver_consumer_failures_total', { cube }) ?? 0;
}

async function produceEvents(
  producer: Producer,
  topic: string,
  partitions: number,
  count: number,
  round: number,
): Promise<TestEvent[]> {
  const all = [...Array(partitions).keys()];
  return (await produceEach(producer, topic, all, count, T0 + round * 600_000, 500, round)).flat();
}

test('a batch that cannot be decoded: Degraded ConsumerFailed, not Ready, an Event; Ready again once it decodes', async () => {
  // A decode failure that stays one: the broker refuses batches it cannot read itself (an unknown
  // codec, corrupt compressed data), and every codec Kafka has is registered, so the fault is
  // injected where kafkajs decodes: while the file exists, rs-a-1's consumer fails on each batch
  // with KafkaJSNotImplemented, the error kafkajs raises for a codec it lacks, and crashes.
  const cube = 'undecodable';
  const { kafka, admin, producer } = await connect(env.kafka.bootstrap, 'consumer-failed-decode');
  const topic = await createTopic(admin, 2);
  const produced = await produceEvents(producer, topic, 2, 100, 0);
  await stack.createCube(cube, topic, {
    replicaSets: ['rs-a'],
  });
  await stack.waitForSettled(cube);
  const hw0 = Object.fromEntries(await highWatermarks(kafka, topic));
  for (const r of ['rs-a-0', 'rs-a-1']) await waitForPositions(stack.receiver(r).client, cube, hw0);

  writeFileSync(join(faults, 'consumer-fetch'), 'cannot decode the record batch (test fault)\n');
  produced.push(...(await produceEvents(producer, topic, 2, 100, 1)));
  // rs-a-0 reads on: the failure of one replica is the cube's (the operator reads every replica).
  const degraded = await stack.waitForCube(
    cube,
    'Degraded ConsumerFailed naming rs-a-1',
    (c) => degradedBy('ConsumerFailed')(c) && conditionOf(c, 'Ready')?.status === 'False',
    failureShowsWithinMs,
  );
  const message = conditionOf(degraded, 'Degraded')?.message ?? '';
  expect(message).toContain('receiver rs-a-1 (rs-a)');
  expect(message).toContain('KafkaJSNotImplemented: cannot decode the record batch (test fault)');
  expect(message).not.toContain('rs-a-0');
  expect(conditionOf(degraded, 'Ready')).toMatchObject({ reason: 'ConsumerFailed' });

  const down: CubeStatus = await stack.receiver('rs-a-1').client.cubeStatus(cube);
  expect(down.consumer).toMatchObject({
    state: 'failed',
    error: { name: 'KafkaJSNotImplemented' },
  });
  expect(down.partitions.map((p) => [p.state, p.intendedState])).toEqual([
    ['failed', 'consuming'],
    ['failed', 'consuming'],
  ]);
  expect((await stack.receiver('rs-a-0').client.cubeStatus(cube)).consumer.state).toBe('running');
  await waitForPositions(stack.receiver('rs-a-0').client, cube, {
    0: hw0[0]! + 100n,
    1: hw0[1]! + 100n,
  });

  // It keeps failing and is restarted again and again; one Event says so, not one per resync.
  await waitFor('three failures of rs-a-1', async () =>
    (await consumerFailures(stack.receiver('rs-a-1'), cube)) >= 3 ? true : undefined,
  );
  const events = await warningEvents(cube, 'ConsumerFailed');
  expect(events).toHaveLength(1);
  expect(events[0]?.message).toContain('receiver rs-a-1 (rs-a)');
  expect(events[0]?.message).toContain('cannot decode the record batch');

  rmSync(join(faults, 'consumer-fetch'));
  const recovered = await stack.waitForSettled(
    cube,
    (c) => conditionOf(c, 'Degraded')?.status === 'False',
    60_000,
  );
  expect(conditionOf(recovered, 'Ready')).toMatchObject({ status: 'True' });
  const hw = Object.fromEntries(await highWatermarks(kafka, topic));
  for (const r of ['rs-a-0', 'rs-a-1']) {
    await waitForPositions(stack.receiver(r).client, cube, hw);
    await expectQueriedTotals([stack.receiver(r).client], cube, produced);
  }
  expect((await stack.receiver('rs-a-1').client.cubeStatus(cube)).consumer.state).toBe('running');
});

test('a broker gone: Degraded ConsumerFailed, not Ready, an Event; back on it, Ready with every event once', async () => {
  const cube = 'outage';
  const dir = tempDir('kafka-consumer-failed');
  mkdirSync(dir, { recursive: true });
  let broker: KafkaBroker | undefined = await startKafka(join(dir, 'kafka'));
  try {
    const first = broker;
    const { admin, producer } = await connect(first.bootstrap, 'consumer-failed-1');
    const topic = await createTopic(admin, 2);
    const produced = await produceEvents(producer, topic, 2, 100, 0);
    await stack.createCube(cube, topic, {
      source: { brokers: [first.bootstrap], topic, startingOffsets: 'earliest' },
      replicaSets: ['rs-b'],
    });
    await stack.waitForSettled(cube);
    const rsB = stack.receiver('rs-b-0');
    await waitForPositions(rsB.client, cube, { 0: 100n, 1: 100n });
    const failuresBefore = await consumerFailures(rsB, cube);

    await stopService(first.pid);
    broker = undefined;
    const degraded = await stack.waitForCube(
      cube,
      'Degraded ConsumerFailed naming rs-b-0',
      (c) => degradedBy('ConsumerFailed')(c) && conditionOf(c, 'Ready')?.status === 'False',
      failureShowsWithinMs,
    );
    expect(conditionOf(degraded, 'Degraded')?.message).toContain('receiver rs-b-0 (rs-b)');
    expect(conditionOf(degraded, 'Ready')).toMatchObject({ reason: 'ConsumerFailed' });
    await waitFor('a Warning Event ConsumerFailed naming rs-b-0', async () =>
      (await warningEvents(cube, 'ConsumerFailed')).find((e) =>
        e.message?.includes('receiver rs-b-0 (rs-b)'),
      ),
    );
    expect(await consumerFailures(rsB, cube)).toBeGreaterThan(failuresBefore);
    // Positions held through the outage.
    const down = await rsB.client.cubeStatus(cube);
    expect(down.partitions.map((p) => [p.state, p.position])).toEqual([
      ['failed', '100'],
      ['failed', '100'],
    ]);

    broker = await startKafka(join(dir, 'kafka'), first.version, first.ports);
    const again = await connect(broker.bootstrap, 'consumer-failed-2');
    produced.push(...(await produceEvents(again.producer, topic, 2, 100, 1)));
    // The receiver's next restart is due within its 30 s backoff ceiling.
    await stack.waitForSettled(cube, (c) => conditionOf(c, 'Degraded')?.status === 'False', 90_000);
    await waitForPositions(rsB.client, cube, { 0: 200n, 1: 200n });
    await expectQueriedTotals([rsB.client], cube, produced);
  } finally {
    // The cube goes first: its finalizer needs no broker, but its receiver should not keep
    // restarting a consumer for a broker this test removes.
    await cubeApi(kc).delete(stack.namespace, cube);
    await waitFor('cube outage deleted', async () =>
      (await cubeApi(kc)
        .get(stack.namespace, cube)
        .then(() => false)
        .catch(() => true))
        ? true
        : undefined,
    );
    if (broker) await stopService(broker.pid);
    rmSync(dir, { recursive: true, force: true });
  }
});

test('mostly too-late events: Degraded EventsRejected with the counts and one Event, still Ready; it clears', async () => {
  const cube = 'latecomers';
  const { admin, producer } = await connect(env.kafka.bootstrap, 'consumer-failed-late');
  const topic = await createTopic(admin, 1);
  await stack.createCube(cube, topic, {
    replicaSets: ['rs-b'],
    rejectedEventsThreshold: '10%',
  });
  await stack.waitForSettled(cube);
  const rsB = stack.receiver('rs-b-0');

  // 10 events in time, then 90 two hours behind the partition's event time: too late.
  await produceEach(producer, topic, [0], 10, T0);
  await produceEach(producer, topic, [0], 90, T0 - 7_200_000, 1000, 1);
  await waitForPositions(rsB.client, cube, { 0: 100n });
  expect((await rsB.client.cubeStatus(cube)).rejected).toEqual({ too_late: 90 });

  const degraded = await stack.waitForCube(
    cube,
    'Degraded EventsRejected',
    degradedBy('EventsRejected'),
    failureShowsWithinMs,
  );
  expect(conditionOf(degraded, 'Degraded')?.message).toMatch(
    /receiver rs-b-0 \(rs-b\) rejected 90 of the 100 records it read in the last \d+s \(too_late 90\): more than spec.rejectedEventsThreshold \(10%\)/,
  );
  // Late data is not a consumer problem: every partition is read.
  expect(conditionOf(degraded, 'Ready')).toMatchObject({ status: 'True' });
  await waitFor('a Warning Event EventsRejected', async () =>
    (await warningEvents(cube, 'EventsRejected')).find(
      (e) =>
        e.message ===
        'replica set rs-b rejects more than 10% of the records read (too_late); the Degraded condition has the counts',
    ),
  );
  // More resyncs (every second here), more late events: the counts change, the Event does not.
  const before = await stack.operator.reconciles();
  await produceEach(producer, topic, [0], 20, T0 - 7_200_000, 1000, 2);
  await waitFor('five more reconciles and the new counts', async () =>
    (await stack.operator.reconciles()) >= before + 5 &&
    conditionOf(await cubeApi(kc).get(stack.namespace, cube), 'Degraded')?.message.includes(
      '110 of the 120',
    )
      ? true
      : undefined,
  );
  expect(await warningEvents(cube, 'EventsRejected')).toHaveLength(1);

  // Only good events from now on: once the window (15 s here) has passed, the condition clears.
  await produceEach(producer, topic, [0], 50, T0 + 60_000, 100, 3);
  await stack.waitForCube(
    cube,
    'Degraded cleared',
    (c) => conditionOf(c, 'Degraded')?.status === 'False',
    60_000,
  );
});
