// Every codec Kafka producers use decodes: one topic whose log holds, one stretch after another,
// batches Kafka's own Java producer wrote uncompressed and with gzip, snappy, lz4 and zstd. A
// receiver consumes all of it; its aggregates equal the ground truth and its offsets tile. And
// what kafkajs writes with our codecs (tests and the bench do) is what the broker accepts.
import { assignRequest, createTopic, makeEvents, type TestEvent } from '../support/events.ts';
import {
  expectRowsOfEvents,
  expectTiling,
  rangesOf,
  waitForPositions,
} from '../support/receiver-checks.ts';
import {
  compressions,
  startJavaProducer,
  valuesByPartition,
  type WrittenRecord,
} from '../support/java-producer.ts';
import { logBatches } from '../support/log-batches.ts';
import { useReceiver } from '../support/receiver-fixture.ts';
import { kafkajsCompression } from '../../src/kafka/codecs.ts';

const fixture = useReceiver({ id: 'r-codecs' });
const T0 = Date.UTC(2026, 0, 1);
const partitions = [0, 1, 2];
/** Per codec and partition: this many sends of `perSend` events, each flushed as its own batch. */
const sends = 4;
const perSend = 50;

test('batches written with none, gzip, snappy, lz4 and zstd all decode: exact aggregates, tiled offsets', async () => {
  const { admin, receiver, env } = fixture;
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
  const byPartition = valuesByPartition<TestEvent>(written, partitions);
  expect([...byPartition.values()].map((events) => events.length)).toEqual(
    partitions.map(() => Number(end)),
  );
  await expectRowsOfEvents(receiver.client, 'codecs', byPartition);
  for (const p of partitions) expectTiling(rangesOf(p, status.segments), 0n, end);
});

test('batches kafkajs writes with every codec are accepted by the broker and decode', async () => {
  const { admin, receiver, env, kafka } = fixture;
  const topic = await createTopic(admin, 1);
  const producer = kafka.producer();
  await producer.connect();
  const sent: TestEvent[] = [];
  try {
    for (const [k, compression] of compressions.entries()) {
      // 3,000 events: about 200 KiB a batch, several LZ4 blocks.
      const events = makeEvents(0, 3000, T0 + k * 60_000, 10, k);
      // The broker decompresses every batch to validate it: a frame Java cannot read fails here.
      await producer.send({
        topic,
        acks: -1,
        compression: kafkajsCompression[compression],
        messages: events.map((e) => ({ partition: 0, value: JSON.stringify(e) })),
      });
      sent.push(...events);
    }
  } finally {
    await producer.disconnect();
  }
  expect((await logBatches(topic, 0)).map((b) => b.codec)).toEqual([...compressions]);

  await receiver.client.assign(
    'codecs-kafkajs',
    assignRequest(env.kafka.bootstrap, topic, 'rs-a', [{ partition: 0, position: '0' }]),
  );
  await waitForPositions(receiver.client, 'codecs-kafkajs', { 0: BigInt(sent.length) });
  await expectRowsOfEvents(receiver.client, 'codecs-kafkajs', new Map([[0, sent]]));
});
