// The query service's speed (issue 27): a cube of committed 1-minute windows (bench/query-cube.ts:
// written by the product's own hand-off code, in a directory or in S3) plus live windows, asked
// the last hour (live + committed) and the whole cube grouped by one dimension, cold (a new cache
// each time) and warm (one cache, kept); the last hour again over HTTP, from concurrent clients,
// for queries per second; pyarrow scanning the same committed files for the same question as the
// baseline. Everything is reported as percentiles and ratios of the same run, against the goals.
import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Registry } from 'prom-client';
import { createLogger } from '../src/observability/logger.ts';
import { CommittedViewCache } from '../src/query/committed-cache.ts';
import { CommittedIndex } from '../src/query/committed-index.ts';
import { listRecordVersions, readCommittedView, readRecords } from '../src/query/committed-view.ts';
import { createQueryMetrics } from '../src/query/metrics.ts';
import type { QueryBody } from '../src/query/request.ts';
import { createQueryServer } from '../src/query/server.ts';
import { type CubeAnswer, QueryService } from '../src/query/service.ts';
import { type BenchCube, benchCube, schema } from './query-cube.ts';
import { benchFlags, median, positive, say } from './environment.ts';

const usage = `Usage: npm run bench:query -- [options]

  --hours N         committed 1-minute windows, in hours      [default 6; the issue's goal: 720]
  --storage KIND    dir | s3 (versitygw, as the tests start it) [default dir]
  --live N          live windows after the committed ones      [default 5]
  --countries N     values of the grouped dimension            [default 20]
  --cold N          cold answers of each question              [default 3]
  --warm N          warm answers of each question              [default 50]
  --clients N       concurrent HTTP clients for queries/s      [default 8]
  --seconds N       how long queries/s is measured             [default 10]
  --pyarrow N       pyarrow runs of the baseline (0: none)     [default 3]
  --cache-bytes N   the cache's bound                          [default 268435456]
  --writers N       windows handed off and committed at once  [default 8]
  --refreshes N     refreshes of a warm listing, of each kind  [default 5]
  --fresh           write the committed windows again (else reused from the cache directory)
`;

const M = 60_000;
const run = promisify(execFile);

const percentile = (values: number[], p: number): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
};
const ms = (n: number): string => (n >= 100 ? n.toFixed(0) : n.toFixed(1));

function serviceOver(bench: BenchCube, cache: CommittedViewCache): QueryService {
  return new QueryService({
    receiverTimeoutMs: 1000,
    maxRows: 100_000,
    cache,
    sources: {
      cube: () => bench.cube,
      receivers: (_, set) => [{ name: `${set}-0`, baseUrl: 'http://fake' }],
      query: (receiver, _ns, _cube, request) =>
        Promise.resolve(bench.query(receiver.name.replace(/-0$/, ''), request)),
      storage: bench.storage,
    },
  });
}

async function timed(
  service: QueryService,
  body: QueryBody,
): Promise<{ ms: number; answer: CubeAnswer }> {
  const t = performance.now();
  const answer = await service.answer('shop', 'orders', body);
  if (!answer.complete) throw new Error(`the answer to ${JSON.stringify(body)} is not complete`);
  return { ms: performance.now() - t, answer };
}

/** The last hour asked over HTTP by `clients` loops for `seconds`: queries/s and latencies. */
async function queriesPerSecond(
  service: QueryService,
  body: QueryBody,
  clients: number,
  seconds: number,
): Promise<{ qps: number; p50: number; p99: number; answered: number }> {
  const registry = new Registry();
  const server = createQueryServer({
    service,
    tokens: () => ['bench-token'],
    registry,
    metrics: createQueryMetrics(registry),
    logger: createLogger('bench-query', 'warn'),
    ready: () => true,
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/namespaces/shop/cubes/orders/query`;
  const latencies: number[] = [];
  const until = performance.now() + seconds * 1000;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (performance.now() < until) {
        const t = performance.now();
        const response = await fetch(url, {
          method: 'POST',
          headers: { authorization: 'Bearer bench-token', 'content-type': 'application/json' },
          body: JSON.stringify(body),
        });
        const answer = (await response.json()) as CubeAnswer;
        if (response.status !== 200 || !answer.complete)
          throw new Error(`HTTP ${response.status}: ${JSON.stringify(answer).slice(0, 300)}`);
        latencies.push(performance.now() - t);
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  server.close();
  return {
    qps: latencies.length / elapsed,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    answered: latencies.length,
  };
}

/** pyarrow over the committed data files of `bench`, grouped by country: ms per run and rows. */
async function pyarrowBaseline(
  bench: BenchCube,
  runs: number,
): Promise<{ ms: number[]; rows: (string | number)[][]; files: number }> {
  const view = await readCommittedView(bench.storage, { namespace: 'shop', cube: 'orders' });
  const paths = view.flatMap((w) => w.handOffKeys.map((key) => bench.pyarrowPath(key)));
  const dir = mkdtempSync(join(tmpdir(), 'streamcube-bench-pyarrow-'));
  try {
    const spec = join(dir, 'spec.json');
    writeFileSync(
      spec,
      JSON.stringify({
        storage: bench.s3 ? 's3' : 'dir',
        s3: bench.s3,
        paths,
        groupBy: ['country'],
        measures: schema.measures,
        runs,
      }),
    );
    const { stdout } = await run('python3', [join(import.meta.dirname, 'query-pyarrow.py'), spec], {
      maxBuffer: 64 * 2 ** 20,
    });
    return JSON.parse(stdout) as { ms: number[]; rows: (string | number)[][]; files: number };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const flags = benchFlags(usage, {
    hours: '6',
    storage: 'dir',
    live: '5',
    countries: '20',
    cold: '3',
    warm: '50',
    clients: '8',
    seconds: '10',
    pyarrow: '3',
    'cache-bytes': String(256 * 2 ** 20),
    writers: '8',
    refreshes: '5',
    fresh: false,
  });
  if (!flags) return;
  if (flags.storage !== 'dir' && flags.storage !== 's3')
    throw new Error(`--storage must be dir or s3, got '${flags.storage}'`);
  const hours = positive('hours', flags.hours);
  const cacheBytes = positive('cache-bytes', flags['cache-bytes']);
  const pyarrowRuns = Number(flags.pyarrow);
  const bench = await benchCube({
    storage: flags.storage,
    windows: hours * 60,
    liveWindows: positive('live', flags.live),
    countries: positive('countries', flags.countries),
    fresh: flags.fresh,
    writersAtOnce: positive('writers', flags.writers),
  });
  try {
    const end = bench.start + (bench.committedWindows + bench.liveWindows) * M;
    const lastHour = { from: end - 60 * M, to: end };
    const questions: { name: string; body: QueryBody; goalMs: number }[] = [
      { name: 'last hour by minute', body: { ...lastHour, granularity: '1m' }, goalMs: 50 },
      { name: 'last hour by country', body: { ...lastHour, groupBy: ['country'] }, goalMs: 50 },
      { name: `all ${hours} h by country`, body: { groupBy: ['country'] }, goalMs: 500 },
    ];
    const newCache = () =>
      new CommittedViewCache({ maxBytes: cacheBytes, listMaxAgeMs: 60 * 60_000 });

    // Cold, the listing and its index apart: every record listed, read, parsed and merged once.
    const listing: number[] = [];
    for (let i = 0; i < Number(flags.cold); i++) {
      const t = performance.now();
      await newCache().index(bench.storage, { namespace: 'shop', cube: 'orders' }, M, {
        relist: false,
      });
      listing.push(performance.now() - t);
    }
    say(
      `\n${flags.storage}: ${bench.committedWindows} committed windows (${bench.committedWindows * 2} hand-offs) + ${bench.liveWindows} live; listing and index, cold: ${listing.length > 0 ? `p50 ${ms(median(listing))} ms` : 'not measured apart (--cold 0): in the first answer below'}`,
    );

    // --refreshes 0 leaves them out: at 30 days in S3 each listing of every key takes over a minute.
    if (Number(flags.refreshes) > 0) {
      // A warm listing past its age refreshed: every key listed again, or resumed from the newest
      // windows (nothing new committed meanwhile), alternating; and the index made again from
      // cached records, which a resumed listing adds when it finds something new.
      const cubeId = { namespace: 'shop', cube: 'orders' };
      const refreshing = (full: boolean) => {
        const cache = new CommittedViewCache({
          maxBytes: cacheBytes,
          listMaxAgeMs: 0,
          fullListMaxAgeMs: full ? 0 : 24 * 60 * 60_000,
        });
        return async () => {
          const t = performance.now();
          await cache.index(bench.storage, cubeId, M, { relist: false });
          return performance.now() - t;
        };
      };
      const fullRefresh = refreshing(true);
      const resumedRefresh = refreshing(false);
      await fullRefresh();
      await resumedRefresh();
      const refreshes = { full: [] as number[], resumed: [] as number[] };
      for (let i = 0; i < Number(flags.refreshes); i++) {
        refreshes.full.push(await fullRefresh());
        refreshes.resumed.push(await resumedRefresh());
      }
      const versions = await listRecordVersions(bench.storage, cubeId);
      const texts = new Map<string, string | undefined>();
      await readRecords(cubeId, versions, async (key) => {
        texts.set(key, await bench.storage.readObject(key));
        return texts.get(key);
      });
      const rebuilds: number[] = [];
      const extensions: number[] = [];
      const view = await readRecords(cubeId, versions, (key) => Promise.resolve(texts.get(key)));
      const lastStart = view.at(-1)!.windowStart;
      const allButLast = new CommittedIndex(
        view.filter((w) => w.windowStart < lastStart),
        M,
      );
      for (let i = 0; i < Number(flags.refreshes); i++) {
        let t = performance.now();
        new CommittedIndex(
          await readRecords(cubeId, versions, (key) => Promise.resolve(texts.get(key))),
          M,
        );
        rebuilds.push(performance.now() - t);
        t = performance.now();
        const extended = new CommittedIndex(
          view.filter((w) => w.windowStart === lastStart),
          M,
          allButLast,
        );
        extensions.push(performance.now() - t);
        if (!extended.extendsCleanly) throw new Error('the last window did not extend the index');
      }
      say(
        `a warm listing refreshed (${refreshes.full.length} of each, alternating): listing every key p50 ${ms(median(refreshes.full))} ms, resumed from the newest windows p50 ${ms(median(refreshes.resumed))} ms: ×${(median(refreshes.full) / median(refreshes.resumed)).toFixed(1)}`,
      );
      say(
        `when a window was committed since: the index of every record made again (from cached records) p50 ${ms(median(rebuilds))} ms, the index extended by the new window's records p50 ${ms(median(extensions))} ms: ×${(median(rebuilds) / median(extensions)).toFixed(0)}`,
      );
    }

    // With node --expose-gc: the heap after a collection before the warm cache fills and after,
    // against the cache's estimate of what it holds.
    const gc = (globalThis as { gc?: () => void }).gc;
    const heapAfterGc = (): number | undefined => {
      if (!gc) return undefined;
      gc();
      return process.memoryUsage().heapUsed;
    };
    const heapBefore = heapAfterGc();
    const warmCache = newCache();
    const warm = serviceOver(bench, warmCache);
    const results: string[] = [];
    const answers = new Map<string, CubeAnswer>();
    const warmP50 = new Map<string, number>();
    for (const q of questions) {
      const cold: number[] = [];
      for (let i = 0; i < Number(flags.cold); i++)
        cold.push((await timed(serviceOver(bench, newCache()), q.body)).ms);
      const first = await timed(warm, q.body); // fills the cache
      answers.set(q.name, first.answer);
      // --cold 0: the answer that fills the warm cache is the one cold figure.
      if (cold.length === 0) cold.push(first.ms);
      const times: number[] = [];
      for (let i = 0; i < positive('warm', flags.warm); i++)
        times.push((await timed(warm, q.body)).ms);
      const p99 = percentile(times, 99);
      warmP50.set(q.name, median(times));
      results.push(
        `| ${q.name} | ${ms(median(cold))} | ${ms(median(times))} | ${ms(p99)} | ${(median(cold) / median(times)).toFixed(0)} | ≤ ${q.goalMs} | ${p99 <= q.goalMs ? 'yes' : 'NO'} |`,
      );
    }
    say('');
    say('| question | cold p50 ms | warm p50 ms | warm p99 ms | cold / warm | goal p99 ms | met |');
    say('| --- | --- | --- | --- | --- | --- | --- |');
    for (const line of results) say(line);

    const clients = positive('clients', flags.clients);
    const http = await queriesPerSecond(
      warm,
      questions[0]!.body,
      clients,
      positive('seconds', flags.seconds),
    );
    say('');
    say(
      `last hour by minute over HTTP, ${clients} clients in this process, ${http.answered} answers: ${http.qps.toFixed(0)} queries/s (goal ≥ 200: ${http.qps >= 200 ? 'yes' : 'NO'}), p50 ${ms(http.p50)} ms, p99 ${ms(http.p99)} ms`,
    );
    say(
      `cache: ${(warmCache.bytes / 2 ** 20).toFixed(1)} MiB held by its estimate, bound ${(cacheBytes / 2 ** 20).toFixed(0)} MiB: ${warmCache.bytes <= cacheBytes ? 'within' : 'OVER'}; the process's heap ${(process.memoryUsage().heapUsed / 2 ** 20).toFixed(0)} MiB`,
    );
    const heapAfter = heapAfterGc();
    if (heapBefore !== undefined && heapAfter !== undefined)
      say(
        `after a GC the heap grew by ${((heapAfter - heapBefore) / 2 ** 20).toFixed(1)} MiB while the warm cache filled: ×${((heapAfter - heapBefore) / warmCache.bytes).toFixed(2)} its estimate`,
      );

    if (pyarrowRuns > 0) {
      const baseline = await pyarrowBaseline(bench, pyarrowRuns);
      const ours = answers.get(questions[2]!.name)!;
      // The same question of the committed files only: the service's answer holds the live windows too.
      const committedOnly = (
        await timed(warm, { groupBy: ['country'], to: bench.start + bench.committedWindows * M })
      ).answer;
      const same =
        JSON.stringify(
          committedOnly.rows.map((r) => [r[0], r[1], Number(r[2]).toFixed(2), r[3]]),
        ) === JSON.stringify(baseline.rows.map((r) => [r[0], r[1], Number(r[2]).toFixed(2), r[3]]));
      const warmAll = warmP50.get(questions[2]!.name)!;
      say(
        `pyarrow over the same ${baseline.files} committed files, grouped by country: p50 ${ms(median(baseline.ms))} ms (runs ${baseline.ms.map(ms).join(', ')}); the service warm ${ms(warmAll)} ms: ×${(median(baseline.ms) / warmAll).toFixed(0)}; committed totals equal: ${same ? 'yes' : 'NO'} (the service's answer has ${ours.rows.length} rows)`,
      );
    }
  } finally {
    await bench.close();
  }
}

await main();
