// A receiver killed with -9 (from outside while it consumes, or by itself at a fault point inside
// a flush or right after a hand-off) and restarted on its data directory loses and duplicates
// nothing: its data equals the ground truth exactly, offsets tile, a hand-off is never redone.
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { AssignCubeRequest } from '../../src/protocol/admin-api.ts';
import { ReceiverProcess } from '../support/receiver-process.ts';
import {
  type ProducedRecord,
  assignRequest,
  createTopic,
  highWatermarks,
  makeEvents,
  makeWindowedEvents,
  produceRecords,
  testSchema,
  windowedSchema,
} from '../support/events.ts';
import { mergeRows, modelCube, sealedWindows } from '../support/cube-model.ts';
import { aggregateWithPyarrow, readHandOffsWithPyarrow } from '../support/pyarrow-reader.ts';
import {
  expectLogsTiled,
  expectRowsEqual,
  rowsHeld,
  waitForPositions,
} from '../support/receiver-checks.ts';
import { waitFor } from '../support/wait.ts';
import { useReceivers } from '../support/receiver-fixture.ts';

type Schema = AssignCubeRequest['schema'];

// Each test starts the receiver it kills.
const fixture = useReceivers('receiver-crash');
const { env, kafka } = fixture;
const T0 = Date.UTC(2026, 0, 2);
const cube = 'sales';
const partitions = [0, 1, 2, 3];

const newReceiver = (id: string): ReceiverProcess => fixture.newReceiver({ id });

async function assignAll(r: ReceiverProcess, topic: string, schema: Schema): Promise<void> {
  await r.client.assign(
    cube,
    assignRequest(
      env.kafka.bootstrap,
      topic,
      'rs-a',
      partitions.map((p) => ({ partition: p, position: '0' })),
      schema,
    ),
  );
}

/** Produces records [from, to) of every partition, partitions in parallel. */
async function produceSlice(
  topic: string,
  records: Map<number, ProducedRecord[]>,
  from: number,
  to: number,
): Promise<void> {
  await Promise.all(
    partitions.map((p) =>
      produceRecords(fixture.producer, topic, p, records.get(p)!.slice(from, to), 2500),
    ),
  );
}

const positionSum = (positions: { position: string }[]): bigint =>
  positions.reduce((a, p) => a + BigInt(p.position), 0n);

/**
 * Waits until the receiver has consumed everything and sealed what the data seals, then checks
 * that what it holds (segments still held + its hand-offs) is the ground truth exactly and that
 * the offsets of its segments tile every partition from 0.
 */
async function expectExactlyOnce(
  r: ReceiverProcess,
  topic: string,
  schema: Schema,
  records: Map<number, ProducedRecord[]>,
): Promise<void> {
  const end = await highWatermarks(kafka, topic);
  await waitForPositions(r.client, cube, Object.fromEntries(end), 90_000);
  const model = modelCube(schema, records);
  const sealed = sealedWindows(model);
  const status = await waitFor(`windows ${sealed.join(',')} handed off`, async () => {
    const s = await r.client.cubeStatus(cube);
    return s.segments.filter((g) => g.state === 'HANDED_OFF').length === sealed.length
      ? s
      : undefined;
  });
  expect(status.segments.map((s) => s.windowStart)).toEqual([...model.windows.keys()]);
  expect(status.rejected).toEqual(model.rejected);
  expectLogsTiled(end, status.segments);
  expectRowsEqual(
    await rowsHeld(r, cube, schema),
    mergeRows(schema, [...model.windows.values()].flat()),
    schema,
  );
}

test('kill -9 while consuming 200k events, restart on the same data directory: nothing lost, nothing counted twice', async () => {
  const topic = await createTopic(fixture.admin, 4);
  const perPartition = 50_000;
  const records = new Map<number, ProducedRecord[]>(
    partitions.map((p) => [p, makeEvents(p, perPartition, T0, 10)]),
  );
  const total = BigInt(perPartition * partitions.length);
  const r = newReceiver('r-kill');
  await r.start();
  await assignAll(r, topic, testSchema);

  // The first 40% while the receiver consumes, and until a checkpoint holds them.
  const firstPart = perPartition * 0.4;
  await produceSlice(topic, records, 0, firstPart);
  await waitFor('a checkpoint with the first 40%', () =>
    Promise.resolve(
      positionSum(r.checkpoint(cube)?.partitions ?? []) === BigInt(firstPart * 4) || undefined,
    ),
  );
  // The rest is produced while the receiver consumes it, and the receiver is killed mid-way.
  const rest = produceSlice(topic, records, firstPart, perPartition);
  await waitFor('consumption of the second part', async () => {
    const s = await r.client.cubeStatus(cube);
    return positionSum(s.partitions) > BigInt(firstPart * 4) || undefined;
  });
  await r.kill('SIGKILL');
  await rest;

  const durable = positionSum(r.checkpoint(cube)!.partitions);
  expect(durable).toBeGreaterThanOrEqual(BigInt(firstPart * 4));
  expect(durable).toBeLessThan(total);
  await r.start();
  await expectExactlyOnce(r, topic, testSchema, records);
});

test.each([
  ['after-fragment:12', true],
  ['before-checkpoint:8', false],
])(
  'a receiver that dies inside a flush (%s) resumes from its last checkpoint exactly',
  async (fault, leavesUnlistedFragment) => {
    const topic = await createTopic(fixture.admin, 4);
    const perPartition = 2400;
    // Forty one-minute windows: every flush writes fragments of several segments, and windows
    // seal and are handed off while the receiver consumes.
    const records = new Map<number, ProducedRecord[]>(
      partitions.map((p) => [p, makeWindowedEvents(p, perPartition, T0 + p * 700)]),
    );
    const r = newReceiver(`r-${fault.split(':')[0]!}`);
    await r.start({ STREAMCUBE_FAULT: fault });
    await assignAll(r, topic, windowedSchema);

    // Produced in slices, each waited for until checkpointed, so that every slice costs at least
    // one flush with fragments: the fault point is reached after a few slices, not at the end.
    const slice = 200;
    let produced = 0;
    while (produced < perPartition) {
      await produceSlice(topic, records, produced, produced + slice);
      produced += slice;
      const reached = await waitFor(`checkpoint at ${produced} or the fault`, () =>
        Promise.resolve(
          r.exitSignal !== null
            ? 'died'
            : positionSum(r.checkpoint(cube)?.partitions ?? []) === BigInt(produced * 4)
              ? 'checkpointed'
              : undefined,
        ),
      );
      if (reached === 'died') break;
    }
    expect(r.exitSignal).toBe('SIGKILL');
    expect(produced).toBeLessThan(perPartition);
    if (leavesUnlistedFragment) expect(r.unlistedFragments(cube).length).toBeGreaterThan(0);
    expect(positionSum(r.checkpoint(cube)!.partitions)).toBeLessThanOrEqual(BigInt(produced * 4));
    await produceSlice(topic, records, produced, perPartition);

    await r.start();
    // Fragments the dead flush wrote are discarded at start, not merged into the segments.
    expect(r.unlistedFragments(cube)).toEqual([]);
    await expectExactlyOnce(r, topic, windowedSchema, records);
  },
);

test('a receiver killed right after a hand-off finds it done after restart: one hand-off per window, nothing lost', async () => {
  const topic = await createTopic(fixture.admin, 4);
  const records = new Map<number, ProducedRecord[]>(
    partitions.map((p) => [p, makeWindowedEvents(p, 400, T0 + p * 900)]),
  );
  await produceSlice(topic, records, 0, 400);
  const r = newReceiver('r-hand-off');
  await r.start({ STREAMCUBE_FAULT: 'after-hand-off' });
  // The first window every partition has passed seals, is handed off, and the receiver dies,
  // possibly before it has answered the assign request. Hand-offs run four at once: up to three
  // others may be done too, or under way (in `.tmp` directories, which no reader takes).
  const assigned = assignAll(r, topic, windowedSchema).catch((error: unknown) => error);
  await r.exited();
  await assigned;
  expect(r.exitSignal).toBe('SIGKILL');
  const before = await readHandOffsWithPyarrow(r.options.deepStorageDir, windowedSchema);
  expect(before.length).toBeGreaterThanOrEqual(1);
  expect(before.length).toBeLessThanOrEqual(4);
  // The checkpoint does not know about the hand-offs: their segments are still IMMUTABLE there.
  const checkpointed = r.checkpoint(cube)!.segments;
  const done = before.map((h) => {
    const windowStart = Date.parse(h.manifest.windowStart);
    expect(checkpointed.find((s) => s.windowStart === windowStart)?.state).toBe('IMMUTABLE');
    const data = join(r.options.deepStorageDir, h.dir, 'data.arrow');
    return { data, bytes: readFileSync(data), mtime: statSync(data).mtimeMs };
  });

  await r.start();
  await expectExactlyOnce(r, topic, windowedSchema, records);
  const sealedStatus = await r.client.seal(cube, 30_000);
  expect(sealedStatus.segments.every((s) => s.state === 'HANDED_OFF')).toBe(true);

  // One hand-off per window, those done before the kill untouched, no temporary leftovers.
  const after = await readHandOffsWithPyarrow(r.options.deepStorageDir, windowedSchema);
  const windows = after.map((h) => h.manifest.windowStart);
  expect(new Set(windows).size).toBe(windows.length);
  expect(windows).toHaveLength(sealedStatus.segments.length);
  for (const { data, bytes, mtime } of done) {
    expect(readFileSync(data).equals(bytes)).toBe(true);
    expect(statSync(data).mtimeMs).toBe(mtime);
  }
  const leftovers = (dir: string): string[] =>
    readdirSync(dir, { recursive: true, encoding: 'utf8' }).filter((n) => n.endsWith('.tmp'));
  expect(leftovers(r.options.deepStorageDir)).toEqual([]);

  // Deep storage alone now holds everything, read by pyarrow, and its offsets tile each partition.
  const model = modelCube(windowedSchema, records);
  expectRowsEqual(
    await aggregateWithPyarrow(r.options.deepStorageDir, windowedSchema.dimensions, windowedSchema),
    mergeRows(windowedSchema, [...model.windows.values()].flat()),
    windowedSchema,
  );
  const end = await highWatermarks(kafka, topic);
  expectLogsTiled(
    end,
    after.map((h) => h.manifest),
  );
});
