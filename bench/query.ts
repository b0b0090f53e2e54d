// The query service over committed windows (issue 27): a cube's windows handed off and committed
// by the product's own code (handOffSegment, commitWindow) into a directory, 16 partitions on two
// replica sets, then the same questions asked cold (a new cache each time: every record and
// hand-off read and decoded) and warm (one cache, kept). The result is the ratio cold / warm of
// the same run, and whether the cache stayed within its bound.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cubeSchema } from '../src/api/cube.ts';
import type { CubeAssignment } from '../src/api/cube-assignment.ts';
import { ReceiverApiError } from '../src/protocol/client.ts';
import { CommittedViewCache } from '../src/query/committed-cache.ts';
import { QueryService } from '../src/query/service.ts';
import { openDeepStorage } from '../src/receiver/deep-storage.ts';
import type { Row, Segment } from '../src/receiver/segments.ts';
import { commitSegments } from '../test/support/query-fixtures.ts';
import { benchFlags, median, positive, say } from './environment.ts';

const usage = `Usage: npm run bench:query -- [options]

  --hours N        committed 1-minute windows, in hours      [default 6; the issue's goal: 720]
  --countries N    values of the grouped dimension           [default 20]
  --cold N         cold answers of each question             [default 3]
  --warm N         warm answers of each question             [default 30]
  --cache-bytes N  the warm cache's bound                    [default 268435456]
`;

const M = 60_000;
const partitions = 16;
const sets = { 'rs-a': [0, 1, 2, 3, 4, 5, 6, 7], 'rs-b': [8, 9, 10, 11, 12, 13, 14, 15] };
const schema = cubeSchema.parse({
  timestampField: 'ts',
  dimensions: ['country', 'device'],
  measures: [
    { name: 'events', function: 'count' },
    { name: 'revenue', function: 'sum', field: 'price', scale: 2 },
    { name: 'dearest', function: 'max', field: 'price' },
  ],
  window: '1m',
});

const percentile = (values: number[], p: number): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
};

async function main(): Promise<void> {
  const flags = benchFlags(usage, {
    hours: '6',
    countries: '20',
    cold: '3',
    warm: '30',
    'cache-bytes': String(256 * 2 ** 20),
  });
  if (!flags) return;
  const windows = positive('hours', flags.hours) * 60;
  const countries = positive('countries', flags.countries);
  const coldRuns = positive('cold', flags.cold);
  const warmRuns = positive('warm', flags.warm);
  const cacheBytes = positive('cache-bytes', flags['cache-bytes']);
  const dir = mkdtempSync(join(tmpdir(), 'streamcube-bench-query-'));
  const storage = await openDeepStorage({ type: 'filesystem', dir });
  try {
    const start = Math.floor(Date.now() / M) * M - windows * M;
    const perWindow = 100; // offsets per partition and window
    const written = performance.now();
    for (let w = 0; w < windows; w++) {
      await Promise.all(
        Object.entries(sets).map(async ([replicaSet, owned]) => {
          const rows = new Map<string, Row>();
          for (let c = 0; c < countries; c++)
            for (const device of ['web', 'ios', 'android'])
              rows.set(`c${c}\u0000${device}`, {
                dimensions: [`c${c}`, device],
                values: [10, 123.45 + c, 99.99],
              });
          const segment: Segment = {
            key: start + w * M,
            windowStart: start + w * M,
            windowEnd: start + (w + 1) * M,
            state: 'IMMUTABLE',
            rows,
            delta: new Map(),
            ranges: new Map(
              owned.map((p) => [
                p,
                [{ from: BigInt(w * perWindow), to: BigInt((w + 1) * perWindow) }],
              ]),
            ),
            epochs: new Map(owned.map((p) => [p, 1])),
          };
          await commitSegments(storage, schema, [segment], replicaSet);
        }),
      );
    }
    say(
      `wrote ${windows} windows × 2 replica sets (${partitions} partitions, ${countries * 3} rows each) in ${((performance.now() - written) / 1000).toFixed(1)} s to ${dir}`,
    );
    const end = String(windows * perWindow);
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
    const serviceWith = (cache: CommittedViewCache) =>
      new QueryService({
        receiverTimeoutMs: 1000,
        maxRows: 100_000,
        cache,
        sources: {
          cube: () => cube,
          receivers: (_, set) => [{ name: `${set}-0`, baseUrl: 'http://unused' }],
          // Every window is committed: the receivers hold nothing of the cube any more.
          query: () => Promise.reject(new ReceiverApiError(404, 'no such cube')),
          storage,
        },
      });
    const newCache = () =>
      new CommittedViewCache({ maxBytes: cacheBytes, listMaxAgeMs: 60 * 60_000 });
    const questions = [
      { name: 'all windows by country', body: { groupBy: ['country'] } },
      {
        name: 'last hour by minute',
        body: { from: start + (windows - 60) * M, granularity: '1m' },
      },
    ];
    const warmCache = newCache();
    const warm = serviceWith(warmCache);
    say('');
    say('| question | cold p50 ms | warm p50 ms | warm p99 ms | cold / warm | complete |');
    say('| --- | --- | --- | --- | --- | --- |');
    for (const question of questions) {
      const time = async (service: QueryService): Promise<number> => {
        const t = performance.now();
        const answer = await service.answer('shop', 'orders', question.body);
        if (!answer.complete) throw new Error(`${question.name}: the answer is not complete`);
        return performance.now() - t;
      };
      const cold: number[] = [];
      for (let i = 0; i < coldRuns; i++) cold.push(await time(serviceWith(newCache())));
      await time(warm); // fills the cache
      const warmTimes: number[] = [];
      for (let i = 0; i < warmRuns; i++) warmTimes.push(await time(warm));
      say(
        `| ${question.name} | ${median(cold).toFixed(1)} | ${median(warmTimes).toFixed(1)} | ${percentile(warmTimes, 99).toFixed(1)} | ${(median(cold) / median(warmTimes)).toFixed(1)} | yes |`,
      );
    }
    say('');
    say(
      `warm cache: ${(warmCache.bytes / 2 ** 20).toFixed(1)} MiB held, bound ${(cacheBytes / 2 ** 20).toFixed(1)} MiB: ${warmCache.bytes <= cacheBytes ? 'within' : 'OVER'}`,
    );
  } finally {
    storage.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
