// The receivers' consumer of a cube (SessionPartitionConsumer) against the real broker: a stop
// does not wait for the session's fetch under way (every move stops consumers, most of them idle
// in a receiver of many cubes); a restart from the caller's positions reads on without a gap or a
// record twice; a start asks the brokers about the cube's own topic only.
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { logLevel } from 'kafkajs';
import { createKafka } from '../../src/kafka/client.ts';
import { closeFetchSession, sessionFetchWaitMs } from '../../src/kafka/fetch-session.ts';
import { SessionPartitionConsumer } from '../../src/kafka/session-consumer.ts';
import { testEnvironment } from '../env/connection.ts';
import { createTopic, produce } from '../support/events.ts';
import { RecordingSink } from '../support/recording-sink.ts';
import { useKafkaClients } from '../support/kafka-clients.ts';
import { watchingFetches } from '../support/broker-fetches.ts';
import { waitFor } from '../support/wait.ts';

const suite = useKafkaClients('partition-consumer');
const { kafka } = suite;

/**
 * Starts `consumer`, again while the broker answers that the group's coordinator is loading (a
 * broker just started): the receivers' supervisor restarts a consumer on such an error too.
 */
async function startConsumer(
  consumer: SessionPartitionConsumer,
  positions: Map<number, bigint>,
): Promise<void> {
  await waitFor('the consumer to start', async () => {
    await consumer.start(positions);
    return true;
  });
}

test('a consumer stopped while the broker holds the idle fetch stops without waiting for it, and a restart from its positions reads on: every offset once', async () => {
  const topic = await createTopic(suite.admin, 2);
  for (const p of [0, 1]) await produce(suite.producer, topic, p, ['a', 'b', 'c', 'd', 'e']);
  const sink = new RecordingSink();
  const groupId = `pc-${randomUUID().slice(0, 8)}`;
  const options = { kafka, topic, groupId, sink };
  const first = new SessionPartitionConsumer(options);
  await startConsumer(
    first,
    new Map([
      [0, 0n],
      [1, 0n],
    ]),
  );
  await waitFor('the first five records of each partition', () =>
    Promise.resolve(sink.at(0) === 5n && sink.at(1) === 5n),
  );
  // The log ends where the consumer is: the session's next fetch finds nothing and the broker
  // holds it for the fetch wait. Records produced meanwhile answer it at once.
  await sleep(sessionFetchWaitMs / 2);
  await produce(suite.producer, topic, 0, ['f']);
  await waitFor('a record produced while the fetch is held', () =>
    Promise.resolve(sink.at(0) === 6n),
  );

  // The session's fetch goes on for the other cubes; this one only leaves it: its stop is done
  // while the fetch it was part of is still held by the broker, however slow the machine.
  const heldAtStop = await watchingFetches(async (fetches) => {
    await waitFor('a fetch held by the broker', () => Promise.resolve(fetches.underWay > 0));
    const held = fetches.sent;
    await first.stop();
    return fetches.underWay > 0 && fetches.sent === held;
  });
  expect(heldAtStop).toBe(true);

  for (const p of [0, 1]) await produce(suite.producer, topic, p, ['g', 'h', 'i']);
  const second = new SessionPartitionConsumer(options);
  try {
    await startConsumer(second, new Map([0, 1].map((p) => [p, sink.at(p)])));
    await waitFor('every record', () => Promise.resolve(sink.at(0) === 9n && sink.at(1) === 8n));
    expect(sink.offsets.get(0)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8]);
    expect(sink.offsets.get(1)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    // Where the logs end, from the session's fetches.
    expect(await second.highWatermarks()).toEqual(
      new Map([
        [0, 9n],
        [1, 8n],
      ]),
    );
    expect(sink.crash).toBeUndefined();
  } finally {
    await second.stop();
    await second.deleteGroup();
  }
});

test("a consumer's first start asks the group's coordinator without kafkajs's retry (the session's admin client knows the brokers first), and asks the brokers about its own topic only", async () => {
  const logged: { message: string; data?: { topicMetadata?: { topic: string }[] } }[] = [];
  const logging = createKafka({
    clientId: 'partition-consumer-log',
    brokers: [testEnvironment().kafka.bootstrap],
    logLevel: logLevel.DEBUG,
    logCreator: () => (entry) => logged.push(entry.log),
  });
  // Another topic in the cluster: kafkajs sends an empty topic list as null, and the broker
  // answers that with every topic it has.
  const bystander = await createTopic(suite.admin, 1);
  const topic = await createTopic(suite.admin, 2);
  const consumer = new SessionPartitionConsumer({
    kafka: logging,
    topic,
    groupId: `pc-${randomUUID().slice(0, 8)}`,
    sink: new RecordingSink(),
  });
  const topicsAnswered = (): string[] => [
    ...new Set(
      logged
        .filter((m) => m.message.startsWith('Response Metadata'))
        .flatMap((m) => (m.data?.topicMetadata ?? []).map((t) => t.topic)),
    ),
  ];
  try {
    await startConsumer(
      consumer,
      new Map([
        [0, 0n],
        [1, 0n],
      ]),
    );
    // kafkajs's admin connects to a seed broker only: without the metadata request first, the
    // group's offsets (read at a first start) wait out a retry backoff after this message.
    expect(logged.filter((m) => m.message.includes('No brokers in the broker pool'))).toEqual([]);
    expect(logged.some((m) => m.message.includes('OffsetFetch'))).toBe(true);
    // Every consumer start asked for the whole cluster's metadata twice (describeCluster): with
    // 1,000 cubes on 100 topics, a quarter of the broker's work while they were placed.
    expect(topicsAnswered()).toEqual([topic]);
    expect(topicsAnswered()).not.toContain(bystander);
  } finally {
    await consumer.stop();
    logged.length = 0;
    await consumer.deleteGroup();
    expect(topicsAnswered()).toEqual([topic]);
    await closeFetchSession(logging);
  }
});
