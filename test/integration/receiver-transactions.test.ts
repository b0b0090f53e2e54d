// Transactions stay exact at the edges. Kafka's own transactional producers write committed,
// aborted and interleaved transactions; a receiver counts exactly the committed records, moves
// past commit and abort markers (so a log that ends with one is consumed to its end), drains to
// a stop offset that lies past a marker, and lets a quiet partition ending in a marker go idle.
import {
  highWatermarks,
  assignRequest,
  createTopic,
  makeEvents,
  type TestEvent,
} from '../support/events.ts';
import {
  expectRowsOfEvents,
  expectTiling,
  rangesOf,
  waitForPositions,
  expectQueriedTotals,
  expectDrainedTo,
} from '../support/receiver-checks.ts';
import {
  type JavaProducer,
  startJavaProducer,
  valuesByPartition,
} from '../support/java-producer.ts';
import { logBatches } from '../support/log-batches.ts';
import { type ReceiverFixture, useReceiver } from '../support/receiver-fixture.ts';
import { waitFor } from '../support/wait.ts';

const T0 = Date.UTC(2026, 0, 2);

/** `count` events of a partition, `minute` minutes into the hour (all in one 1 h window). */
const events = (partition: number, count: number, minute: number): TestEvent[] =>
  makeEvents(partition, count, T0 + minute * 60_000, 100, minute);

/** What a read_committed consumer sees of these producers, per partition in offset order. */
const visibleByPartition = (producers: JavaProducer[], partitions: number[]) =>
  valuesByPartition<TestEvent>(
    producers.flatMap((p) => p.visibleRecords()),
    partitions,
  );

async function withProducers<T>(
  producers: Promise<JavaProducer>[],
  body: (producers: JavaProducer[]) => Promise<T>,
): Promise<T> {
  const started = await Promise.all(producers);
  try {
    const result = await body(started);
    await Promise.all(started.map((p) => p.close()));
    return result;
  } finally {
    for (const p of started) p.kill();
  }
}

function assignFromStart(
  fixture: ReceiverFixture,
  cube: string,
  topic: string,
  partitions: number[],
) {
  return fixture.receiver.client.assign(
    cube,
    assignRequest(
      fixture.env.kafka.bootstrap,
      topic,
      'rs-a',
      partitions.map((p) => ({ partition: p, position: '0' })),
    ),
  );
}

describe('transactions, with the default idle timeout', () => {
  const fixture = useReceiver({ id: 'r-transactions' });

  test('committed, aborted and interleaved transactions: exactly the committed records count', async () => {
    const { admin, receiver, kafka } = fixture;
    const topic = await createTopic(admin, 3);
    const partitions = [0, 1, 2];
    const producers = await withProducers(
      [
        startJavaProducer({ topic, transactionalId: `${topic}-a`, compression: 'lz4' }),
        startJavaProducer({ topic, transactionalId: `${topic}-b`, compression: 'zstd' }),
        startJavaProducer({ topic, compression: 'snappy' }),
      ],
      async (started) => {
        const [a, b, plain] = started as [JavaProducer, JavaProducer, JavaProducer];
        // Partition 0, one after another: commit, abort, commit.
        await a.inTransaction(() => a.send(0, events(0, 40, 1)));
        await a.begin();
        await a.send(0, events(0, 25, 2));
        await a.abort();
        await a.inTransaction(() => a.send(0, events(0, 15, 3)));
        // Partitions 1 and 2, interleaved: two open transactions and a plain producer write
        // between each other; a commits, b aborts, then b commits a transaction of its own and
        // a aborts one, so partition 1 ends with an abort marker and partition 2 with a commit.
        await a.begin();
        await b.begin();
        await a.send(1, events(1, 20, 4));
        await b.send(1, events(1, 20, 5));
        await plain.send(1, events(1, 10, 6));
        await a.send(2, events(2, 20, 7));
        await b.send(2, events(2, 20, 8));
        await a.commit();
        await b.send(1, events(1, 5, 9));
        await b.abort();
        await b.inTransaction(() => b.send(2, events(2, 12, 10)));
        await a.begin();
        await a.send(1, events(1, 7, 11));
        await a.abort();
        return started;
      },
    );

    // The log holds the markers this story wrote, and each partition's log ends with one.
    const markers = { 0: 3, 1: 3, 2: 3 };
    for (const p of partitions) {
      const batches = await logBatches(topic, p);
      expect([p, batches.filter((b) => b.control).length, batches.at(-1)?.control]).toEqual([
        p,
        markers[p as 0 | 1 | 2],
        true,
      ]);
    }

    await assignFromStart(fixture, 'transactions', topic, partitions);
    const end = await highWatermarks(kafka, topic);
    const status = await waitForPositions(receiver.client, 'transactions', Object.fromEntries(end));
    expect(status.partitions.map((p) => [p.partition, p.lag])).toEqual(
      partitions.map((p) => [p, '0']),
    );
    expect(status.rejected).toEqual({});

    const visible = visibleByPartition(producers, partitions);
    expect(partitions.map((p) => visible.get(p)?.length)).toEqual([55, 30, 32]);
    await expectRowsOfEvents(receiver.client, 'transactions', visible);
    // Markers and aborted records are offsets of the log too: every one is accounted once.
    for (const [p, e] of end) expectTiling(rangesOf(p, status.segments), 0n, e);
  });

  test('a drain whose stop offset lies past a commit or an abort marker finishes there', async () => {
    const { admin, receiver, kafka } = fixture;
    const cube = 'transactions-drain';
    const topic = await createTopic(admin, 3);
    const partitions = [0, 1, 2];
    await assignFromStart(fixture, cube, topic, partitions);
    // Paused while the transactions are written: each partition's first fetch then holds the
    // records and the marker together.
    await receiver.client.pause(cube, partitions);
    const committed = events(0, 30, 1);
    const alsoCommitted = events(2, 30, 3);
    await withProducers(
      [startJavaProducer({ topic, transactionalId: `${topic}-tx`, compression: 'gzip' })],
      async ([tx]) => {
        await tx!.inTransaction(() => tx!.send(0, committed));
        await tx!.begin();
        await tx!.send(1, events(1, 30, 2));
        await tx!.abort();
        await tx!.inTransaction(() => tx!.send(2, alsoCommitted));
      },
    );
    // Records 0-29, the marker at 30: the high watermark is past the marker.
    await endsOnceMarked(kafka, topic, { 0: 31n, 1: 31n, 2: 31n });

    // Partitions 0 and 1 drain to the high watermark, past their markers; partition 2 to the
    // marker's own offset, just after its last record.
    await expectDrainedTo(receiver.client, cube, { 0: '31', 1: '31', 2: '30' });
    await expectQueriedTotals([receiver.client], cube, [...committed, ...alsoCommitted]);
    const status = await receiver.client.cubeStatus(cube);
    expectTiling(rangesOf(0, status.segments), 0n, 31n);
    expectTiling(rangesOf(2, status.segments), 0n, 30n);
    // Partition 1 gave no event: its offsets wait for the next segment it writes to.
    expect(rangesOf(1, status.segments)).toEqual([]);
  });
});

/**
 * The partitions' ends once they reach `expected`. A commit or abort returns when the coordinator
 * has logged it; the markers reach the partitions a moment later, and until then the ends read
 * (the last stable offsets) stop at the transaction's first record.
 */
async function endsOnceMarked(
  kafka: Parameters<typeof highWatermarks>[0],
  topic: string,
  expected: Record<number, bigint>,
): Promise<Map<number, bigint>> {
  let last: Map<number, bigint> | undefined;
  try {
    return await waitFor(
      'the transaction markers',
      async () => {
        last = await highWatermarks(kafka, topic);
        return Object.entries(expected).every(([p, e]) => last!.get(Number(p)) === e) && last;
      },
      30_000,
    );
  } catch {
    // Say what the ends were, as the comparison of before did.
    expect(Object.fromEntries(last ?? [])).toEqual(expected);
    throw new Error('unreachable');
  }
}

describe('transactions, with a short idle timeout', () => {
  const fixture = useReceiver({ id: 'r-transactions-idle', idleTimeout: '2s' });

  test('a quiet partition whose log ends with a marker goes idle, and its window seals', async () => {
    const { admin, receiver, kafka } = fixture;
    const cube = 'transactions-idle';
    const topic = await createTopic(admin, 2);
    await withProducers(
      [startJavaProducer({ topic, transactionalId: `${topic}-tx`, compression: 'lz4' })],
      async ([tx]) => {
        await tx!.inTransaction(() => tx!.send(0, events(0, 20, 1)));
        await tx!.inTransaction(() => tx!.send(1, events(1, 10, 2)));
        await tx!.begin();
        await tx!.send(1, events(1, 5, 3));
        await tx!.abort();
      },
    );
    const end = await endsOnceMarked(kafka, topic, { 0: 21n, 1: 17n });

    // Every event lies in one hour, so no watermark passes its window: only idleness seals it.
    await assignFromStart(fixture, cube, topic, [0, 1]);
    await waitForPositions(receiver.client, cube, Object.fromEntries(end));
    const sealed = await waitFor(
      'the window to seal once both partitions are idle',
      async () => {
        const status = await receiver.client.cubeStatus(cube);
        return status.segments.length === 1 && status.segments[0]!.state !== 'ACTIVE'
          ? status
          : undefined;
      },
      30_000,
    );
    expect(sealed.segments[0]!.rowCount).toBeGreaterThan(0);
    for (const [p, e] of end) expectTiling(rangesOf(p, sealed.segments), 0n, e);
  });
});
