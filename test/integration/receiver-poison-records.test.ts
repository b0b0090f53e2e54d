// One record cannot poison a partition: a record ten years ahead written into a partition under
// steady traffic is rejected `future_timestamp` (its event time is far past its Kafka batch's
// timestamp) and moves no watermark, so every record after it still counts; records before 2000
// and dimension values past the cube's bound are rejected by their own reasons. The totals equal
// the ground truth without the bad records, and every offset is still accounted once. A batch
// that decompresses past the receiver's bound, whatever its codec, is skipped: its records are
// rejected `batch_too_large`, its offsets accounted, the records after it read.
import { codecNames, kafkajsCompression } from '../../src/kafka/codecs.ts';
import {
  type ProducedRecord,
  assignRequest,
  badEvent,
  createTopic,
  decompressionBomb,
  highWatermarks,
  makeEvents,
  produceRecords,
  testSchema,
} from '../support/events.ts';
import { modelCube } from '../support/cube-model.ts';
import {
  expectCountedAsModeled,
  expectTiling,
  rangesOf,
  waitForPositions,
} from '../support/receiver-checks.ts';
import { useReceiver } from '../support/receiver-fixture.ts';

const fixture = useReceiver({ id: 'r-poison' });
const { env, kafka } = fixture;
const year = 365 * 24 * 3_600_000;

test('a record ten years ahead is rejected future_timestamp and the records after it all count', async () => {
  const cube = 'poison-records';
  const topic = await createTopic(fixture.admin, 2);
  // Event times from now on (the batches' timestamps are the time they are written): within the
  // cube's skew of their batches, in one-hour windows that stay open.
  const t0 = Date.now() - 60_000;
  const before = makeEvents(0, 300, t0, 100);
  const after = makeEvents(0, 300, t0 + 30_000, 100, 1);
  const records = new Map<number, ProducedRecord[]>([
    [0, [...before, badEvent('future_timestamp', { ts: t0 + 10 * year }), ...after]],
    [
      1,
      [
        ...makeEvents(1, 100, t0),
        // Seconds for milliseconds, and a dimension value past the default bound (4096 bytes).
        badEvent('ancient_timestamp', { ts: Math.floor(t0 / 1000) }),
        badEvent('dimension_too_long', { ts: t0 + 20_000, country: 'x'.repeat(5000) }),
        ...makeEvents(1, 100, t0 + 20_000, 100, 2),
      ],
    ],
  ]);
  const model = modelCube(testSchema, records);
  expect(model.rejected).toEqual({
    future_timestamp: 1,
    ancient_timestamp: 1,
    dimension_too_long: 1,
  });

  await fixture.receiver.client.assign(
    cube,
    assignRequest(env.kafka.bootstrap, topic, 'rs-a', [
      { partition: 0, position: '0' },
      { partition: 1, position: '0' },
    ]),
  );
  // Steady traffic while the receiver reads: batches of 50 records, the bad ones among them.
  for (const [p, list] of records) await produceRecords(fixture.producer, topic, p, list, 50);
  const end = await highWatermarks(kafka, topic);
  const status = await waitForPositions(fixture.receiver.client, cube, Object.fromEntries(end));

  expect(status.ingested).toBe(300 + 300 + 100 + 100);
  const p0 = status.partitions.find((p) => p.partition === 0)!;
  expect(p0.watermark).toBe(model.watermarks.get(0));
  expect(status.rejected.too_late).toBeUndefined();
  await expectCountedAsModeled(fixture.receiver, cube, status, model, end);
});

test('a batch that decompresses past the bound, in any codec, is skipped: its records rejected batch_too_large, those after it read, offsets tiled', async () => {
  const receiver = fixture.newReceiver({
    id: 'r-bomb',
    env: { STREAMCUBE_MAX_DECOMPRESSED_MIB: '1' },
  });
  await receiver.start();
  const t0 = Date.now() - 60_000;
  const bombed = codecNames.filter((c) => c !== 'none');
  const topics = new Map<string, string>();
  for (const codec of bombed) {
    const topic = await createTopic(fixture.admin, 1);
    topics.set(codec, topic);
    await produceRecords(fixture.producer, topic, 0, makeEvents(0, 50, t0));
    // Two records of 1 MiB (spaces in a JSON string) in one batch of a few kilobytes: the broker
    // takes it (it is within message.max.bytes compressed), the receiver does not inflate it.
    const bomb = decompressionBomb(t0, 2 ** 20);
    await fixture.producer.send({
      topic,
      acks: -1,
      compression: kafkajsCompression[codec],
      messages: [
        { partition: 0, value: bomb },
        { partition: 0, value: bomb },
      ],
    });
    await produceRecords(fixture.producer, topic, 0, makeEvents(0, 50, t0 + 50_000, 1000, 1));
    await receiver.client.assign(
      `bomb-${codec}`,
      assignRequest(env.kafka.bootstrap, topic, 'rs-a', [{ partition: 0, position: '0' }]),
    );
  }
  for (const codec of bombed) {
    const cube = `bomb-${codec}`;
    const status = await waitForPositions(receiver.client, cube, { 0: 102n });
    expect([codec, status.rejected]).toEqual([codec, { batch_too_large: 2 }]);
    expect(status.ingested).toBe(100);
    expect(status.consumer).toMatchObject({ state: 'running', failures: 0 });
    expectTiling(rangesOf(0, status.segments), 0n, 102n);
  }
  expect((await fetch(`${receiver.baseUrl}/healthz`)).status).toBe(200);
});
