// A new cube's first status already says where its partitions' logs end. The receiver learns the
// log ends as its consumer starts (the admin client reads them to learn the brokers), so its
// status right after the assign (the assign's answer; the operator reads the same for the cube's
// first Ready status, in the reconcile that placed it) has a high watermark and a lag for every
// partition, also one the consumer has fetched nothing from yet. Before, they came with the
// receiver's next periodic refresh (its flush interval), and the operator wrote the cube's status
// a second time to show them.
import { assignRequest, createTopic, produce, makeEvents } from '../support/events.ts';
import { useReceiver } from '../support/receiver-fixture.ts';

// No periodic refresh during the test: what the answer says comes from the start itself.
const fixture = useReceiver({ id: 'r-first-status', flushInterval: '1h' });

test("a new cube's assign answers with every partition's log end and lag, before any periodic refresh", async () => {
  const { admin, receiver, env } = fixture;
  const topic = await createTopic(admin, 2);
  await produce(fixture.producer, topic, 0, makeEvents(0, 3, Date.UTC(2026, 0, 1), 1000));

  const answer = await receiver.client.assign(
    'first-status',
    assignRequest(env.kafka.bootstrap, topic, 'rs-a', [
      { partition: 0, position: '0' },
      { partition: 1, position: '0' },
    ]),
  );
  expect(answer.partitions.map((p) => [p.partition, p.highWatermark])).toEqual([
    [0, '3'],
    [1, '0'],
  ]);
  // Partition 1 has nothing to read: caught up at once. Partition 0's lag is 3 or less (its
  // consumer may have read some of it already), never unknown.
  expect(answer.partitions[1]?.lag).toBe('0');
  expect(BigInt(answer.partitions[0]?.lag ?? '-1')).toBeGreaterThanOrEqual(0n);
  expect(BigInt(answer.partitions[0]?.lag ?? '4')).toBeLessThanOrEqual(3n);
});
