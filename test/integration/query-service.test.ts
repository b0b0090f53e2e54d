// One answer per cube: the real operator, two replica sets of two receivers, Kafka's Java producer
// (lz4 records at mixed rates, and zstd transactions, one aborted) into a cube with 1-minute
// windows, so that by the end some windows are committed to deep storage and some are live. The
// query server's answers — totals (revenue an exact decimal), a group-by, a time series, and the
// malformed records among the offsets, per partition — equal the producer's ledger; its
// answers while windows were being committed count exactly the offsets they say they cover; and
// over the committed windows it equals an independent reader (pyarrow over the committed files),
// revenue to the cent. Offsets Kafka deletes before any replica reads them (while the cube reads,
// and before it began) are said lost to retention, live and once committed, and the answer is
// complete otherwise.
import { setTimeout as sleep } from 'node:timers/promises';
import { formatUnits } from '../../src/api/scaled-sum.ts';
import type { CubeAnswer } from '../../src/query/service.ts';
import {
  type TestEvent,
  byCountry,
  createTopic,
  highWatermarks,
  makeEvents,
  produce,
  totalsOf,
  windowedSchema,
} from '../support/events.ts';
import { applyCrd, cubeApi } from '../support/cluster.ts';
import { committed } from '../support/hand-offs.ts';
import {
  type JavaProducer,
  produceOnSchedule,
  startJavaProducer,
} from '../support/java-producer.ts';
import { useOperatorStack } from '../support/operator-stack.ts';
import { readCommittedWithPyarrow } from '../support/pyarrow-reader.ts';
import { rawHttp } from '../support/raw-http.ts';
import { QueryServerProcess } from '../support/query-server-process.ts';
import { expectTotals, waitForPositions } from '../support/receiver-checks.ts';
import { waitFor } from '../support/wait.ts';
import { eventAt, javaProducedCube } from '../support/loaded-cube.ts';

const stack = useOperatorStack({
  name: 'query-svc',
  replicaSets: ['rs-a', 'rs-b'],
  replicas: 2,
  // No idle sealing: once the producers stop, the last window stays live.
  receiver: { idleTimeout: '10m', flushInterval: '1s' },
});
const cube = 'orders';
// 1-minute windows, 10 s allowed lateness; revenue, a sum of prices in cents, exact at scale 2.
const schema = {
  ...windowedSchema,
  measures: windowedSchema.measures.map((m) => (m.name === 'revenue' ? { ...m, scale: 2 } : m)),
};
const partitions = 6;
const runMs = 80_000;
const M = 60_000;
const producers: JavaProducer[] = [];
const server = new QueryServerProcess(stack);

afterAll(async () => {
  for (const p of producers) p.kill();
  await server.stop();
});

const totalsRow = (answer: CubeAnswer) => {
  const [events = 0, revenue = '0.00', cheapest = Infinity, dearest = -Infinity] = (answer
    .rows[0] ?? []) as [number, string, number, number];
  return { events, revenue, cheapest, dearest };
};

/** The exact sum of prices, as the decimal the producer wrote: cents added as integers. */
const revenueOf = (events: TestEvent[]): string =>
  formatUnits(
    events.reduce((a, e) => a + BigInt(Math.round(e.price * 100)), 0n),
    2,
  );

test('answers over live receivers and committed deep storage equal the ledger, every offset once', async () => {
  const t0 = Date.now();
  // The CRD of this checkout (measures' `scale`) again, right before the cube: a shared API
  // server may have been given another checkout's since the stack started.
  await applyCrd();
  const [{ topic, java: plain }] = await Promise.all([
    javaProducedCube(stack, producers, cube, partitions, schema),
    server.start(),
  ]);
  const tx = await startJavaProducer({
    topic,
    compression: 'zstd',
    transactionalId: `${topic}-tx`,
  });
  producers.push(tx);
  const event = eventAt;
  const s = 1000;
  const production = produceOnSchedule(
    plain,
    {
      spans: [
        { partition: 0, fromMs: 0, toMs: runMs, perSecond: 8 },
        { partition: 1, fromMs: 0, toMs: runMs, perSecond: 3 },
        { partition: 2, fromMs: 0, toMs: runMs, perSecond: 2 },
        { partition: 3, fromMs: 0, toMs: 30 * s, perSecond: 4 },
        { partition: 3, fromMs: 50 * s, toMs: runMs, perSecond: 4 },
        { partition: 4, fromMs: 0, toMs: runMs, perSecond: 1 },
        { partition: 5, fromMs: 0, toMs: runMs, perSecond: 2 },
      ],
      bursts: [
        { partition: 4, atMs: 20 * s, count: 2000 },
        { partition: 5, atMs: 45 * s, count: 1500 },
      ],
    },
    // Every 50th record of partition 1 is not JSON: rejected, its offset still counted once.
    (p, i, now) => (p === 1 && i % 50 === 7 ? `not json ${i}` : event(p, i, now)),
  );
  // Transactions of 20 records to two partitions every 4 s; the fifth is aborted.
  const transactions = (async () => {
    for (let n = 0; Date.now() - t0 < runMs; n++) {
      await tx.begin();
      const now = Date.now();
      await tx.send(
        n % partitions,
        Array.from({ length: 10 }, (_, i) => event(n % partitions, i, now, 500_000 + n * 100)),
      );
      await tx.send(
        (n + 3) % partitions,
        Array.from({ length: 10 }, (_, i) =>
          event((n + 3) % partitions, i, now, 700_000 + n * 100),
        ),
      );
      if (n === 4) await tx.abort();
      else await tx.commit();
      await sleep(4_000);
    }
  })();

  // Queries while windows are live, sealed and committed.
  const during: CubeAnswer[] = [];
  for (const at of [30 * s, 55 * s, 75 * s]) {
    await sleep(Math.max(0, t0 + at - Date.now()));
    during.push(await server.query(cube, {}));
  }
  await Promise.all([production, transactions]);

  // The ledger: what a read_committed consumer sees.
  const visible = [...plain.visibleRecords(), ...tx.visibleRecords()];
  const isEvent = (r: { value: string }): boolean => !r.value.startsWith('not json');
  const events = visible.filter(isEvent).map((r) => JSON.parse(r.value) as TestEvent);
  const malformed = visible.filter((r) => !isEvent(r));
  const hw = await highWatermarks(stack.kafka, topic);
  const status = (await cubeApi(stack.kc).get(stack.namespace, cube)).status!;
  for (const [set, owned] of Object.entries(status.assignment ?? {}))
    for (const r of stack.replicas[set]!)
      await waitForPositions(
        r.client.inNamespace(stack.namespace),
        cube,
        Object.fromEntries(owned.map((p) => [p, hw.get(p)!])),
      );
  await waitFor(
    'a committed window of each replica set',
    async () => {
      const records = await committed(stack.deepStorageDir, cube, stack.namespace);
      return ['rs-a', 'rs-b'].every((set) =>
        records.some((c) => c.replicaSet === set && c.record.handOffs.length > 0),
      );
    },
    60_000,
    500,
  );

  // Totals: every offset of every partition, once, from 0 to the high watermark.
  const total = await server.query(cube, {});
  expect(total.complete).toBe(true);
  expect(
    Object.fromEntries(
      total.partitions.map((p) => [p.partition, [p.from, p.to, p.covered.length]]),
    ),
  ).toEqual(Object.fromEntries([...hw].map(([p, end]) => [p, ['0', end.toString(), 1]])));
  const { revenue, ...others } = totalsRow(total);
  expectTotals({ ...others, revenue: Number(revenue) }, totalsOf(events));
  expect(revenue).toBe(revenueOf(events));
  expect(total.sources.committed.handOffs).toBeGreaterThan(0);
  // The malformed records: counted once as offsets, in no row, and said so per partition.
  expect(malformed.length).toBeGreaterThan(0);
  expect(total).toMatchObject({ rejected: malformed.length, rejectedKnown: true });
  expect(
    Object.fromEntries(total.partitions.map((p) => [p.partition, p.rejected.bad_json ?? 0])),
  ).toEqual(
    Object.fromEntries(
      [...hw.keys()].map((p) => [p, malformed.filter((r) => r.partition === p).length]),
    ),
  );
  expect(total.sources.live.every((l) => l.receiver !== undefined)).toBe(true);

  // A group-by and a time series.
  const grouped = await server.query(cube, {
    groupBy: ['country'],
    measures: ['events', 'revenue'],
  });
  const expectedByCountry = byCountry(events);
  expect(grouped.rows.map((r) => r[0])).toEqual(Object.keys(expectedByCountry).sort());
  for (const [country, n, revenue] of grouped.rows as [string, number, string][]) {
    expect(n).toBe(expectedByCountry[country]!.events);
    expect(revenue).toBe(revenueOf(events.filter((e) => e.country === country)));
  }
  const series = await server.query(cube, { granularity: '1m', measures: ['events'] });
  const perMinute = new Map<string, number>();
  for (const e of events) {
    const at = new Date(Math.floor(e.ts / M) * M).toISOString();
    perMinute.set(at, (perMinute.get(at) ?? 0) + 1);
  }
  expect(Object.fromEntries(series.rows.map(([t, n]) => [t, n]))).toEqual(
    Object.fromEntries(perMinute),
  );

  // The same questions in SQL: the same rows, under the SELECT's names and in its order.
  const bySql = await server.sql(
    `SELECT SUM(revenue) AS total, country, SUM(events) FROM ${cube} GROUP BY country ORDER BY country`,
  );
  expect(bySql.status).toBe(200);
  const sqlAnswer = bySql.body as CubeAnswer;
  expect(sqlAnswer.columns).toEqual(['total', 'country', 'events']);
  expect(sqlAnswer.rows).toEqual(
    grouped.rows.map(([country, n, revenue]) => [revenue, country, n]),
  );
  expect(sqlAnswer.complete).toBe(true);
  const seriesBySql = await server.sql(
    `SELECT time_bucket('1m', time) AS minute, SUM(events) FROM "${stack.namespace}"."${cube}" GROUP BY minute`,
    { namespace: null },
  );
  expect((seriesBySql.body as CubeAnswer).rows).toEqual(series.rows);
  expect(await server.sql(`SELECT SUM(events) FROM ${cube} WHERE revenue > 1`)).toMatchObject({
    status: 400,
    body: { field: 'sql.where' },
  });
  expect(await server.sql(`SELECT AVG(revenue) FROM ${cube}`)).toMatchObject({
    status: 400,
    body: { field: 'sql.select' },
  });
  expect((await server.sql('SELECT SUM(events) FROM nope')).status).toBe(404);

  // Answers during the run: each complete one counted exactly the offsets it says it covers.
  const exactDuring = during.map((answer) => {
    const expected = visible.filter((r) => {
      const p = answer.partitions.find((x) => x.partition === r.partition);
      return isEvent(r) && p !== undefined && r.offset < BigInt(p.to);
    }).length;
    return { complete: answer.complete, counted: totalsRow(answer).events, expected };
  });
  for (const x of exactDuring.filter((x) => x.complete)) expect(x.counted).toBe(x.expected);
  expect(exactDuring.some((x) => x.complete)).toBe(true);

  // Over the windows no receiver holds live any more: the answer equals pyarrow over the
  // committed files, and the ledger's events of that time.
  const liveFrom = async (): Promise<number> => {
    const starts = await Promise.all(
      Object.values(stack.replicas)
        .flat()
        .map(async (r) =>
          (await r.client.inNamespace(stack.namespace).cubeStatus(cube)).segments
            .filter((seg) => seg.state !== 'HANDED_OFF')
            .map((seg) => seg.windowStart),
        ),
    );
    return Math.min(...starts.flat());
  };
  const cut = await liveFrom();
  expect(Number.isFinite(cut)).toBe(true);
  const upToCut = await server.query(cube, { to: cut });
  const pyarrow = (await readCommittedWithPyarrow(stack.deepStorageDir, schema)).filter(
    (h) => h.manifest.cube === cube && Date.parse(h.manifest.windowStart) < cut,
  );
  const eventsAt = schema.dimensions.length;
  const pyarrowEvents = pyarrow
    .flatMap((h) => h.rows)
    .reduce((n, row) => n + Number(row[eventsAt]), 0);
  expect(await liveFrom()).toBe(cut);
  expect(pyarrowEvents).toBeGreaterThan(0);
  expect(totalsRow(upToCut).events).toBe(pyarrowEvents);
  expect(pyarrowEvents).toBe(events.filter((e) => e.ts < cut).length);
  // Revenue as pyarrow reads it: an Int64 column of cents (hand-off format 2, the scale in the
  // manifest and the field's metadata), adding up to the ledger's exact decimal.
  const revenueAt = eventsAt + schema.measures.findIndex((m) => m.name === 'revenue');
  for (const h of pyarrow) {
    expect(h.fields.revenue).toBe('int64');
    expect(h.manifest).toMatchObject({ formatVersion: 2, scales: { revenue: 2 } });
  }
  const pyarrowCents = pyarrow
    .flatMap((h) => h.rows)
    .reduce((n, row) => n + BigInt(row[revenueAt]!), 0n);
  expect(formatUnits(pyarrowCents, 2)).toBe(revenueOf(events.filter((e) => e.ts < cut)));
  expect(totalsRow(upToCut).revenue).toBe(formatUnits(pyarrowCents, 2));

  // `streamcube query`: a table that says it is complete, and CSV.
  const table = await server.cli(['--group-by=country', cube]);
  expect(table.code).toBe(0);
  expect(table.stdout).toContain(
    `complete: every offset of ${partitions} partitions counted once; ${malformed.length} of them rejected records, in no row (bad_json: ${malformed.length})`,
  );
  const csv = await server.cli(['--measures=events', '-o', 'csv', cube]);
  expect(csv.stdout).toBe(`events\r\n${events.length}\r\n`);
  expect((await server.cli(['--group-by=city', cube])).stderr).toMatch(/400.*field groupBy\.0/);

  // Bad input: 4xx naming what is wrong, never a 500.
  expect((await server.post('nope', {})).status).toBe(404);
  expect(await server.post(cube, { groupBy: ['city'] })).toMatchObject({
    status: 400,
    body: { field: 'groupBy.0' },
  });
  expect((await server.post(cube, {}, { token: undefined })).status).toBe(401);
  expect((await server.post(cube, 'x'.repeat(2 * 1024 * 1024))).status).toBe(413);
  // A request target that is not a URL: a 400, and the server answers on.
  expect(await rawHttp(server.port, 'GET //[ HTTP/1.1\r\nHost: x\r\n\r\n')).toMatch(
    /^HTTP\/1\.1 400 /,
  );
  expect(await server.metrics()).toMatch(/streamcube_query_http_unexpected_errors_total 0/);
  expect(await server.metrics()).toMatch(
    /streamcube_query_pieces_total\{source="committed"\} [1-9]/,
  );
  // The group-by read the hand-offs the totals had read: from the cache.
  expect(await server.metrics()).toMatch(
    /streamcube_query_cache_lookups_total\{kind="rows",result="hit"\} [1-9]/,
  );

  console.log(table.stdout);
  console.log(
    `query-service: ${events.length} events in the ledger (${visible.length} visible records, ${plain.records.length + tx.records.length} written); final answer: ${totalsRow(total).events} events, revenue ${totalsRow(total).revenue}, complete, ${total.sources.committed.handOffs} committed hand-offs in ${total.sources.committed.windows} records, ${total.sources.counted} pieces counted, ${total.sources.duplicates} duplicates; during the run: ${JSON.stringify(exactDuring)}; committed windows before ${new Date(cut).toISOString()}: ${pyarrowEvents} events by pyarrow and by the query server; ${Math.round((Date.now() - t0) / 1000)} s`,
  );
});

test('offsets Kafka deleted before any replica read them: lost to retention, and the answer complete otherwise', async () => {
  const t0 = Date.now();
  // This checkout's CRD (status.firstOffsets) again, right before the cube.
  await Promise.all([applyCrd(), server.port === 0 ? server.start() : undefined]);
  const { admin, kc, namespace } = stack;
  const api = cubeApi(kc);
  const name = 'retained';
  const topic = await createTopic(admin, 2);
  const base = Date.UTC(2026, 0, 1);
  const produced = new Map<number, TestEvent[]>([
    [0, []],
    [1, []],
  ]);
  // Events one second apart in event time, from `atS` seconds on.
  const write = async (p: number, count: number, atS = produced.get(p)!.length): Promise<void> => {
    const list = makeEvents(p, count, base + atS * 1000, 1000, produced.get(p)!.length + 1);
    await produce(stack.producer, topic, p, list);
    produced.get(p)!.push(...list);
  };
  for (const p of [0, 1]) await write(p, 100);
  // Partition 1's log starts at 20 before the cube begins (from the earliest offset): Kafka
  // deleted [0, 20) before any replica could read them.
  await admin.deleteTopicRecords({ topic, partitions: [{ partition: 1, offset: '20' }] });
  await stack.createCube(name, topic, {
    schema,
    replicaSets: ['rs-a', 'rs-b'],
    strategy: 'sticky',
  });
  await stack.waitForSettled(name);
  const owners = async () => {
    const status = (await api.get(namespace, name)).status!;
    return Object.entries(status.assignment ?? {}).flatMap(([set, ps]) =>
      stack.replicas[set]!.map((r) => ({ client: r.client.inNamespace(namespace), ps })),
    );
  };
  const positions = async (to: bigint) => {
    for (const { client, ps } of await owners())
      await waitForPositions(client, name, Object.fromEntries(ps.map((p) => [p, to])));
  };
  await positions(100n);

  // Suspended (every replica's consumer pauses the partitions), 200 more events each, and
  // partition 0 loses [100, 250) as retention would delete it; resumed, the replicas jump.
  await api.patchSpec(namespace, name, { suspend: true });
  await waitFor('partitions paused', async () => {
    for (const { client } of await owners())
      if (!(await client.cubeStatus(name)).partitions.every((p) => p.state === 'paused'))
        return false;
    return true;
  });
  for (const p of [0, 1]) await write(p, 200);
  await admin.deleteTopicRecords({ topic, partitions: [{ partition: 0, offset: '250' }] });
  await api.patchSpec(namespace, name, { suspend: false });
  await positions(300n);
  const lost = [...produced.get(0)!.slice(100, 250), ...produced.get(1)!.slice(0, 20)];
  const kept = () => [...produced.values()].flat().filter((e) => !lost.includes(e));

  // Live: the cube's status names the range; the answer counts every other offset once.
  const lostRange = [{ from: '100', to: '250', reason: 'retention' }];
  const beforeTheCube = [{ from: '0', to: '20', reason: 'retention' }];
  const live = await waitFor('the lost range in an answer', async () => {
    const a = await server.query(name, {});
    return a.partitions[0]?.lost.length ? a : undefined;
  });
  expect(live.complete).toBe(true);
  expect(live.partitions.map((p) => [p.partition, p.covered, p.lost, p.missing])).toEqual([
    [
      0,
      [
        ['0', '100'],
        ['250', '300'],
      ],
      lostRange,
      [],
    ],
    [1, [['20', '300']], beforeTheCube, []],
  ]);
  expect(totalsRow(live).events).toBe(kept().length);

  // An hour later in event time, every window before is sealed, handed off and committed: the
  // commit record of the window holding offset 250 names the range too.
  for (const p of [0, 1]) await write(p, 10, 3600);
  await positions(310n);
  await waitFor(
    'a commit record naming the lost range',
    async () =>
      (await committed(stack.deepStorageDir, name, namespace)).some((c) =>
        c.record.handOffs.some((h) => h.lostRanges?.['0']?.length),
      ),
    60_000,
    500,
  );
  const answer = await server.query(name, { requireComplete: true });
  expect(answer.sources.committed.handOffs).toBeGreaterThan(0);
  expect(answer.partitions.map((p) => [p.partition, p.lost, p.missing])).toEqual([
    [0, lostRange, []],
    [1, beforeTheCube, []],
  ]);
  expect(totalsRow(answer)).toMatchObject({ events: kept().length, revenue: revenueOf(kept()) });
  const table = await server.cli([name]);
  expect(table.stdout).toContain(
    'complete: every offset of 2 partitions accounted for once; 170 of them lost to retention, in no row (partition 0 [100, 250), partition 1 [0, 20))',
  );
  console.log(
    `query-service, lost to retention: ${kept().length} events kept of ${kept().length + lost.length}, ${answer.sources.committed.handOffs} committed hand-offs; ${Math.round((Date.now() - t0) / 1000)} s`,
  );
}, 180_000);
