// Sealing a cube hands every segment off to deep storage as Arrow IPC files with manifests: read
// back by pyarrow they give the answer the receiver gave before, and their offsets tile the log.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import {
  type ProducedRecord,
  assignRequest,
  createTopic,
  highWatermarks,
  makeEvents,
  makeWindowedEvents,
  produceRecords,
  windowedSchema,
} from '../support/events.ts';
import { modelCube } from '../support/cube-model.ts';
import { aggregateWithPyarrow, readHandOffsWithPyarrow } from '../support/pyarrow-reader.ts';
import { expectLogsTiled, expectRowsEqual, waitForPositions } from '../support/receiver-checks.ts';
import { useReceiver } from '../support/receiver-fixture.ts';
import { cubeSummaryOf } from '../../src/protocol/admin-api.ts';

const fixture = useReceiver({ id: 'r-hand-off' });
const { env, kafka } = fixture;
const T0 = Date.UTC(2026, 0, 4, 8);
const cube = 'orders';
const schema = windowedSchema;

test('seal hands every segment off; pyarrow reads back the answer given before; unassign needs release first', async () => {
  const topic = await createTopic(fixture.admin, 3);
  const partitions = [0, 1, 2];
  // Partitions 0 and 1 span several windows; partition 2 stays in the first one, so its event
  // time holds every window open until the cube is sealed.
  const records = new Map<number, ProducedRecord[]>([
    [0, makeWindowedEvents(0, 260, T0)],
    [1, makeWindowedEvents(1, 260, T0 + 400)],
    [2, makeEvents(2, 40, T0, 1000, 5)],
  ]);
  for (const [p, list] of records) await produceRecords(fixture.producer, topic, p, list);
  await fixture.receiver.client.assign(
    cube,
    assignRequest(
      env.kafka.bootstrap,
      topic,
      'rs-a',
      partitions.map((p) => ({ partition: p, position: '0' })),
      schema,
    ),
  );
  const end = await highWatermarks(kafka, topic);
  const before = await waitForPositions(fixture.receiver.client, cube, Object.fromEntries(end));
  expect(before.segments.length).toBeGreaterThanOrEqual(4);
  expect(before.segments.every((s) => s.state === 'ACTIVE')).toBe(true);
  const answer = await fixture.receiver.client.query(cube, { groupBy: ['country'] });
  expect(answer.segments).toBe(before.segments.length);
  // ?view=summary: the same status, its segments counted instead of listed.
  const { client } = fixture.receiver;
  expect(await client.cubeSummary(cube)).toEqual(cubeSummaryOf(await client.cubeStatus(cube)));
  expect((await client.cubeSummary(cube)).segments).toEqual({
    active: before.segments.length,
    immutable: 0,
    handedOff: 0,
  });

  const sealed = await fixture.receiver.client.seal(cube, 30_000);
  expect(sealed.segments.map((s) => [s.windowStart, s.state, s.rowCount])).toEqual(
    before.segments.map((s) => [s.windowStart, 'HANDED_OFF', s.rowCount]),
  );
  expect(await client.cubeSummary(cube)).toEqual(cubeSummaryOf(await client.cubeStatus(cube)));
  expect((await client.cubeSummary(cube)).segments).toEqual({
    active: 0,
    immutable: 0,
    handedOff: before.segments.length,
  });
  // Handed-off data is no longer answered locally; deep storage holds it.
  expect(await fixture.receiver.client.query(cube, { groupBy: ['country'] })).toMatchObject({
    rows: [],
    segments: 0,
  });

  // pyarrow, not our code, reads the files back and aggregates them per country.
  expectRowsEqual(
    await aggregateWithPyarrow(fixture.receiver.options.deepStorageDir, ['country'], schema),
    answer.rows,
    schema,
    ['country'],
  );

  const files = await readHandOffsWithPyarrow(fixture.receiver.options.deepStorageDir, schema);
  const model = modelCube(schema, records);
  expect(files.map((f) => Date.parse(f.manifest.windowStart))).toEqual([...model.windows.keys()]);
  for (const f of files) {
    const windowStart = Date.parse(f.manifest.windowStart);
    const segment = sealed.segments.find((s) => s.windowStart === windowStart)!;
    expect(f.fields).toEqual({
      window_start: 'timestamp[ms]',
      country: 'string',
      device: 'string',
      events: 'int64',
      revenue: 'double',
      cheapest: 'double',
      dearest: 'double',
    });
    expect(f.manifest).toMatchObject({
      cube,
      replicaSet: 'rs-a',
      receiver: 'r-hand-off',
      windowEnd: new Date(windowStart + 60_000).toISOString(),
      rowCount: f.rows.length,
      offsetRanges: segment.offsetRanges,
      schema,
    });
    expect(f.rows.length).toBe(segment.rowCount);
    expect(new Set(Object.values(f.manifest.epochs))).toEqual(new Set([1]));
    expect(f.windowStarts.every((w) => w === windowStart)).toBe(true);
    expectRowsEqual(f.rows, model.windows.get(windowStart)!, schema);
  }
  // The manifests alone account for every consumed offset of every partition, once.
  expectLogsTiled(
    end,
    files.map((f) => f.manifest),
  );

  // Unassigning is refused while partitions are assigned, even with everything handed off.
  await expect(fixture.receiver.client.unassign(cube)).rejects.toMatchObject({ status: 409 });
  expect((await fixture.receiver.client.cubeStatus(cube)).partitions.map((p) => p.state)).toEqual([
    'consuming',
    'consuming',
    'consuming',
  ]);
  await fixture.receiver.client.release(cube, partitions);
  await fixture.receiver.client.unassign(cube);
  expect((await fixture.receiver.client.status()).cubes.map((c) => c.cube)).not.toContain(cube);
  await expect(fixture.receiver.client.cubeStatus(cube)).rejects.toMatchObject({ status: 404 });
  expect(existsSync(join(fixture.receiver.dataDir, 'cubes', 'default', cube))).toBe(false);
  // Deep storage is not the receiver's to clean: the hand-offs stay.
  expect(
    await readHandOffsWithPyarrow(fixture.receiver.options.deepStorageDir, schema),
  ).toHaveLength(files.length);
});
