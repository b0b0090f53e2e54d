// Hostile records in a live cube, written as production producers write them: Kafka's own Java
// producer (lz4 batches, linger) puts records ten years ahead, before 2000 and with dimension
// values past the bound among good ones, into a cube the real operator runs on two replica sets.
// Every receiver stays up, rejects each bad record by its own reason (status and metrics), keeps
// every good record after it (no watermark moved, nothing too late), and its segments still tile
// every offset; the operator says Degraded EventsRejected with the counts by reason, and the cube
// stays Ready. A decompression bomb (zstd, from the Java producer too) in another cube on the same
// receiver is skipped: its record rejected batch_too_large, the records after it read, while the
// receiver reads its other cube on.
import type { CubeAssignment } from '../../src/api/cube-assignment.ts';
import {
  type BadRecord,
  type ProducedRecord,
  type TestEvent,
  createTopic,
  decompressionBomb,
  highWatermarks,
  poisonRecords,
  testSchema,
} from '../support/events.ts';
import { modelCube } from '../support/cube-model.ts';
import { conditionOf } from '../support/cluster.ts';
import { type JavaProducer, startJavaProducer } from '../support/java-producer.ts';
import { eventAt, javaProducedCube } from '../support/loaded-cube.ts';
import { useOperatorStack } from '../support/operator-stack.ts';
import {
  expectCountedAsModeled,
  expectTiling,
  metricValue,
  rangesOf,
  totalsFromQuery,
  waitForPositions,
} from '../support/receiver-checks.ts';
import { waitFor } from '../support/wait.ts';

/** The decompression bound of every receiver: 1 MiB per record batch (default 64 MiB). */
const boundMiB = 1;
const stack = useOperatorStack({
  name: 'poison',
  replicaSets: ['rs-a', 'rs-b'],
  receiver: { env: { STREAMCUBE_MAX_DECOMPRESSED_MIB: String(boundMiB) } },
});
const producers: JavaProducer[] = [];
afterAll(() => {
  for (const p of producers) p.kill();
});

const partitions = [0, 1, 2, 3];
/** Good records a partition gets before its bad ones, and again after them. */
const goodAround = 60;
/**
 * Which of poisonRecords() each partition gets: at least two per partition, so that each replica
 * set (two partitions under `sticky`) rejects more than the default threshold, 1% of what it reads.
 */
const poisonOf: number[][] = [
  [0, 1],
  [2, 3],
  [4, 5],
  [0, 2, 4],
];

/** The poisoned cube, once the first test has filled it: the second writes to it again. */
let poisoned: { topic: string; java: JavaProducer; owned: Record<string, number[]> } | undefined;

/** The records `java` wrote, per partition in offset order, bad ones as `bad` names them. */
function writtenRecords(
  java: JavaProducer,
  bad: Map<string, string>,
): Map<number, ProducedRecord[]> {
  const out = new Map<number, ProducedRecord[]>(partitions.map((p) => [p, []]));
  for (const r of [...java.records].sort((a, b) => (a.offset < b.offset ? -1 : 1))) {
    const reason = bad.get(r.value);
    out
      .get(r.partition)!
      .push(
        reason
          ? ({ raw: r.value, reason } satisfies BadRecord)
          : (JSON.parse(r.value) as TestEvent),
      );
  }
  return out;
}

const describeReasons = (rejected: Record<string, number>): string =>
  Object.entries(rejected)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([reason, n]) => `${reason} ${n}`)
    .join(', ');

test('hostile records among good ones, from the Java producer: each rejected by its reason, every later record kept, offsets tiled; Degraded EventsRejected with the reasons, still Ready', async () => {
  const cube = 'poisoned';
  // Hour windows (testSchema): nothing seals during the test, so each receiver's segments hold
  // every offset it read.
  const { topic, java } = await javaProducedCube(stack, producers, cube, 4, testSchema);
  const owned = (await stack.waitForSettled(cube)).status!.assignment!;
  expect(Object.keys(owned).sort()).toEqual(['rs-a', 'rs-b']);

  const poison = poisonRecords(Date.now());
  const bad = new Map(poison.map((r) => [r.raw, r.reason]));
  await Promise.all(
    partitions.map((p) => {
      const now = Date.now();
      const good = (from: number): TestEvent[] =>
        Array.from({ length: goodAround }, (_, i) => eventAt(p, from + i, now));
      // One send: the bad records share lz4 batches with the good ones around them.
      return java.send(p, [
        ...good(0),
        ...poisonOf[p]!.map((i) => poison[i]!.raw),
        ...good(goodAround),
      ]);
    }),
  );
  // A burst of distinct keys past schema.maxRowsPerWindow (`too_many_rows`) is receiver-replicas'
  // test: both replicas of a set, and one restarted from its checkpoint, must cut it alike.
  const end = await highWatermarks(stack.kafka, topic);
  const written = writtenRecords(java, bad);

  const rejectedBySet: Record<string, { rejected: Record<string, number>; read: number }> = {};
  for (const [rs, list] of Object.entries(owned)) {
    const receiver = stack.receivers[rs]!;
    const ends = new Map(list.map((p) => [p, end.get(p)!]));
    const status = await waitForPositions(receiver.client, cube, Object.fromEntries(ends));
    const model = modelCube(testSchema, new Map(list.map((p) => [p, written.get(p)!])));
    expect(model.rejected.too_late).toBeUndefined();
    // Rejected by reason (status and metrics), the rows of every good record, every offset once.
    await expectCountedAsModeled(receiver, cube, status, model, ends);
    // No bad record moved a watermark: each is that of the partition's good records.
    for (const p of list)
      expect([p, status.partitions.find((s) => s.partition === p)?.watermark]).toEqual([
        p,
        model.watermarks.get(p),
      ]);
    const read = list.reduce((n, p) => n + Number(end.get(p)!), 0);
    rejectedBySet[rs] = { rejected: model.rejected, read };
  }
  // Every bad record written is counted once, by its reason.
  const allRejected: Record<string, number> = {};
  for (const { rejected } of Object.values(rejectedBySet))
    for (const [reason, n] of Object.entries(rejected))
      allRejected[reason] = (allRejected[reason] ?? 0) + n;
  const expected: Record<string, number> = {};
  for (const i of poisonOf.flat())
    expected[poison[i]!.reason] = (expected[poison[i]!.reason] ?? 0) + 1;
  expect(allRejected).toEqual(expected);

  // The operator: Degraded EventsRejected naming each set's receiver with its counts by reason.
  const reported = (c: CubeAssignment): boolean => {
    const degraded = conditionOf(c, 'Degraded');
    return (
      degraded?.status === 'True' &&
      degraded.reason === 'EventsRejected' &&
      Object.entries(rejectedBySet).every(([rs, { rejected, read }]) =>
        degraded.message.includes(
          `receiver ${rs}-0 (${rs}) rejected ${Object.values(rejected).reduce((a, n) => a + n, 0)} of the ${read} records`,
        ),
      )
    );
  };
  const degraded = await stack.waitForCube(
    cube,
    'Degraded EventsRejected with every count',
    reported,
  );
  for (const { rejected } of Object.values(rejectedBySet))
    expect(conditionOf(degraded, 'Degraded')?.message).toContain(`(${describeReasons(rejected)})`);
  expect(conditionOf(degraded, 'Ready')?.status).toBe('True');
  const event = await waitFor('a Warning Event EventsRejected', async () =>
    (await stack.cubeEvents(cube)).find(
      (e) => e.type === 'Warning' && e.reason === 'EventsRejected',
    ),
  );
  const named = /\(([a-z_, ]+)\); the Degraded condition has the counts$/.exec(event.message ?? '');
  expect(named?.[1]?.split(', ').every((reason) => reason in expected)).toBe(true);

  for (const r of Object.values(stack.receivers)) expect(r.child?.exitCode ?? null).toBeNull();
  poisoned = { topic, java, owned };
}, 240_000);

test('a decompression bomb from the Java producer is skipped: its record rejected batch_too_large, counted, its offset tiled, every later record kept; Degraded EventsRejected, still Ready, and the receiver reads its other cube on', async () => {
  const cube = 'bombed';
  const topic = await createTopic(stack.admin, 1);
  await stack.createCube(cube, topic, { replicaSets: ['rs-a'] });
  await stack.waitForSettled(cube);
  // 2 MiB of one record in a zstd batch of a few kilobytes: the broker takes it (within
  // message.max.bytes compressed); the client checks the uncompressed size against
  // max.request.size, raised here, as a producer of large records would.
  const java = await startJavaProducer({
    topic,
    compression: 'zstd',
    settings: { 'max.request.size': String(4 << 20) },
  });
  producers.push(java);
  const now = Date.now();
  const good = (from: number, n: number): TestEvent[] =>
    Array.from({ length: n }, (_, i) => eventAt(0, from + i, now));
  await java.send(0, good(0, 20));
  const [bombAt] = await java.send(0, [decompressionBomb(now, 2 * (boundMiB << 20))]);
  await java.send(0, good(20, 20));
  expect(bombAt).toBe(20n);

  const rsA = stack.receivers['rs-a']!;
  const end = (await highWatermarks(stack.kafka, topic)).get(0)!;
  expect(end).toBe(41n);
  const status = await waitForPositions(rsA.client, cube, { 0: end });
  expect(status.rejected).toEqual({ batch_too_large: 1 });
  expect(status.ingested).toBe(40);
  expect(status.consumer).toMatchObject({ state: 'running', failures: 0 });
  expectTiling(rangesOf(0, status.segments), 0n, end);
  const metrics = await fetch(`${rsA.baseUrl}/metrics`).then((r) => r.text());
  expect(
    metricValue(metrics, 'streamcube_receiver_events_rejected_total', {
      cube,
      reason: 'batch_too_large',
    }),
  ).toBe(1);
  expect(totalsFromQuery(await rsA.client.query(cube, { groupBy: [] })).events).toBe(40);

  const degraded = await stack.waitForCube(
    cube,
    'Degraded EventsRejected naming batch_too_large',
    (c) =>
      conditionOf(c, 'Degraded')?.reason === 'EventsRejected' &&
      (conditionOf(c, 'Degraded')?.message ?? '').includes(
        'receiver rs-a-0 (rs-a) rejected 1 of the 41 records',
      ),
  );
  expect(conditionOf(degraded, 'Degraded')?.message).toContain('(batch_too_large 1)');
  expect(conditionOf(degraded, 'Ready')?.status).toBe('True');

  expect(rsA.child?.exitCode ?? null).toBeNull();
  expect((await fetch(`${rsA.baseUrl}/healthz`)).status).toBe(200);
  // Its other cube reads on: ten more records to each of its partitions there are read.
  if (!poisoned) throw new Error('the poisoned cube of the first test is not there');
  const { topic: poisonedTopic, java: poisonedJava, owned } = poisoned;
  for (const p of owned['rs-a']!) await poisonedJava.send(p, good(1000, 10));
  const poisonedEnd = await highWatermarks(stack.kafka, poisonedTopic);
  await waitForPositions(
    rsA.client,
    'poisoned',
    Object.fromEntries(owned['rs-a']!.map((p) => [p, poisonedEnd.get(p)!])),
  );
  expect((await rsA.client.cubeStatus('poisoned')).consumer.state).toBe('running');
}, 180_000);
