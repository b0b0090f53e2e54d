// The cube `npm run bench:query` asks: 1-minute windows of 16 partitions on two replica sets,
// handed off and committed by the product's own code (handOffSegment, commitWindow) into a
// directory or an S3-compatible bucket (versitygw, as the tests start it), plus the live windows
// after them, held by a fake of the receivers' query edge. Writing 30 days takes minutes, so the
// committed windows are written once into the cache directory and reused while the flags match.
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cubeSchema } from '../src/api/cube.ts';
import type { CubeAssignment } from '../src/api/cube-assignment.ts';
import type { QueryRequest, QueryResponse } from '../src/protocol/admin-api.ts';
import { settings } from '../src/local/settings.ts';
import { type DeepStorage, openDeepStorage } from '../src/receiver/deep-storage.ts';
import type { Row, Segment } from '../src/receiver/segments.ts';
import { type S3TestServer, startS3Server } from '../test/env/s3-server.ts';
import { commitSegments, receiverOver } from '../test/support/query-fixtures.ts';
import { createBucket, s3ClientFor } from '../test/support/s3-bucket.ts';
import { say } from './environment.ts';

const M = 60_000;
export const partitions = 16;
export const sets: Record<string, number[]> = {
  'rs-a': [0, 1, 2, 3, 4, 5, 6, 7],
  'rs-b': [8, 9, 10, 11, 12, 13, 14, 15],
};
/** Changes when what is written changes, so that a run does not reuse windows of before. */
const dataVersion = 'v2';
/** Offsets per partition and window. */
const perWindow = 100;
const bucket = 'streamcube-bench';
const prefix = 'lake';

export const schema = cubeSchema.parse({
  timestampField: 'ts',
  dimensions: ['country', 'device'],
  measures: [
    { name: 'events', function: 'count' },
    { name: 'revenue', function: 'sum', field: 'price', scale: 2 },
    { name: 'dearest', function: 'max', field: 'price' },
  ],
  window: '1m',
});

export interface BenchCube {
  storage: DeepStorage;
  /** The first committed window's start; the live windows follow the committed ones. */
  start: number;
  committedWindows: number;
  liveWindows: number;
  cube: CubeAssignment;
  /** The fake receivers: a set's live segments answered as the receiver would, through JSON. */
  query(set: string, request: QueryRequest): QueryResponse;
  /** Where pyarrow reads a hand-off's data file: a local path, or `bucket/key` in the bucket. */
  pyarrowPath(key: string): string;
  s3?: { endpoint: string; region: string; accessKeyId: string; secretAccessKey: string };
  close(): Promise<void>;
}

interface Written {
  start: number;
  windows: number;
  countries: number;
  seconds: number;
}

/** Window `w`'s segment of one replica set: 3 devices × `countries` rows. */
function segmentOf(
  start: number,
  w: number,
  set: string,
  countries: number,
  state: Segment['state'],
): Segment {
  const rows = new Map<string, Row>();
  for (let c = 0; c < countries; c++)
    for (const device of ['web', 'ios', 'android'])
      rows.set(`c${c}\u0000${device}`, {
        dimensions: [`c${c}`, device],
        // Integers: a scaled sum held as units (hand-off format 2) or as a float of before alike.
        values: [10, 12_345 + c, 99.99],
      });
  const owned = sets[set]!;
  return {
    key: start + w * M,
    windowStart: start + w * M,
    windowEnd: start + (w + 1) * M,
    state,
    rows,
    delta: new Map(),
    ranges: new Map(
      owned.map((p) => [p, [{ from: BigInt(w * perWindow), to: BigInt((w + 1) * perWindow) }]]),
    ),
    epochs: new Map(owned.map((p) => [p, 1])),
  };
}

/**
 * A hand-off and its commit tried again after a failure, as a receiver tries a failed hand-off
 * again: under load a commit's reads can outlast the fence read's age (hand-off-commit.ts), and
 * the hand-off and commit are idempotent.
 */
async function retried(work: () => Promise<void>, attempts = 6): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await work();
    } catch (error) {
      if (attempt >= attempts) throw error;
      say(`  a window's hand-off failed (${(error as Error).message}); trying it again`);
      await new Promise((resolve) => setTimeout(resolve, 1000 * attempt));
    }
  }
}

/** Hands off and commits windows [0, windows) of both sets, `atOnce` windows at a time. */
async function writeWindows(
  storage: DeepStorage,
  start: number,
  windows: number,
  countries: number,
  atOnce: number,
): Promise<void> {
  let next = 0;
  let reported = performance.now();
  await Promise.all(
    Array.from({ length: atOnce }, async () => {
      while (next < windows) {
        const w = next++;
        for (const set of Object.keys(sets))
          await retried(() =>
            commitSegments(
              storage,
              schema,
              [segmentOf(start, w, set, countries, 'IMMUTABLE')],
              set,
            ),
          );
        if (performance.now() - reported > 30_000) {
          reported = performance.now();
          say(`  … ${w} of ${windows} windows written`);
        }
      }
    }),
  );
}

/**
 * The bench's cube in `storage` ('dir' or 's3'): written unless the cache directory holds one of
 * the same size already (`fresh`: written again).
 */
export async function benchCube(o: {
  storage: 'dir' | 's3';
  windows: number;
  liveWindows: number;
  countries: number;
  fresh: boolean;
  writersAtOnce: number;
}): Promise<BenchCube> {
  const root = join(
    settings.cacheDir,
    'bench-query',
    `${o.storage}-${o.windows}w-${o.countries}c-${dataVersion}`,
  );
  const marker = join(root, 'written.json');
  if (o.fresh || !existsSync(marker)) rmSync(root, { recursive: true, force: true });
  const reused = existsSync(marker);
  mkdirSync(root, { recursive: true });

  let server: S3TestServer | undefined;
  let storage: DeepStorage;
  if (o.storage === 's3') {
    server = await startS3Server(join(root, 's3'));
    // The SDK's default chain, as a pod's environment gives it; versitygw's root reads every bucket.
    Object.assign(process.env, {
      AWS_ACCESS_KEY_ID: server.accessKeyId,
      AWS_SECRET_ACCESS_KEY: server.secretAccessKey,
      AWS_REGION: server.region,
    });
    if (!reused) {
      const client = s3ClientFor(server);
      await createBucket(client, bucket);
      client.destroy();
    }
    storage = await openDeepStorage({
      type: 's3',
      bucket,
      prefix,
      endpoint: server.endpoint,
      forcePathStyle: true,
    });
  } else storage = await openDeepStorage({ type: 'filesystem', dir: join(root, 'dir') });

  let written: Written;
  if (reused) {
    written = JSON.parse(readFileSync(marker, 'utf8')) as Written;
    say(
      `reusing ${written.windows} committed windows in ${root} (written in ${written.seconds.toFixed(0)} s; --fresh writes them again)`,
    );
  } else {
    const start = Math.floor(Date.now() / M) * M - (o.windows + o.liveWindows) * M;
    const t = performance.now();
    say(`writing ${o.windows} windows × 2 replica sets to ${storage.locationOf('')} …`);
    await writeWindows(storage, start, o.windows, o.countries, o.writersAtOnce);
    written = {
      start,
      windows: o.windows,
      countries: o.countries,
      seconds: (performance.now() - t) / 1000,
    };
    writeFileSync(marker, JSON.stringify(written));
    say(`wrote them in ${written.seconds.toFixed(1)} s`);
  }

  const live = new Map(
    Object.keys(sets).map((set) => [
      set,
      Array.from({ length: o.liveWindows }, (_, i) =>
        segmentOf(written.start, written.windows + i, set, written.countries, 'ACTIVE'),
      ),
    ]),
  );
  // A receiver answers each request afresh; what it answers does not change here, so its text is
  // made once per request and parsed per call, as the service parses an HTTP body.
  const answers = new Map<string, string>();
  const end = String((written.windows + o.liveWindows) * perWindow);
  const cube = {
    metadata: { name: 'orders', namespace: 'shop' },
    spec: {
      source: { brokers: ['k:9092'], topic: 'orders', startingOffsets: 'earliest' },
      replicaSets: Object.keys(sets),
      schema,
    },
    status: {
      assignment: sets,
      partitions: Array.from({ length: partitions }, (_, p) => ({ partition: p, position: end })),
    },
  } as unknown as CubeAssignment;
  return {
    storage,
    start: written.start,
    committedWindows: written.windows,
    liveWindows: o.liveWindows,
    cube,
    query(set, request) {
      const id = `${set}\u0000${JSON.stringify(request)}`;
      let text = answers.get(id);
      if (text === undefined) {
        text = JSON.stringify(receiverOver(schema, live.get(set)!)(request));
        answers.set(id, text);
      }
      return JSON.parse(text) as QueryResponse;
    },
    pyarrowPath: (key) =>
      server ? `${bucket}/${prefix}/${key}/data.arrow` : `${storage.locationOf(key)}/data.arrow`,
    ...(server
      ? {
          s3: {
            endpoint: server.endpoint,
            region: server.region,
            accessKeyId: server.accessKeyId,
            secretAccessKey: server.secretAccessKey,
          },
        }
      : {}),
    async close() {
      storage.close();
      await server?.stop();
    },
  };
}
