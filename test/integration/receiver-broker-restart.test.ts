// A receiver rides out an outage of its Kafka broker: it keeps answering while the broker is
// down and, once it is back, consumes on from exactly where it was. The broker is a second one,
// started for this test only, so that stopping it disturbs no other test.
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { type Producer } from 'kafkajs';
import { type KafkaBroker, startKafka } from '../../src/local/kafka.ts';
import { stopService } from '../../src/local/processes.ts';
import { ReceiverProcess } from '../support/receiver-process.ts';
import {
  assignRequest,
  createTopic,
  highWatermarks,
  type TestEvent,
  produceEach,
} from '../support/events.ts';
import {
  expectTiling,
  positionsOf,
  rangesOf,
  waitForPositions,
  expectQueriedTotals,
} from '../support/receiver-checks.ts';
import { useBrokerClients } from '../support/kafka-clients.ts';
import { waitFor } from '../support/wait.ts';
import { tempDir } from '../support/scratch-dirs.ts';

const T0 = Date.UTC(2026, 0, 7);
const cube = 'outage';
const partitions = [0, 1, 2];

let dir: string;
let broker: KafkaBroker | undefined;
let receiver: ReceiverProcess | undefined;
const connect = useBrokerClients();

beforeAll(async () => {
  dir = tempDir('kafka-outage');
  broker = await startKafka(join(dir, 'kafka'));
});

afterAll(async () => {
  await receiver?.stop();
  if (broker) await stopService(broker.pid);
  rmSync(dir, { recursive: true, force: true });
});

test('a receiver consumes on exactly from where it was after its broker restarts', async () => {
  const first = broker!;
  const { kafka, admin, producer } = await connect(first.bootstrap, 'receiver-broker-restart-test');
  const topic = await createTopic(admin, partitions.length);
  const produced: TestEvent[] = [];
  const produceRound = async (p: Producer, round: number): Promise<void> => {
    const events = await produceEach(p, topic, partitions, 300, T0 + round * 600_000, 1000, round);
    produced.push(...events.flat());
  };
  await produceRound(producer, 0);
  receiver = new ReceiverProcess({
    id: 'r-outage',
    replicaSet: 'rs-a',
    deepStorageDir: tempDir('deep-outage'),
  });
  await receiver.start();
  await receiver.client.assign(
    cube,
    assignRequest(
      first.bootstrap,
      topic,
      'rs-a',
      partitions.map((p) => ({ partition: p, position: '0' })),
    ),
  );
  await waitForPositions(receiver.client, cube, { 0: 300n, 1: 300n, 2: 300n });
  // Partition 2 is paused through the outage: it must still be paused after it.
  await receiver.client.pause(cube, [2]);

  const logBefore = readFileSync(receiver.logFile).length;
  await stopService(first.pid);
  broker = undefined;
  // The receiver notices (its Kafka client logs the lost connection) and keeps answering.
  await waitFor('the receiver to see the broker gone', () =>
    Promise.resolve(
      readFileSync(receiver!.logFile).subarray(logBefore).includes(first.bootstrap) || undefined,
    ),
  );
  await expectQueriedTotals([receiver.client], cube, produced);
  expect(positionsOf(await receiver.client.cubeStatus(cube))).toEqual({
    0: '300',
    1: '300',
    2: '300',
  });

  broker = await startKafka(join(dir, 'kafka'), first.version, first.ports);
  // Fresh clients: the first ones may still be backing off from the outage.
  const again = await connect(broker.bootstrap, 'receiver-broker-restart-test-2');
  await produceRound(again.producer, 1);
  await waitForPositions(receiver.client, cube, { 0: 600n, 1: 600n }, 90_000);
  expect(positionsOf(await receiver.client.cubeStatus(cube))[2]).toBe('300');
  await receiver.client.resume(cube, [2]);
  const end = await highWatermarks(kafka, topic);
  const status = await waitForPositions(receiver.client, cube, Object.fromEntries(end), 60_000);
  await expectQueriedTotals([receiver.client], cube, produced);
  for (const p of partitions) expectTiling(rangesOf(p, status.segments), 0n, 600n);

  // Told to stop, it exits (nothing the outage left behind keeps it running); started again on
  // its data and told to stop while the broker is down, it exits too.
  expect(await receiver.stop()).toBe(true);
  expect(receiver.child?.exitCode).toBe(0);
  await receiver.start();
  await waitForPositions(receiver.client, cube, Object.fromEntries(end));
  await stopService(broker.pid);
  broker = undefined;
  expect(await receiver.stop()).toBe(true);
  expect(receiver.child?.exitCode).toBe(0);
});
