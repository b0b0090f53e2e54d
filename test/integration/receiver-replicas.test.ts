// Two receivers of one replica set fed the same partitions from the same offsets hold the same
// segments (windows, offset ranges, rows, late-event decisions, hand-offs), equal to the ground truth,
// and cut a burst of distinct rows at the same records, a restarted one included.
import type { CubeStatus } from '../../src/protocol/admin-api.ts';

import {
  type ProducedRecord,
  type TestEvent,
  assignRequest,
  createTopic,
  highWatermarks,
  makeWindowedEvents,
  malformedRecords,
  produceRecords,
  testSchema,
  windowedSchema,
} from '../support/events.ts';
import { modelCube, sealedWindows } from '../support/cube-model.ts';
import { readHandOffsWithPyarrow } from '../support/pyarrow-reader.ts';
import { expectLogsTiled, expectRowsEqual, waitForPositions } from '../support/receiver-checks.ts';
import { waitFor } from '../support/wait.ts';
import { useReceivers } from '../support/receiver-fixture.ts';
import { tempDir } from '../support/scratch-dirs.ts';

const deepStorage = tempDir('deep-replicas');
// r2 parses every batch on its worker thread, r1 only large ones: both paths must agree.
const fixture = useReceivers('receiver-replicas', [
  { id: 'r1', deepStorageDir: deepStorage },
  { id: 'r2', deepStorageDir: deepStorage, env: { STREAMCUBE_WORKER_MIN_BATCH: '1' } },
]);
const { env, kafka } = fixture;
const replicas = fixture.receivers;
const T0 = Date.UTC(2026, 0, 1, 10);
const cube = 'clicks';
const schema = windowedSchema;
const dimensions = schema.dimensions;

/** What must be equal between replicas: everything but the receiver's name and hand-off path. */
const segmentsOf = (s: CubeStatus) =>
  s.segments.map(({ windowStart, windowEnd, state, rowCount, offsetRanges, epochs }) => ({
    windowStart,
    windowEnd,
    state,
    rowCount,
    offsetRanges,
    epochs,
  }));

test('replicas consuming the same offsets hold identical segments, late events included, equal to the ground truth', async () => {
  const topic = await createTopic(fixture.admin, 4);
  const partitions = [0, 1, 2, 3];
  // Several minutes of events per partition, out of order and too late ones among them, and
  // malformed records at the very start of one partition and in the middle of another.
  const records = new Map<number, ProducedRecord[]>(
    partitions.map((p) => [p, makeWindowedEvents(p, 330, T0 + p * 1500)]),
  );
  records.get(1)!.unshift(...malformedRecords(T0).slice(0, 2));
  records.get(2)!.splice(150, 0, ...malformedRecords(T0 + 150_000));

  const request = assignRequest(
    env.kafka.bootstrap,
    topic,
    'rs-a',
    partitions.map((p) => ({ partition: p, position: '0' })),
    schema,
  );
  await Promise.all(replicas.map((r) => r.client.assign(cube, request)));
  // Produced while both replicas consume, in chunks, so that they interleave partitions and
  // batches differently; the data they hold must not depend on it.
  const longest = Math.max(...partitions.map((p) => records.get(p)!.length));
  for (let i = 0; i < longest; i += 60) {
    for (const p of partitions) {
      await produceRecords(fixture.producer, topic, p, records.get(p)!.slice(i, i + 60), 60);
    }
  }
  const end = await highWatermarks(kafka, topic);
  const model = modelCube(schema, records);
  const sealed = sealedWindows(model);
  // The data is what the test needs: late events, and both sealed and still open windows.
  expect(model.rejected.too_late).toBeGreaterThan(10);
  expect(sealed.length).toBeGreaterThanOrEqual(3);
  expect(model.windows.size).toBeGreaterThan(sealed.length);

  const statuses = await Promise.all(
    replicas.map(async (r) => {
      await waitForPositions(r.client, cube, Object.fromEntries(end));
      // Windows every partition's event time has passed seal and are handed off by themselves.
      return waitFor(`${r.options.id}: windows ${sealed.join(',')} handed off`, async () => {
        const s = await r.client.cubeStatus(cube);
        const handedOff = s.segments.filter((g) => g.state === 'HANDED_OFF');
        return handedOff.length === sealed.length ? s : undefined;
      });
    }),
  );
  const [s1, s2] = statuses as [CubeStatus, CubeStatus];

  expect(segmentsOf(s1)).toEqual(segmentsOf(s2));
  expect(s1.segments.map((s) => s.windowStart)).toEqual([...model.windows.keys()]);
  expect(s1.segments.filter((s) => s.state === 'HANDED_OFF').map((s) => s.windowStart)).toEqual(
    sealed,
  );
  expect(s1.rejected).toEqual(model.rejected);
  expect(s2.rejected).toEqual(model.rejected);
  expectLogsTiled(end, s1.segments);

  // Open windows: the query answers of both replicas, window by window. Sums are compared to 1e-6:
  // a float sum depends on the order its terms were added in, and the replicas interleave
  // partitions differently (known: segments.ts sums in arrival order).
  for (const [windowStart, expected] of model.windows) {
    if (sealed.includes(windowStart)) continue;
    const q = { from: windowStart, to: windowStart + model.windowMs, groupBy: dimensions };
    const [a1, a2] = await Promise.all(replicas.map((r) => r.client.query(cube, q)));
    expect(a1!.segments).toBe(1);
    expectRowsEqual(a1!.rows, a2!.rows, schema);
    expectRowsEqual(a1!.rows, expected, schema);
  }

  // Sealed windows: each replica handed off its own copy; the copies are the same.
  const files = await readHandOffsWithPyarrow(deepStorage, schema);
  expect(files).toHaveLength(2 * sealed.length);
  for (const windowStart of sealed) {
    const copies = replicas.map((r) => {
      const copy = files.filter(
        (f) =>
          f.manifest.receiver === r.options.id &&
          f.manifest.windowStart === new Date(windowStart).toISOString(),
      );
      expect(copy).toHaveLength(1);
      return copy[0]!;
    });
    const [c1, c2] = copies as [(typeof files)[0], (typeof files)[0]];
    expectRowsEqual(c1.rows, c2.rows, schema);
    expect(c1.manifest.offsetRanges).toEqual(c2.manifest.offsetRanges);
    expect(c1.manifest.offsetRanges).toEqual(
      s1.segments.find((s) => s.windowStart === windowStart)!.offsetRanges,
    );
    expect(c1.windowStarts.every((w) => w === windowStart)).toBe(true);
    expectRowsEqual(c1.rows, model.windows.get(windowStart)!, schema);
  }
});

test('a burst of distinct rows is cut at maxRowsPerWindow per partition, alike on both replicas, and alike after a replica restarts from its checkpoint', async () => {
  const capped = { ...testSchema, maxRowsPerWindow: 20 };
  const topic = await createTopic(fixture.admin, 2);
  // Both partitions cycle over the same 40 keys, in opposite orders: each may bring 20 into the
  // window, so the segment holds all 40 (the bound is the partition's, not the segment's).
  const keyOf = (p: number, i: number): string => `k${p === 0 ? i % 40 : 39 - (i % 40)}`;
  const eventsOf = (p: number, from: number, to: number): TestEvent[] =>
    Array.from({ length: to - from }, (_, j) => ({
      ts: T0 + (from + j) * 10,
      country: keyOf(p, from + j),
      device: 'web',
      price: 1,
    }));
  /** What the rule keeps: a record whose key is among the first 20 distinct keys of its partition. */
  const expected = (p: number, count: number) => {
    const admitted = new Set<string>();
    let rejected = 0;
    for (let i = 0; i < count; i++) {
      const key = keyOf(p, i);
      if (admitted.has(key)) continue;
      if (admitted.size < 20) admitted.add(key);
      else rejected += 1;
    }
    return rejected;
  };
  const request = assignRequest(
    env.kafka.bootstrap,
    topic,
    'rs-a',
    [0, 1].map((p) => ({ partition: p, position: '0' })),
    capped,
  );
  const capCube = 'capped';
  await Promise.all(replicas.map((r) => r.client.assign(capCube, request)));
  const produceHalf = async (from: number, to: number) => {
    for (let i = from; i < to; i += 25)
      for (const p of [0, 1])
        await produceRecords(fixture.producer, topic, p, eventsOf(p, i, Math.min(i + 25, to)), 25);
  };
  await produceHalf(0, 100);
  const half = await highWatermarks(kafka, topic);
  await Promise.all(
    replicas.map((r) => waitForPositions(r.client, capCube, Object.fromEntries(half))),
  );
  // r1 is killed and resumes from its checkpoint: its row counts come back from its fragments.
  const [r1] = replicas as [(typeof replicas)[0]];
  await r1.kill();
  await r1.start();
  await produceHalf(100, 200);
  const end = await highWatermarks(kafka, topic);
  const statuses = await Promise.all(
    replicas.map(async (r) => {
      await waitForPositions(r.client, capCube, Object.fromEntries(end));
      return r.client.cubeStatus(capCube);
    }),
  );
  const tooMany = expected(0, 200) + expected(1, 200);
  expect(tooMany).toBeGreaterThan(100);
  for (const s of statuses) {
    expect(s.rejected).toEqual({ too_many_rows: tooMany });
    expect(s.segments.map((g) => g.rowCount)).toEqual([40]);
  }
  const q = { groupBy: ['country'] };
  const [a1, a2] = await Promise.all(replicas.map((r) => r.client.query(capCube, q)));
  expectRowsEqual(a1!.rows, a2!.rows, capped);
});
