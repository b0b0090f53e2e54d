// The fetch session across brokers (src/kafka/fetch-session.ts): one fetch under way to each
// leader broker, none waiting on another's. A cluster of this suite's own, two brokers (the second
// joins the first's controller), so that stopping one disturbs no other suite. A cube reading a
// partition the first broker leads reads on while the second is stopped (SIGSTOP: its connections
// stay open, nothing answers), the cube of the second's partition waiting in its fetch, not
// failed; once the second goes on, that cube reads on from where it was. The groups' coordinator
// is the first broker.
import { randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { type Admin, type Producer, logLevel } from 'kafkajs';
import { createKafka } from '../../src/kafka/client.ts';
import { closeFetchSession } from '../../src/kafka/fetch-session.ts';
import { SessionPartitionConsumer } from '../../src/kafka/session-consumer.ts';
import { type KafkaBroker, startJoiningBroker, startKafka } from '../../src/local/kafka.ts';
import { stopService } from '../../src/local/processes.ts';
import { produce } from '../support/events.ts';
import { RecordingSink } from '../support/recording-sink.ts';

import { waitFor } from '../support/wait.ts';
import { tempDir } from '../support/scratch-dirs.ts';

let dir: string;
let first: KafkaBroker | undefined;
let second: KafkaBroker | undefined;
let admin: Admin | undefined;
let producer: Producer | undefined;

beforeAll(async () => {
  dir = tempDir('fetch-brokers');
  first = await startKafka(join(dir, 'kafka-1'));
  // The groups' coordinators all on the first broker: the offsets topic is made (at the first
  // coordinator lookup) and led before the second broker is there to hold any of it.
  const kafka = createKafka({
    clientId: 'fetch-brokers-setup',
    brokers: [first.bootstrap],
    logLevel: logLevel.NOTHING,
  });
  const setup = kafka.admin();
  await setup.connect();
  try {
    await waitFor('the offsets topic to be led', async () => {
      await setup.describeGroups(['fetch-brokers-setup']);
      const { topics } = await setup.fetchTopicMetadata({ topics: ['__consumer_offsets'] });
      return topics[0]!.partitions.every((p) => p.leader === 1);
    });
  } finally {
    await setup.disconnect();
  }
  second = await startJoiningBroker(join(dir, 'kafka-2'), first, 2);
}, 180_000);

afterAll(async () => {
  await producer?.disconnect();
  await admin?.disconnect();
  if (second) {
    process.kill(second.pid, 'SIGCONT');
    await stopService(second.pid);
  }
  if (first) await stopService(first.pid);
  rmSync(dir, { recursive: true, force: true });
});

const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => from + i);

test('a cube on one broker reads on while the broker of another cube of the session does not answer', async () => {
  const clientOf = (clientId: string) =>
    createKafka({ clientId, brokers: [first!.bootstrap], logLevel: logLevel.NOTHING });
  const kafka = clientOf('fetch-brokers-test');
  admin = kafka.admin();
  await admin.connect();
  producer = kafka.producer();
  await producer.connect();
  // One topic led by each broker.
  const [onFirst, onSecond] = [1, 2].map((b) => `led-by-${b}-${randomUUID().slice(0, 8)}`);
  await admin.createTopics({
    waitForLeaders: true,
    topics: [
      { topic: onFirst!, replicaAssignment: [{ partition: 0, replicas: [1] }] },
      { topic: onSecond!, replicaAssignment: [{ partition: 0, replicas: [2] }] },
    ],
  });
  await produce(producer, onFirst!, 0, range(0, 3).map(String));
  await produce(producer, onSecond!, 0, range(0, 3).map(String));

  const client = clientOf('fetch-brokers-session');
  const sinks = { first: new RecordingSink(), second: new RecordingSink() };
  const consumers = [
    [onFirst!, sinks.first],
    [onSecond!, sinks.second],
  ].map(
    ([topic, sink]) =>
      new SessionPartitionConsumer({
        kafka: client,
        topic: topic as string,
        groupId: `fs-brokers-${randomUUID().slice(0, 8)}`,
        sink: sink as RecordingSink,
      }),
  );
  for (const c of consumers) await c.start(new Map([[0, 0n]]));
  await waitFor('both cubes to read their topics', () =>
    Promise.resolve(sinks.first.seen(0).length === 3 && sinks.second.seen(0).length === 3),
  );

  // The second broker stops answering: its fetch (the session's next to it) waits, up to
  // kafkajs's request timeout (30 s). Rounds that waited for every broker's fetch held the first
  // broker's cube that long, and ended with the second's cube failed.
  process.kill(second!.pid, 'SIGSTOP');
  try {
    // The fetch to the first broker under way as it stopped answers at once; those after it are
    // the ones that waited for the second's.
    for (const [from, to] of [
      [3, 6],
      [6, 9],
      [9, 12],
    ] as const) {
      await produce(producer, onFirst!, 0, range(from, to).map(String));
      await waitFor(
        `the cube on the first broker to read on to ${to}`,
        () => Promise.resolve(sinks.first.seen(0).length === to),
        25_000,
      );
    }
    expect(sinks.second.crash).toBeUndefined();
  } finally {
    process.kill(second!.pid, 'SIGCONT');
  }
  await produce(producer, onSecond!, 0, range(3, 5).map(String));
  await waitFor('the cube on the second broker to read on', () =>
    Promise.resolve(sinks.second.seen(0).length === 5),
  );
  expect(sinks.first.seen(0)).toEqual(range(0, 12));
  expect(sinks.second.seen(0)).toEqual(range(0, 5));
  expect(sinks.first.crash).toBeUndefined();
  expect(sinks.second.crash).toBeUndefined();
  for (const c of consumers) await c.stop();
  await closeFetchSession(client);
});
