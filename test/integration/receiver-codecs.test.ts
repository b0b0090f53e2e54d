// Every codec Kafka producers use decodes: one topic whose log holds, one stretch after another,
// batches Kafka's own Java producer wrote uncompressed and with gzip, snappy, lz4 and zstd. A
// receiver consumes all of it; its aggregates equal the ground truth and its offsets tile.
import { logLevel, type Admin } from 'kafkajs';
import { createKafka } from '../../src/kafka/client.ts';
import { testEnvironment } from '../env/connection.ts';
import { ReceiverProcess, tempDir } from '../support/receiver-process.ts';
import {
  assignRequest,
  createTopic,
  makeEvents,
  testSchema,
  type TestEvent,
} from '../support/events.ts';
import {
  expectRowsEqual,
  expectTiling,
  rangesOf,
  waitForPositions,
} from '../support/receiver-checks.ts';
import { mergeRows, modelCube } from '../support/cube-model.ts';
import { compressions, startJavaProducer, type WrittenRecord } from '../support/java-producer.ts';
import { logBatches } from '../support/log-batches.ts';

const env = testEnvironment();
const kafka = createKafka({
  clientId: 'receiver-codecs-test',
  brokers: [env.kafka.bootstrap],
  logLevel: logLevel.NOTHING,
});
const T0 = Date.UTC(2026, 0, 1);
const partitions = [0, 1, 2];
/** Per codec and partition: this many sends of `perSend` events, each flushed as its own batch. */
const sends = 4;
const perSend = 50;

let admin: Admin;
let receiver: ReceiverProcess;

beforeAll(async () => {
  admin = kafka.admin();
  await admin.connect();
  receiver = new ReceiverProcess({
    id: 'r-codecs',
    replicaSet: 'rs-a',
    deepStorageDir: tempDir('deep'),
  });
  await receiver.start();
});

afterAll(async () => {
  await receiver?.stop();
  await admin?.disconnect();
});

test('batches written with none, gzip, snappy, lz4 and zstd all decode: exact aggregates, tiled offsets', async () => {
  const topic = await createTopic(admin, partitions.length);
  const written: WrittenRecord[] = [];
  for (const [k, compression] of compressions.entries()) {
    const producer = await startJavaProducer({ topic, compression, lingerMs: 10 });
    try {
      for (let s = 0; s < sends; s++) {
        await Promise.all(
          partitions.map((p) =>
            producer.send(
              p,
              makeEvents(p, perSend, T0 + (k * sends + s) * 60_000, 1000, k * 10 + s),
            ),
          ),
        );
        await producer.flush();
      }
      await producer.close();
    } finally {
      producer.kill();
    }
    written.push(...producer.records);
  }

  // The log really holds each codec, in the order written, in several batches each.
  const perCodec = sends * perSend;
  const end = BigInt(compressions.length * perCodec);
  for (const p of partitions) {
    const batches = await logBatches(topic, p);
    expect(batches.length).toBeGreaterThanOrEqual(compressions.length * sends);
    compressions.forEach((codec, k) => {
      const from = BigInt(k * perCodec);
      const to = from + BigInt(perCodec);
      const stretch = batches.filter((b) => b.baseOffset >= from && b.lastOffset < to);
      expect([codec, stretch.length >= sends, [...new Set(stretch.map((b) => b.codec))]]).toEqual([
        codec,
        true,
        [codec],
      ]);
    });
    expect(batches.at(-1)?.lastOffset).toBe(end - 1n);
  }

  await receiver.client.assign(
    'codecs',
    assignRequest(
      env.kafka.bootstrap,
      topic,
      'rs-a',
      partitions.map((p) => ({ partition: p, position: '0' })),
    ),
  );
  const status = await waitForPositions(
    receiver.client,
    'codecs',
    Object.fromEntries(partitions.map((p) => [p, end])),
  );
  expect(status.partitions.map((p) => [p.partition, p.state, p.lag])).toEqual(
    partitions.map((p) => [p, 'consuming', '0']),
  );
  expect(status.rejected).toEqual({});

  // Ground truth: the records the producer had acknowledged, replayed in offset order.
  const byPartition = new Map(
    partitions.map((p) => [
      p,
      written
        .filter((r) => r.partition === p)
        .sort((a, b) => (a.offset < b.offset ? -1 : 1))
        .map((r) => JSON.parse(r.value) as TestEvent),
    ]),
  );
  expect([...byPartition.values()].map((events) => events.length)).toEqual(
    partitions.map(() => Number(end)),
  );
  const model = modelCube(testSchema, byPartition);
  const answer = await receiver.client.query('codecs', { groupBy: testSchema.dimensions });
  expectRowsEqual(
    answer.rows,
    mergeRows(testSchema, [...model.windows.values()].flat()),
    testSchema,
  );
  for (const p of partitions) expectTiling(rangesOf(p, status.segments), 0n, end);
});
