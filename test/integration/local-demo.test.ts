// The demo as a new user meets it: `streamcube local` (its own broker and API server, in its own
// state directory) runs for two minutes; then its query, plus whatever it handed off (read with
// pyarrow), answers every event its demo producer wrote, nothing was rejected and the cube is
// Ready. Ctrl-C (SIGINT to its process group, as a terminal sends it) stops every process it started.
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
  type DemoTotals,
  addDemoTotals,
  demoSchema,
} from '../../src/local/demo-data.ts';
import { rangesFromJson, tilingProblems } from '../../src/receiver/offset-ranges.ts';
import { readHandOffsWithPyarrow } from '../support/pyarrow-reader.ts';
import { tempDir } from '../support/receiver-process.ts';
import { waitFor } from '../support/wait.ts';
import { waitForStackFile } from '../support/local-stack.ts';

const cliPath = resolve(import.meta.dirname, '../../src/cli.ts');
const runFor = 120_000;
const stateDir = tempDir('local-demo');
const logFile = join(stateDir, 'local.log');
let local: ChildProcess | undefined;
let started: number[] = [];

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

test('streamcube local runs for 2 minutes: its query answers every event produced; Ctrl-C stops everything', async () => {
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

  await sleep(runFor - (Date.now() - t0));
  const readLedger = (): DemoLedger =>
    JSON.parse(readFileSync(info.ledgerFile, 'utf8')) as DemoLedger;
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
  for (const h of handedOff)
    for (const [country, , events, revenue] of h.rows)
      count(String(country), Number(events), Number(revenue));

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
    if (end - first < BigInt(producedBefore))
      problems[p] = [...(problems[p] ?? []), `answers ${end - first} of ${producedBefore} events`];
    addDemoTotals(expected, Number(p), Number(end - first));
  }
  const rejected = Object.fromEntries(statuses.map((s) => [s.receiver, s.rejected]));
  console.log(
    `local demo after ${Math.round((Date.now() - t0) / 1000)} s: ${ledger.produced} events produced, ` +
      `${got.events} answered (${handedOff.length} hand-offs), rejected ${JSON.stringify(rejected)}`,
  );
  expect(problems).toEqual({});
  expect(rejected).toEqual(Object.fromEntries(statuses.map((s) => [s.receiver, {}])));
  expect(got.events).toBe(expected.events);
  expect(Object.keys(got.byCountry).sort()).toEqual(Object.keys(expected.byCountry).sort());
  for (const [country, e] of Object.entries(expected.byCountry)) {
    expect(got.byCountry[country]!.events).toBe(e.events);
    expect(got.byCountry[country]!.revenue).toBeCloseTo(e.revenue, 6);
  }
  expect(got.events).toBeGreaterThan(2_000);

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
