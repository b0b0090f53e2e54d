// The demo as a new user meets it: `streamcube local` (its own broker and API server, in its own
// state directory) runs for 90 seconds; then its query, plus whatever it handed off (read with
// pyarrow), answers every event its demo producer wrote, and the cube is Ready. Midway a curious
// user writes one record of their own to the demo topic, ten years ahead: the demo says so, its
// ledger records the foreign offset (every offset of the topic is a demo event or that one), the
// topic grows no faster than the demo's rates, and the receivers reject that record alone
// (future_timestamp) while every demo event after it counts. Ctrl-C (SIGINT to its process group,
// as a terminal sends it) stops every process it started.
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { KubeConfig } from '@kubernetes/client-node';
import { ReceiverClient } from '../../src/protocol/client.ts';
import { isAlive } from '../../src/local/processes.ts';
import { cubeApi } from '../../src/local/cluster.ts';
import type { LocalStackInfo } from '../../src/local/stack.ts';
import {
  type DemoLedger,
  type DemoPartitionLedger,
  type DemoTotals,
  addDemoTotals,
  demoEvent,
  demoRates,
  demoSchema,
} from '../../src/local/demo-data.ts';
import { rangesFromJson, tilingProblems } from '../../src/receiver/offset-ranges.ts';
import { highWatermarks } from '../support/events.ts';
import { useBrokerClients } from '../support/kafka-clients.ts';
import { readHandOffsWithPyarrow } from '../support/pyarrow-reader.ts';

import { waitFor } from '../support/wait.ts';
import { waitForStackFile } from '../support/local-stack.ts';
import { tempDir } from '../support/scratch-dirs.ts';

const cliPath = resolve(import.meta.dirname, '../../src/cli.ts');
const runFor = 90_000;
const stateDir = tempDir('local-demo');
const logFile = join(stateDir, 'local.log');
let local: ChildProcess | undefined;
let started: number[] = [];
const connect = useBrokerClients();

/** Every process below `root` (children, grandchildren, …), from /proc. */
function descendantsOf(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${name}/stat`, 'utf8');
    } catch {
      continue; // gone meanwhile
    }
    // Fields after the command (which may hold spaces) in parentheses: state, ppid, …
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    children.set(ppid, [...(children.get(ppid) ?? []), Number(name)]);
  }
  const out: number[] = [];
  const queue = [root];
  while (queue.length > 0) {
    for (const child of children.get(queue.shift()!) ?? []) {
      out.push(child);
      queue.push(child);
    }
  }
  return out;
}

afterAll(async () => {
  // Whatever the test's outcome, leave nothing running; and, as for the test environment's own
  // directory, keep the broker's and API server's data only with STREAMCUBE_KEEP_ENV=true.
  if (local?.pid !== undefined && isAlive(local.pid)) process.kill(-local.pid, 'SIGKILL');
  for (const pid of started) if (isAlive(pid)) process.kill(-pid, 'SIGKILL');
  await waitFor('leftovers killed', () => Promise.resolve(!started.some(isAlive)), 10_000);
  if (process.env.STREAMCUBE_KEEP_ENV !== 'true')
    rmSync(stateDir, { recursive: true, force: true });
});

const emptyTotals = (): DemoTotals => ({ events: 0, revenue: 0, byCountry: {} });

/** Foreign offsets of a partition's ledger inside [from, to). */
function foreignWithin(part: DemoPartitionLedger, from: bigint, to: bigint): bigint {
  return (part.foreignOffsets ?? []).reduce((n, [a, b]) => {
    const lo = BigInt(a) > from ? BigInt(a) : from;
    const hi = BigInt(b) < to ? BigInt(b) : to;
    return hi > lo ? n + hi - lo : n;
  }, 0n);
}

/** Where the ledger says a partition ends: its first offset, its demo events and the foreign ones. */
function ledgerEnd(part: DemoPartitionLedger): bigint | undefined {
  if (part.firstOffset === null) return undefined;
  const first = BigInt(part.firstOffset);
  return first + BigInt(part.produced) + foreignWithin(part, first, 2n ** 63n);
}

/** The most events the demo may have written to partition `p` in `seconds` (one tick's rounding). */
function mostOwed(p: number, seconds: number): number {
  const rate = demoRates[p]!;
  return 'perSecond' in rate
    ? Math.ceil(rate.perSecond * seconds) + 1
    : rate.burst * (Math.floor(seconds / rate.everySeconds) + 1);
}

test('streamcube local runs for 90 seconds: its query answers every event produced; Ctrl-C stops everything', async () => {
  const log = openSync(logFile, 'a');
  local = spawn(process.execPath, [cliPath, 'local'], {
    // Its own broker and API server: never the environment of the other suites.
    env: { ...process.env, STREAMCUBE_ENV_DIR: stateDir },
    stdio: ['ignore', log, log],
    detached: true,
  });
  closeSync(log);
  const stackFile = join(stateDir, 'local', 'stack.json');
  const info = await waitForStackFile<LocalStackInfo>(local, stackFile, logFile, 180_000);
  const t0 = Date.now();
  started = descendantsOf(local.pid!);
  expect(info.environmentPids?.every((pid) => started.includes(pid))).toBe(true);
  expect(started.length).toBeGreaterThanOrEqual(6); // broker, etcd, API server, 2 receivers, operator
  expect(readFileSync(logFile, 'utf8')).toContain(
    `/v1/namespaces/${info.namespace}/cubes/orders/query`,
  );

  const readLedger = (): DemoLedger =>
    JSON.parse(readFileSync(info.ledgerFile, 'utf8')) as DemoLedger;

  // Midway, someone else's record on partition 0, as the review wrote one: ten years ahead.
  await sleep(runFor / 2 - (Date.now() - t0));
  const { kafka, producer: foreign } = await connect(info.bootstrap, 'local-demo-foreign');
  const [written] = await foreign.send({
    topic: info.topic,
    acks: -1,
    messages: [
      { partition: 0, value: JSON.stringify(demoEvent(0, 0, Date.now() + 10 * 365 * 86_400_000)) },
    ],
  });
  const foreignAt = BigInt(written!.baseOffset!);

  await sleep(runFor - (Date.now() - t0));
  const before = readLedger();
  await sleep(5_000);

  // What the user's curl commands answer, receiver by receiver, and which offsets that covers.
  const clients = info.receivers.map(
    (r) => new ReceiverClient(r.url, info.readToken, undefined, { namespace: info.namespace }),
  );
  const answers = await Promise.all(
    clients.map((c) => c.query(info.cube, { groupBy: ['country'] })),
  );
  const statuses = await Promise.all(clients.map((c) => c.cubeStatus(info.cube)));
  const handedOff = await readHandOffsWithPyarrow(info.deepStorageDir, demoSchema);
  const ledger = readLedger();

  const got = emptyTotals();
  const count = (country: string, events: number, revenue: number): void => {
    const c = (got.byCountry[country] ??= { events: 0, revenue: 0 });
    c.events += events;
    c.revenue += revenue;
    got.events += events;
    got.revenue += revenue;
  };
  for (const a of answers)
    for (const [country, events, revenue] of a.rows)
      count(String(country), Number(events), Number(revenue));
  // The revenue of a hand-off is an Int64 column of cents (the demo's scale 2, in its manifest).
  for (const h of handedOff)
    for (const [country, , events, revenue] of h.rows)
      count(
        String(country),
        Number(events),
        Number(revenue) / 10 ** (h.manifest.scales?.revenue ?? 0),
      );

  // The offsets answered, per partition: the queries' and the hand-offs' ranges must tile
  // [first demo offset, end) with no gap or overlap; the demo wrote events [0, end − first).
  const expected = emptyTotals();
  const problems: Record<string, string[]> = {};
  for (const [p, part] of Object.entries(ledger.partitions)) {
    const ranges = [
      ...answers.flatMap((a) => rangesFromJson(a.offsetRanges[p] ?? [])),
      ...handedOff.flatMap((h) => rangesFromJson(h.manifest.offsetRanges[p] ?? [])),
    ];
    const first = BigInt(part.firstOffset ?? '0');
    const end = ranges.reduce((m, r) => (r.to > m ? r.to : m), first);
    const start = ranges.reduce((m, r) => (r.from < m ? r.from : m), first);
    const found = tilingProblems(ranges, start, end).map((x) => `${x.kind} [${x.from}, ${x.to})`);
    if (found.length > 0) problems[p] = found;
    // Caught up: at least what had been written five seconds earlier is answered.
    const producedBefore = before.partitions[p]!.produced;
    const demoEvents = end - first - foreignWithin(part, first, end);
    if (demoEvents < BigInt(producedBefore))
      problems[p] = [...(problems[p] ?? []), `answers ${demoEvents} of ${producedBefore} events`];
    addDemoTotals(expected, Number(p), Number(demoEvents));
  }
  const rejected = Object.fromEntries(statuses.map((s) => [s.receiver, s.rejected]));
  console.log(
    `local demo after ${Math.round((Date.now() - t0) / 1000)} s: ${ledger.produced} events produced, ` +
      `${got.events} answered (${handedOff.length} hand-offs), rejected ${JSON.stringify(rejected)}`,
  );
  expect(problems).toEqual({});
  // The foreign record alone is rejected, by the receiver that owns partition 0.
  expect(Object.values(rejected).filter((r) => Object.keys(r).length > 0)).toEqual([
    { future_timestamp: 1 },
  ]);
  // The demo said so, and its ledger records that one offset as foreign.
  expect(readFileSync(logFile, 'utf8')).toContain(
    `partition 0: another producer wrote offsets [${foreignAt}, ${foreignAt + 1n})`,
  );
  expect(ledger.partitions['0']!.foreignOffsets).toEqual([
    [String(foreignAt), String(foreignAt + 1n)],
  ]);
  expect(got.events).toBe(expected.events);
  expect(Object.keys(got.byCountry).sort()).toEqual(Object.keys(expected.byCountry).sort());
  for (const [country, e] of Object.entries(expected.byCountry)) {
    expect(got.byCountry[country]!.events).toBe(e.events);
    expect(got.byCountry[country]!.revenue).toBeCloseTo(e.revenue, 6);
  }
  // About 23 events a second once the demo is up (demoRates).
  expect(got.events).toBeGreaterThan(1_000);

  // The ledger stays true: each partition's end in the topic is its first demo offset, the demo
  // events and the foreign ones (read between two ledgers, as the demo writes on meanwhile); and
  // the demo wrote no more than its rates owe since it started, so the topic grew no faster.
  const checked = await waitFor('the topic to end where the ledger says', async () => {
    const earlier = readLedger();
    const ends = await highWatermarks(kafka, info.topic);
    const later = readLedger();
    const off = Object.entries(later.partitions).filter(([p, part]) => {
      const [from, to] = [ledgerEnd(earlier.partitions[p]!), ledgerEnd(part)];
      const end = ends.get(Number(p))!;
      // A partition without a demo event yet has nothing to compare.
      return from !== undefined && to !== undefined && (end < from || end > to);
    });
    return off.length === 0 ? later : undefined;
  });
  const seconds = (Date.now() - Date.parse(checked.startedAt)) / 1000;
  for (const [p, part] of Object.entries(checked.partitions))
    expect([p, part.produced <= mostOwed(Number(p), seconds)]).toEqual([p, true]);

  const kc = new KubeConfig();
  kc.loadFromFile(info.kubeconfig);
  const cube = await cubeApi(kc).get(info.namespace, info.cube);
  expect(cube.status?.conditions?.find((c) => c.type === 'Ready')?.status).toBe('True');

  // Ctrl-C: the terminal signals the whole foreground process group.
  const exited = new Promise<number | null>((r) => local!.once('exit', (code) => r(code)));
  process.kill(-local.pid!, 'SIGINT');
  const deadline = new AbortController();
  const code = await Promise.race([
    exited,
    sleep(90_000, 'still running', { signal: deadline.signal }),
  ]);
  deadline.abort();
  expect(code).toBe(0);
  await waitFor(
    'every process local started to be gone',
    () => Promise.resolve(started.every((pid) => !isAlive(pid))),
    15_000,
  ).catch(() => undefined);
  expect(started.filter(isAlive)).toEqual([]);
}, 480_000);
