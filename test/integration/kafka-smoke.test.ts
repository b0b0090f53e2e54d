// The environment's Kafka is a real broker: create a topic with several partitions, produce, and
// read one partition back from an exact offset with the consumer set-up the receivers use
// (unique group, an assigner that hands the member exactly its partition, no auto-commit, seek).
import { randomUUID } from 'node:crypto';
import { logLevel } from 'kafkajs';
import { exactPartitionAssigner } from '../../bench/bare-consumer.ts';
import { createKafka } from '../../src/kafka/client.ts';
import { testEnvironment } from '../env/connection.ts';
import { settings } from '../../src/local/settings.ts';

const env = testEnvironment();
const kafka = createKafka({
  clientId: 'smoke',
  brokers: [env.kafka.bootstrap],
  logLevel: logLevel.NOTHING,
});

test('the broker runs the Kafka version this run asks for, and says so in its log', () => {
  console.log(`Kafka broker version ${env.kafka.reportedVersion} at ${env.kafka.bootstrap}`);
  // Against what was asked (STREAMCUBE_KAFKA_VERSION or the default), not what the environment
  // recorded: a reused environment of another version must fail here. The reported version
  // comes from the broker's own log, so a broker whose logging binding is broken fails too.
  expect(env.kafka.version).toBe(settings.kafkaVersion);
  expect(env.kafka.reportedVersion).toBe(settings.kafkaVersion);
});

test('creates a topic, produces, and reads one partition back from an exact offset', async () => {
  const topic = `smoke-${randomUUID()}`;
  const admin = kafka.admin();
  await admin.connect();
  try {
    await admin.createTopics({ topics: [{ topic, numPartitions: 4 }], waitForLeaders: true });
    const metadata = await admin.fetchTopicMetadata({ topics: [topic] });
    expect(metadata.topics[0]?.partitions).toHaveLength(4);

    const producer = kafka.producer();
    await producer.connect();
    for (let partition = 0; partition < 4; partition++) {
      await producer.send({
        topic,
        messages: Array.from({ length: 10 }, (_, i) => ({
          partition,
          value: `p${partition}-m${i}`,
        })),
      });
    }
    await producer.disconnect();

    const offsets = await admin.fetchTopicOffsets(topic);
    expect(offsets.map((o) => o.high).sort()).toEqual(['10', '10', '10', '10']);

    const consumer = kafka.consumer({
      groupId: `smoke-${randomUUID()}`,
      partitionAssigners: [exactPartitionAssigner(topic, () => [2])],
    });
    await consumer.connect();
    await consumer.subscribe({ topics: [topic] });
    const seen: { partition: number; offset: string; value: string }[] = [];
    const done = new Promise<void>((resolve) => {
      void consumer.run({
        autoCommit: false,
        eachMessage: ({ partition, message }) => {
          seen.push({ partition, offset: message.offset, value: message.value?.toString() ?? '' });
          if (seen.length === 4) resolve();
          return Promise.resolve();
        },
      });
    });
    consumer.seek({ topic, partition: 2, offset: '6' });
    await done;
    await consumer.disconnect();

    expect(seen).toEqual(
      [6, 7, 8, 9].map((i) => ({ partition: 2, offset: String(i), value: `p2-m${i}` })),
    );
  } finally {
    await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
    await admin.disconnect();
  }
});
