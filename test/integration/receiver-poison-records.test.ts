// One record cannot poison a partition: a record ten years ahead written into a partition under
// steady traffic is rejected `future_timestamp` (its event time is far past its Kafka batch's
// timestamp) and moves no watermark, so every record after it still counts; records before 2000
// and dimension values past the cube's bound are rejected by their own reasons. The totals equal
// the ground truth without the bad records, and every offset is still accounted once. A batch
// that decompresses past the receiver's bound stops its partition there, as a corrupt batch does:
// the receiver stays up, nothing is skipped, and the consumer's error says why.
import { kafkajsCompression } from '../../src/kafka/codecs.ts';
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
import { expectCountedAsModeled, waitForPositions } from '../support/receiver-checks.ts';
import { useReceiver } from '../support/receiver-fixture.ts';
import { waitFor } from '../support/wait.ts';

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

test('a batch that decompresses past the bound stops its partition there, nothing skipped, the receiver up', async () => {
  const cube = 'decompression-bomb';
  const receiver = fixture.newReceiver({
    id: 'r-bomb',
    env: { STREAMCUBE_MAX_DECOMPRESSED_MIB: '1' },
  });
  await receiver.start();
  const topic = await createTopic(fixture.admin, 1);
  const t0 = Date.now() - 60_000;
  await produceRecords(fixture.producer, topic, 0, makeEvents(0, 50, t0));
  // One record of 2 MiB (spaces in a JSON string) in a zstd batch of a few kilobytes: the broker
  // takes it (it is within message.max.bytes compressed), the receiver refuses to inflate it.
  const bomb = decompressionBomb(t0, 2 ** 21);
  await fixture.producer.send({
    topic,
    acks: -1,
    compression: kafkajsCompression.zstd,
    messages: [{ partition: 0, value: bomb }],
  });
  await produceRecords(fixture.producer, topic, 0, makeEvents(0, 50, t0 + 50_000, 1000, 1));

  await receiver.client.assign(
    cube,
    assignRequest(env.kafka.bootstrap, topic, 'rs-a', [{ partition: 0, position: '0' }]),
  );
  const status = await waitFor('the consumer to fail on the batch', async () => {
    const s = await receiver.client.cubeStatus(cube);
    return s.consumer.state === 'failed' && s.partitions[0]!.position === '50' && s;
  });
  expect(status.consumer.error?.message).toMatch(/decompress past 1048576 bytes/);
  expect(status.ingested).toBe(50);
  expect(status.rejected).toEqual({});
  // It reads the batch again after each restart and stops there again: never past it.
  await waitFor('a restart', async () => {
    const s = await receiver.client.cubeStatus(cube);
    return s.consumer.state === 'failed' && s.consumer.failures >= 2 && s;
  });
  const again = await receiver.client.cubeStatus(cube);
  expect(again.partitions[0]!.position).toBe('50');
  expect((await fetch(`${receiver.baseUrl}/healthz`)).status).toBe(200);
});
