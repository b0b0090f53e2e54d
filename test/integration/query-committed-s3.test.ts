// The committed view in a real S3-compatible bucket (versitygw): windows handed off and committed
// by the product's own code, read back by the query service's reader (listing, records, Arrow
// files as bytes) to the same view and rows as from a directory, and answered by the service; a
// listing that resumes from the newest windows picks up a window committed since, in both.
import type { S3Client } from '@aws-sdk/client-s3';
import { CommittedViewCache } from '../../src/query/committed-cache.ts';
import { readCommittedView, readHandOffRows } from '../../src/query/committed-view.ts';
import { QueryService, nothingHeld } from '../../src/query/service.ts';
import type { DeepStorage } from '../../src/receiver/deep-storage.ts';
import { FilesystemDeepStorage } from '../../src/receiver/deep-storage-filesystem.ts';
import { S3DeepStorage } from '../../src/receiver/deep-storage-s3.ts';
import { type HandOffTarget, handOffSegment } from '../../src/receiver/hand-off.ts';
import { commitWindow, recordedHandOff } from '../../src/receiver/hand-off-commit.ts';
import type { Segment } from '../../src/receiver/segments.ts';
import { type S3TestServer, startS3Server } from '../env/s3-server.ts';

import { createBucket, s3ClientFor } from '../support/s3-bucket.ts';
import { queriedOrdersCube } from '../support/cube-assignments.ts';
import { schemaOf } from '../support/schemas.ts';
import { tempDir } from '../support/scratch-dirs.ts';

const M = 60_000;
const bucket = 'streamcube-query';
// Revenue at scale 2: an Int64 column of cents in each hand-off, read back as exact decimals.
const schema = schemaOf(
  ['country'],
  { events: 'count', revenue: 'sum(price, 2)' },
  { window: '1m' },
);

let server: S3TestServer;
let s3: S3Client;
let storage: S3DeepStorage;

beforeAll(async () => {
  server = await startS3Server(tempDir('query-s3-server'));
  s3 = s3ClientFor(server);
  await createBucket(s3, bucket);
  // The SDK's default chain, as a pod's environment gives it.
  Object.assign(process.env, {
    AWS_ACCESS_KEY_ID: server.accessKeyId,
    AWS_SECRET_ACCESS_KEY: server.secretAccessKey,
    AWS_REGION: server.region,
  });
  storage = new S3DeepStorage({
    type: 's3',
    bucket,
    prefix: 'lake',
    endpoint: server.endpoint,
    forcePathStyle: true,
  });
}, 45 * 60_000);

afterAll(async () => {
  storage?.close();
  s3?.destroy();
  await server?.stop();
});

/**
 * Windows `from`..n-1 of partition p (rs-a: 0, rs-b: 1), 10 offsets and 10 events each, of the
 * cube `cube` with windows from `base` on.
 */
async function writeWindows(
  to: DeepStorage,
  windows: number,
  o: { cube?: string; base?: number; from?: number } = {},
): Promise<void> {
  const base = o.base ?? 0;
  for (const [set, p] of [
    ['rs-a', 0],
    ['rs-b', 1],
  ] as const)
    for (let w = o.from ?? 0; w < windows; w++) {
      const target: HandOffTarget = {
        namespace: 'shop',
        cube: o.cube ?? 'orders',
        replicaSet: set,
        receiver: `${set}-0`,
        schema,
      };
      const segment: Segment = {
        key: base + w * M,
        windowStart: base + w * M,
        windowEnd: base + (w + 1) * M,
        state: 'IMMUTABLE',
        rows: new Map([
          ['de', { dimensions: ['de'], values: [6, 660] }],
          ['fr', { dimensions: ['fr'], values: [4, 1000] }],
        ]),
        delta: new Map(),
        ranges: new Map([[p, [{ from: BigInt(w * 10), to: BigInt(w * 10 + 10) }]]]),
        epochs: new Map([[p, 1]]),
      };
      await handOffSegment(to, target, segment);
      const outcome = await commitWindow({
        storage: to,
        target,
        windowStart: base + w * M,
        mine: [recordedHandOff(target, segment)],
      });
      expect(outcome.kind).toBe('committed');
    }
}

test('a bucket and a directory give the same committed view, and the service answers it', async () => {
  const dir = new FilesystemDeepStorage(tempDir('query-dir'));
  await Promise.all([writeWindows(storage, 5), writeWindows(dir, 5)]);
  const read = async (from: DeepStorage) => {
    const view = await readCommittedView(from, { namespace: 'shop', cube: 'orders' });
    return Promise.all(
      view.map(async (w) => ({
        windowStart: w.windowStart,
        replicaSet: w.replicaSet,
        version: w.record.version,
        handOffs: w.record.handOffs.map((h) => h.dir),
        rows: await Promise.all(w.handOffKeys.map((key) => readHandOffRows(from, key, schema))),
      })),
    );
  };
  const fromBucket = await read(storage);
  expect(fromBucket).toHaveLength(10);
  expect(fromBucket).toEqual(await read(dir));

  const cube = queriedOrdersCube(schema, ['50', '50']);
  const service = new QueryService({
    receiverTimeoutMs: 1000,
    maxRows: 100,
    sources: {
      cube: () => cube,
      // Every receiver holds nothing any more: all of it is committed.
      receivers: (_, set) => [{ name: `${set}-0`, baseUrl: 'http://unused' }],
      query: () => Promise.resolve(nothingHeld),
      storage,
    },
  });
  const answer = await service.answer('shop', 'orders', {
    from: M,
    to: 4 * M,
    groupBy: ['country'],
  });
  expect(answer.complete).toBe(true);
  expect(answer.rows).toEqual([
    ['de', 36, '39.60'],
    ['fr', 24, '60.00'],
  ]);
  expect(answer.partitions.map((p) => [p.partition, p.covered])).toEqual([
    [0, [['0', '50']]],
    [1, [['0', '50']]],
  ]);
});

/** `storage` whose listings are counted: how many keys each returned. */
function countingListings(storage: DeepStorage): { storage: DeepStorage; listed: number[] } {
  const listed: number[] = [];
  const counting = Object.create(storage) as DeepStorage;
  counting.listKeys = async (prefix, signal, startAfter) => {
    const keys = await storage.listKeys(prefix, signal, startAfter);
    listed.push(keys.length);
    return keys;
  };
  return { storage: counting, listed };
}

test.each(['bucket', 'directory'])(
  'a listing that resumes picks up a window committed since the last, in a %s',
  async (where) => {
    const to = where === 'bucket' ? storage : new FilesystemDeepStorage(tempDir('query-dir'));
    // Windows of 2026: their keys sort as their times do.
    const cube = { namespace: 'shop', cube: 'resumed', base: Date.UTC(2026, 0, 1) };
    await writeWindows(to, 6, cube);
    const listings: string[] = [];
    const cache = new CommittedViewCache({
      maxBytes: 1 << 24,
      listMaxAgeMs: 0,
      relistedWindows: 2,
      onListing: (kind) => listings.push(kind),
    });
    const counting = countingListings(to);
    const index = async () =>
      (await cache.index(counting.storage, cube, M, { relist: false })).index;
    const first = await index();
    expect(first.handOffs).toBe(12);

    await writeWindows(to, 7, { ...cube, from: 6 });
    const second = await index();
    expect(listings).toEqual(['full', 'resumed']);
    expect(second.handOffs).toBe(14);
    expect(second.count.coverage).toEqual(
      new Map([
        [0, [{ from: 0n, to: 70n }]],
        [1, [{ from: 0n, to: 70n }]],
      ]),
    );
    // Listed again: windows 4, 5 and 6 only (each a record and a hand-off's two files per set).
    const [all, resumed] = counting.listed;
    expect([all, resumed]).toEqual([36, 18]);
  },
);
