// Deep storage in an S3-compatible bucket, against a real server (versitygw, built by the test
// environment) and real receiver processes: sealed windows land as Arrow files with manifests
// that pyarrow reads back to the ground truth; while the server is down, hand-offs fail, are
// retried with backoff and reported (status, metrics) and the segments wait, held locally; once it
// is back everything lands, exactly once. A receiver killed between the data object and the
// manifest leaves nothing a reader would take for a hand-off, and its restart completes it.
import type { S3Client } from '@aws-sdk/client-s3';
import type { CubeStatus } from '../../src/protocol/admin-api.ts';
import { type S3TestServer, startS3Server } from '../env/s3-server.ts';
import { ReceiverProcess } from '../support/receiver-process.ts';
import {
  type ProducedRecord,
  assignRequest,
  createTopic,
  highWatermarks,
  makeWindowedEvents,
  produceRecords,
  windowedSchema,
} from '../support/events.ts';
import { modelCube, sealedWindows } from '../support/cube-model.ts';
import { readCommittedWithPyarrow, readHandOffsWithPyarrow } from '../support/pyarrow-reader.ts';
import { S3DeepStorage } from '../../src/receiver/deep-storage-s3.ts';
import {
  expectRowsEqual,
  expectTiling,
  metricValue,
  rangesOf,
  waitForPositions,
} from '../support/receiver-checks.ts';
import { createBucket, downloadHandOffs, listObjects, s3ClientFor } from '../support/s3-bucket.ts';
import { waitFor } from '../support/wait.ts';
import { useReceivers } from '../support/receiver-fixture.ts';
import { tempDir } from '../support/scratch-dirs.ts';

// Each test starts the receivers it needs, handing off to the bucket (s3Receiver).
const fixture = useReceivers('deep-storage-s3');
const { env, kafka } = fixture;
const schema = windowedSchema;
const bucket = 'streamcube-deep';
const namespace = 'team-a';
const cube = 'orders';

let server: S3TestServer;
let s3: S3Client;

// The first run on a machine builds versitygw from the Go module proxy (minutes on 2 cores).
beforeAll(async () => {
  server = await startS3Server(tempDir('s3-server'));
  s3 = s3ClientFor(server);
  await createBucket(s3, bucket);
}, 45 * 60_000);

// After the fixture's: its receivers are stopped by then.
afterAll(async () => {
  s3?.destroy();
  await server?.stop();
});

/** A receiver handing off to `s3://streamcube-deep/<prefix>` with the server's keys in its env. */
function s3Receiver(id: string, prefix: string): ReceiverProcess {
  return fixture.newReceiver({
    id,
    deepStorageDir: tempDir(`s3-copy-${id}`),
    deepStorage: [
      `--deep-storage=s3://${bucket}/${prefix}`,
      `--s3-endpoint=${server.endpoint}`,
      '--s3-force-path-style',
      '--hand-off-retry-max=2s',
    ],
    env: {
      AWS_ACCESS_KEY_ID: server.accessKeyId,
      AWS_SECRET_ACCESS_KEY: server.secretAccessKey,
      AWS_REGION: server.region,
    },
  });
}

async function produceAll(topic: string, records: Map<number, ProducedRecord[]>): Promise<void> {
  for (const [p, list] of records) await produceRecords(fixture.producer, topic, p, list);
}

/** Produces `records` to a new topic, assigns all its partitions and waits until all are read. */
async function consumeAll(
  receiver: ReceiverProcess,
  records: Map<number, ProducedRecord[]>,
): Promise<string> {
  const topic = await createTopic(fixture.admin, records.size);
  await produceAll(topic, records);
  await receiver.client.inNamespace(namespace).assign(cube, {
    ...assignRequest(
      env.kafka.bootstrap,
      topic,
      'rs-a',
      [...records.keys()].map((partition) => ({ partition, position: '0' })),
      schema,
    ),
    namespace,
  });
  await waitForPositions(
    receiver.client.inNamespace(namespace),
    cube,
    Object.fromEntries(await highWatermarks(kafka, topic)),
  );
  return topic;
}

function append(
  a: Map<number, ProducedRecord[]>,
  b: Map<number, ProducedRecord[]>,
): Map<number, ProducedRecord[]> {
  return new Map([...a].map(([p, list]) => [p, [...list, ...(b.get(p) ?? [])]]));
}

const segmentsOf = (status: CubeStatus, windows: number[]) =>
  status.segments.filter((s) => windows.includes(s.windowStart));

async function metrics(r: ReceiverProcess): Promise<string> {
  return (await fetch(`${r.baseUrl}/metrics`)).text();
}

/**
 * Each hand-off folder holds exactly data.arrow and manifest.json, the manifest written last, and
 * its replica set's folder of the window a commit record.
 */
async function expectWholeHandOffs(prefix: string): Promise<number> {
  const objects = await listObjects(s3, bucket, `${prefix}/`);
  const folders = new Map<string, Map<string, Date>>();
  const committed = new Set<string>();
  for (const o of objects) {
    if (/\/commit\.\d{8}\.json$/.test(o.key)) {
      committed.add(o.key.slice(0, o.key.lastIndexOf('/')));
      continue;
    }
    const slash = o.key.lastIndexOf('/');
    const files = folders.get(o.key.slice(0, slash)) ?? new Map<string, Date>();
    files.set(o.key.slice(slash + 1), o.lastModified);
    folders.set(o.key.slice(0, slash), files);
  }
  for (const [folder, files] of folders) {
    expect([folder, [...files.keys()].sort()]).toEqual([folder, ['data.arrow', 'manifest.json']]);
    expect(files.get('manifest.json')!.getTime()).toBeGreaterThanOrEqual(
      files.get('data.arrow')!.getTime(),
    );
    expect(committed).toContain(folder.slice(0, folder.lastIndexOf('/')));
  }
  return folders.size;
}

test('sealed windows land in the bucket; while the server is down hand-offs wait, retry and say so; back up, everything lands once', async () => {
  const prefix = 'outage';
  const receiver = s3Receiver('r-s3', prefix);
  await receiver.start();
  const partitions = [0, 1, 2];
  const T0 = Date.UTC(2026, 0, 5, 8);
  const first = new Map(partitions.map((p) => [p, makeWindowedEvents(p, 200, T0 + p * 400)]));
  const topic = await consumeAll(receiver, first);

  // Windows every partition's event time has passed seal by themselves and are handed off.
  const sealedFirst = sealedWindows(modelCube(schema, first));
  expect(sealedFirst.length).toBeGreaterThanOrEqual(2);
  const landed = await waitFor('the first sealed windows handed off', async () => {
    const status = await receiver.client.inNamespace(namespace).cubeStatus(cube);
    const segments = segmentsOf(status, sealedFirst);
    return segments.length === sealedFirst.length && segments.every((s) => s.state === 'HANDED_OFF')
      ? segments
      : undefined;
  });
  for (const s of landed)
    expect(s.handOff?.path).toMatch(
      new RegExp(
        `^s3://${bucket}/${prefix}/namespace=${namespace}/${cube}/window=${s.windowStart}/replicaSet=rs-a/r-s3\\.e1\\.[0-9a-f]{12}$`,
      ),
    );
  const model1 = modelCube(schema, first);
  const copy1 = await downloadHandOffs(s3, bucket, `${prefix}/`);
  const files1 = await readHandOffsWithPyarrow(copy1, schema);
  expect(files1.map((f) => Date.parse(f.manifest.windowStart))).toEqual(sealedFirst);
  for (const f of files1)
    expectRowsEqual(f.rows, model1.windows.get(Date.parse(f.manifest.windowStart))!, schema);
  const failuresBefore =
    metricValue(await metrics(receiver), 'streamcube_receiver_handoff_failures_total', {
      namespace,
      cube,
    }) ?? NaN;
  expect(failuresBefore).toBe(0);

  // The server goes away; Kafka does not. More windows fill and seal meanwhile.
  await server.stop();
  const second = new Map(
    partitions.map((p) => [p, makeWindowedEvents(p, 200, T0 + 240_000 + p * 400)]),
  );
  await produceAll(topic, second);
  const all = append(first, second);
  const model = modelCube(schema, all);
  const sealedDuringOutage = sealedWindows(model).filter((w) => !sealedFirst.includes(w));
  expect(sealedDuringOutage.length).toBeGreaterThanOrEqual(2);
  const waiting = await waitFor(
    'hand-offs failing and retried while the server is down',
    async () => {
      const segments = segmentsOf(
        await receiver.client.inNamespace(namespace).cubeStatus(cube),
        sealedDuringOutage,
      );
      return segments.length === sealedDuringOutage.length &&
        segments.every((s) => s.state === 'IMMUTABLE' && (s.handOff?.attempts ?? 0) >= 3)
        ? segments
        : undefined;
    },
    90_000,
  );
  for (const s of waiting) {
    // Status says what failed, where, and when it is tried again; nothing says it landed.
    expect(s.handOff?.lastError).toContain(`s3://${bucket}/${prefix}/namespace=${namespace}/`);
    expect(s.handOff?.path).toBeUndefined();
    expect(Date.parse(s.handOff!.nextAttemptAt!)).not.toBeNaN();
  }
  const during = await metrics(receiver);
  expect(
    metricValue(during, 'streamcube_receiver_handoff_failures_total', { namespace, cube }),
  ).toBeGreaterThanOrEqual(3 * sealedDuringOutage.length);
  expect(
    metricValue(during, 'streamcube_receiver_segments', { namespace, cube, state: 'IMMUTABLE' }),
  ).toBeGreaterThanOrEqual(sealedDuringOutage.length);
  // Held locally meanwhile: the query still answers every window not handed off.
  const held = await receiver.client
    .inNamespace(namespace)
    .query(cube, { groupBy: schema.dimensions });
  expect(held.segments).toBe(model.windows.size - sealedFirst.length);

  // Back up: the waiting hand-offs land by themselves, then sealing the cube hands off the rest.
  await server.start();
  await waitFor(
    'the hand-offs that waited to land',
    async () =>
      segmentsOf(
        await receiver.client.inNamespace(namespace).cubeStatus(cube),
        sealedDuringOutage,
      ).every((s) => s.state === 'HANDED_OFF'),
    90_000,
  );
  const sealed = await receiver.client.inNamespace(namespace).seal(cube, 60_000);
  expect(sealed.segments.every((s) => s.state === 'HANDED_OFF')).toBe(true);

  // A reader's view of the bucket: every window once, its rows the ground truth, and the
  // manifests alone account for every offset of every partition exactly once.
  const files = await readHandOffsWithPyarrow(
    await downloadHandOffs(s3, bucket, `${prefix}/`),
    schema,
  );
  expect(files.map((f) => Date.parse(f.manifest.windowStart))).toEqual([...model.windows.keys()]);
  for (const f of files) {
    expect(f.manifest).toMatchObject({ namespace, cube, replicaSet: 'rs-a', receiver: 'r-s3' });
    expectRowsEqual(f.rows, model.windows.get(Date.parse(f.manifest.windowStart))!, schema);
  }
  const end = await highWatermarks(kafka, topic);
  for (const p of partitions)
    expectTiling(
      rangesOf(
        p,
        files.map((f) => f.manifest),
      ),
      0n,
      end.get(p)!,
    );
  // A reader of committed copies only reads the same: one receiver, every copy committed.
  const committed = await readCommittedWithPyarrow(
    await downloadHandOffs(s3, bucket, `${prefix}/`),
    schema,
  );
  expect(committed.map((f) => f.dir).sort()).toEqual(files.map((f) => f.dir).sort());
  // No duplicate and no stray object: one data object and one manifest per window.
  expect(await expectWholeHandOffs(prefix)).toBe(model.windows.size);
  await receiver.client.inNamespace(namespace).release(cube, partitions);
  await receiver.client.inNamespace(namespace).unassign(cube);
});

test('killed between the data object and the manifest: readers see no hand-off; the restarted receiver completes it, with no duplicate', async () => {
  const prefix = 'crash';
  const receiver = s3Receiver('r-s3-crash', prefix);
  await receiver.start({ STREAMCUBE_FAULT: 'after-hand-off-data' });
  const records = new Map([[0, makeWindowedEvents(0, 150, Date.UTC(2026, 0, 6, 8))]]);
  const topic = await consumeAll(receiver, records);

  // Sealing hands off, four segments at once; the first hand-off's data object is written, then
  // the process dies, the others' data objects written or not: no manifest is.
  await receiver.client
    .inNamespace(namespace)
    .seal(cube, 30_000)
    .catch(() => undefined);
  await receiver.exited();
  expect(receiver.exitSignal).toBe('SIGKILL');
  const left = (await listObjects(s3, bucket, `${prefix}/`)).map((o) => o.key.split('/').at(-1));
  expect(left.length).toBeGreaterThanOrEqual(1);
  expect(left.length).toBeLessThanOrEqual(4);
  expect(new Set(left)).toEqual(new Set(['data.arrow']));
  expect(
    await readHandOffsWithPyarrow(await downloadHandOffs(s3, bucket, `${prefix}/`), schema),
  ).toEqual([]);

  // Restarted without the fault, it hands every sealed segment off from its checkpoint. Which
  // windows were sealed before the kill depends on whether the periodic sealing (windows past
  // the watermark) or the seal call came first: the last window is sealed again now.
  await receiver.start();
  await receiver.client.inNamespace(namespace).seal(cube, 30_000);
  await waitFor('every segment handed off after the restart', async () => {
    const status = await receiver.client.inNamespace(namespace).cubeStatus(cube);
    return status.segments.length > 0 && status.segments.every((s) => s.state === 'HANDED_OFF');
  });
  const model = modelCube(schema, records);
  const files = await readHandOffsWithPyarrow(
    await downloadHandOffs(s3, bucket, `${prefix}/`),
    schema,
  );
  expect(files.map((f) => Date.parse(f.manifest.windowStart))).toEqual([...model.windows.keys()]);
  for (const f of files)
    expectRowsEqual(f.rows, model.windows.get(Date.parse(f.manifest.windowStart))!, schema);
  expectTiling(
    rangesOf(
      0,
      files.map((f) => f.manifest),
    ),
    0n,
    (await highWatermarks(kafka, topic)).get(0)!,
  );
  expect(await expectWholeHandOffs(prefix)).toBe(model.windows.size);
});

test('credentials come from the environment (the SDK default chain): a wrong secret is refused by the server, reported and retried, nothing written', async () => {
  const prefix = 'wrong-secret';
  const receiver = s3Receiver('r-s3-wrong', prefix);
  receiver.options.env = { ...receiver.options.env, AWS_SECRET_ACCESS_KEY: 'not-the-secret' };
  await receiver.start();
  await consumeAll(receiver, new Map([[0, makeWindowedEvents(0, 30, Date.UTC(2026, 0, 7, 8))]]));
  await receiver.client.inNamespace(namespace).seal(cube, 0);
  const refused = await waitFor('hand-offs refused and retried', async () => {
    const [segment] = (await receiver.client.inNamespace(namespace).cubeStatus(cube)).segments;
    return segment?.state === 'IMMUTABLE' && (segment.handOff?.attempts ?? 0) >= 2
      ? segment
      : undefined;
  });
  // The server's own answer, as the SDK reports it: a signature made with another secret.
  expect(refused.handOff?.lastError).toMatch(/SignatureDoesNotMatch \(HTTP 403\)/);
  expect(await listObjects(s3, bucket, `${prefix}/`)).toEqual([]);
});

test('commit records: a create-if-absent PUT (If-None-Match) lets exactly one of two writers of a key win; listing finds them', async () => {
  // The store takes credentials from the SDK's default chain, as a receiver does: the env.
  const saved = { id: process.env.AWS_ACCESS_KEY_ID, secret: process.env.AWS_SECRET_ACCESS_KEY };
  process.env.AWS_ACCESS_KEY_ID = server.accessKeyId;
  process.env.AWS_SECRET_ACCESS_KEY = server.secretAccessKey;
  const storage = new S3DeepStorage({
    type: 's3',
    bucket,
    prefix: 'cas',
    endpoint: server.endpoint,
    region: server.region,
    forcePathStyle: true,
  });
  try {
    for (let i = 0; i < 5; i++) {
      const key = `w/replicaSet=rs-a/commit.0000000${i}.json`;
      const won = await Promise.all([
        storage.createObject(key, 'one'),
        storage.createObject(key, 'two'),
      ]);
      expect(won.filter(Boolean)).toHaveLength(1);
      expect(await storage.createObject(key, 'three')).toBe(false);
      expect(await storage.readObject(key)).toBe(won[0] ? 'one' : 'two');
    }
    expect(await storage.readObject('w/replicaSet=rs-a/absent.json')).toBeUndefined();
    expect((await storage.listKeys('w')).sort()).toEqual(
      [0, 1, 2, 3, 4].map((i) => `replicaSet=rs-a/commit.0000000${i}.json`),
    );
  } finally {
    storage.close();
    for (const [name, value] of [
      ['AWS_ACCESS_KEY_ID', saved.id],
      ['AWS_SECRET_ACCESS_KEY', saved.secret],
    ] as const)
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
  }
});
