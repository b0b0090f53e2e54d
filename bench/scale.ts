// Operator scale (issue 8): N CubeAssignments × 16 partitions over 4 replica sets (one receiver
// process each, holding N / 4 cubes), against the real API server and broker. Measures the time
// from creating them to all Ready (and each cube's own time from its create to its Ready, and
// when half of them were Ready), the operator's peak RSS, reconciles and API writes per minute
// once stable, the receivers' RSS, and one cube's full reassign while the others are stable
// against the same reassign on an idle operator.
//
// API writes are counted from watches on the namespace: every version of a CubeAssignment
// (status, finalizer) and every Event written (created or its count bumped).
import { randomBytes } from 'node:crypto';
import { readFileSync, readdirSync, rmSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { execFileSync } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  Watch,
  setHeaderOptions,
} from '@kubernetes/client-node';
import { type Admin, logLevel } from 'kafkajs';
import { group, plural, version, type CubeAssignment } from '../src/api/cube-assignment.ts';
import { createKafka } from '../src/kafka/client.ts';
import { freePort } from '../src/local/processes.ts';
import { benchEnvironment, benchFlags, median, positive, say } from './environment.ts';
import { phaseOrder, phaseSpans, reassignIds } from './operator-log.ts';
import { reuseConnections } from '../src/kubernetes/kube-config.ts';
import { adminKubeConfig } from '../test/env/connection.ts';
import {
  OperatorProcess,
  applyCrd,
  createNamespace,
  cubeApi,
  receiverPod,
} from '../test/support/cluster.ts';
import { createTopic, testSchema } from '../test/support/events.ts';
import { ReceiverProcess } from '../test/support/receiver-process.ts';
import { waitFor } from '../test/support/wait.ts';
import { tempDir } from '../test/support/scratch-dirs.ts';

const usage = `Usage: npm run bench:scale -- [options]

  --cubes N          CubeAssignments to create                          [default 1000]
  --cubes-per-topic N  cubes sharing one topic (16 partitions each)     [default 10]
  --resync DUR       the operator's --resync                            [default 10s]
  --stable-ms N      how long the stable operator is watched            [default 60000]
  --moves N          reassigns of the probe cube, idle and loaded each  [default 3]
  --create-concurrency N  creates in flight at once                     [default 16]
  --workers N        the operator's --workers (cubes reconciled at once)  [default 16]
  --operator KIND    compiled: dist/cli.js, built first, as the image runs it; source:
                     src/cli.ts through Node's type stripping (about 30 MiB more)  [default compiled]
`;

const partitions = 16;
const replicaSets = ['rs-a', 'rs-b', 'rs-c', 'rs-d'] as const;
const hosts = ['127.0.0.51', '127.0.0.52', '127.0.0.53', '127.0.0.54'];
const probe = 'probe';
/** Issue 8's goals at 1,000 cubes (300 MB of RSS); issue 28's from 5,000 (< 120 s, 500 MiB). */
const goalsFor = (cubes: number) =>
  cubes >= 5000
    ? { readyMs: 120_000, operatorRssMib: 500, reassignRatio: 2 }
    : { readyMs: 60_000, operatorRssMib: 300 / 1.048576, reassignRatio: 2 };

const seconds = (ms: number): string => `${(ms / 1000).toFixed(2)} s`;

/** VmHWM (peak) and VmRSS of a process, in MiB. */
function memoryOf(pid: number | undefined): { peakMb: number; rssMb: number } {
  if (pid === undefined) return { peakMb: Number.NaN, rssMb: Number.NaN };
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string): number =>
    Number(new RegExp(`^${field}:\\s+(\\d+)`, 'm').exec(status)?.[1]);
  return { peakMb: kb('VmHWM') / 1024, rssMb: kb('VmRSS') / 1024 };
}

/** The sum of a Prometheus metric's series (those whose labels hold `labels`) in a text exposition. */
async function counterSum(url: string, name: string, labels = ''): Promise<number> {
  const text = await (await fetch(url)).text();
  let sum = 0;
  for (const [, series, value] of text.matchAll(
    new RegExp(`^${name}(\\{[^}]*\\})? ([0-9.e+]+)$`, 'gm'),
  ))
    if ((series ?? '').includes(labels)) sum += Number(value);
  return sum;
}

/** Status reads the receivers answered: GET /v1/cubes (all cubes) and GET /v1/cubes/:cube. */
async function statusReads(receivers: ReceiverProcess[]): Promise<{ all: number; one: number }> {
  const count = async (labels: string): Promise<number> => {
    let sum = 0;
    for (const r of receivers)
      sum += await counterSum(
        `${r.baseUrl}/metrics`,
        'streamcube_receiver_admin_request_duration_seconds_count',
        labels,
      );
    return sum;
  };
  return {
    all: await count('method="GET",route="/v1/cubes",'),
    one: await count('method="GET",route="/v1/cubes/:cube",'),
  };
}

const isReady = (c: CubeAssignment): boolean =>
  !c.status?.reassign &&
  c.status?.observedGeneration === c.metadata.generation &&
  c.status?.conditions?.find((k) => k.type === 'Ready')?.status === 'True';

/**
 * Every new version of a CubeAssignment and every Event written in the namespace while it runs,
 * from watches: the API writes the operator makes (nobody else writes there once the cubes
 * exist). client-node ends a quiet watch after a while: it is opened again from the last version
 * it saw (bookmarks keep that current), so nothing is missed; one the server refuses (410) makes
 * the count worthless, and `ended` says so.
 */
class WriteCounter {
  cubeWrites = 0;
  eventWrites = 0;
  /** Per cube, whether its last version seen is Ready (isReady): the bench's view, not a list. */
  readonly ready = new Map<string, boolean>();
  /** Per cube, when the bench first saw it Ready (performance.now()). */
  readonly firstReadyAt = new Map<string, number>();
  ended: string | undefined;
  private readonly controllers = new Set<AbortController>();
  private stopped = false;

  async start(kc: ReturnType<typeof adminKubeConfig>, namespace: string): Promise<void> {
    const custom = kc.makeApiClient(CustomObjectsApi);
    const cubes = (await custom.listNamespacedCustomObject({
      group,
      version,
      namespace,
      plural,
    })) as {
      metadata?: { resourceVersion?: string };
    };
    const events = await kc.makeApiClient(CoreV1Api).listNamespacedEvent({ namespace });
    await this.follow(
      kc,
      `/apis/${group}/${version}/namespaces/${namespace}/${plural}`,
      cubes.metadata?.resourceVersion,
      (type, object) => {
        if (type === 'MODIFIED') this.cubeWrites += 1;
        const cube = object as CubeAssignment;
        const name = cube.metadata?.name;
        if (name === undefined) return;
        if (type === 'DELETED') this.ready.delete(name);
        else {
          this.ready.set(name, isReady(cube));
          if (isReady(cube) && !this.firstReadyAt.has(name))
            this.firstReadyAt.set(name, performance.now());
        }
      },
    );
    await this.follow(
      kc,
      `/api/v1/namespaces/${namespace}/events`,
      events.metadata?.resourceVersion,
      (type) => {
        if (type === 'ADDED' || type === 'MODIFIED') this.eventWrites += 1;
      },
    );
  }

  private async follow(
    kc: ReturnType<typeof adminKubeConfig>,
    path: string,
    from: string | undefined,
    count: (type: string, object: unknown) => void,
  ): Promise<void> {
    let resourceVersion = from;
    const open = async (): Promise<void> => {
      const controller: AbortController = await new Watch(kc).watch(
        path,
        { resourceVersion, allowWatchBookmarks: true },
        (type: string, object: { metadata?: { resourceVersion?: string } }) => {
          resourceVersion = object.metadata?.resourceVersion ?? resourceVersion;
          if (type === 'ERROR') this.ended ??= `${path}: ${JSON.stringify(object)}`;
          else if (type !== 'BOOKMARK') count(type, object);
        },
        () => {
          this.controllers.delete(controller);
          if (!this.stopped && !this.ended)
            void open().catch((e: unknown) => (this.ended ??= String(e)));
        },
      );
      this.controllers.add(controller);
    };
    await open();
  }

  stop(): void {
    this.stopped = true;
    for (const c of this.controllers) c.abort();
  }
}

/** The cubes of the namespace, listed. */
async function listCubes(
  kc: ReturnType<typeof adminKubeConfig>,
  namespace: string,
): Promise<CubeAssignment[]> {
  const list = (await kc
    .makeApiClient(CustomObjectsApi)
    .listNamespacedCustomObject({ group, version, namespace, plural })) as {
    items: CubeAssignment[];
  };
  return list.items;
}

/**
 * The machine's CPU time so far, in clock ticks over all its cores (`/proc/stat`): busy, stolen
 * by the host of a virtual machine, and in all. Undefined where there is no /proc/stat.
 */
function machineCpu(): { busy: number; steal: number; total: number } | undefined {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n')[0]!;
    const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] =
      line.trim().split(/\s+/).slice(1).map(Number);
    const busy = user + nice + system + irq + softirq;
    return { busy, steal, total: busy + idle + iowait + steal };
  } catch {
    return undefined;
  }
}

/** The parts of the bench's world, by a process's command line. */
const processParts: [string, RegExp][] = [
  ['API server', /kube-apiserver/],
  ['etcd', /(^|\/)etcd /],
  ['broker', /^\S*java .*kafka/],
  ['operator', /cli\.(js|ts) operator/],
  ['receivers', /receiver/],
  // Its watches decode every version of every cube: load a real cluster does not carry.
  ['the bench', /bench\/scale\.ts/],
];

/** CPU seconds each part used since `before` (partsCpu), by part. */
function partsCpuSince(before: Map<string, number>): [string, number][] {
  return [...partsCpu()].map(([part, cpu]) => [part, cpu - (before.get(part) ?? 0)]);
}

/**
 * CPU time each part of the bench's world has used so far (seconds, user + system, from
 * /proc/<pid>/stat): unlike wall time, not stretched by a host that takes the machine's cores
 * for others. Empty where there is no /proc.
 */
function partsCpu(): Map<string, number> {
  const out = new Map<string, number>();
  let pids: string[];
  try {
    pids = readdirSync('/proc').filter((d) => /^\d+$/.test(d));
  } catch {
    return out;
  }
  for (const pid of pids) {
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
      const part = processParts.find(([, re]) => re.test(cmd))?.[0];
      if (!part) continue;
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      // utime and stime, fields 14 and 15 of stat (11 and 12 after the command), in ticks of
      // 1/100 s on Linux.
      const ticks = Number(fields[11]) + Number(fields[12]);
      out.set(part, (out.get(part) ?? 0) + ticks / 100);
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

async function inBatches<T>(items: T[], concurrency: number, run: (item: T) => Promise<unknown>) {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < items.length) await run(items[next++]!);
    }),
  );
}

async function main(): Promise<void> {
  const values = benchFlags(usage, {
    cubes: '1000',
    'cubes-per-topic': '10',
    resync: '10s',
    'stable-ms': '60000',
    moves: '3',
    'create-concurrency': '16',
    workers: '16',
    operator: 'compiled',
  });
  if (!values) return;
  const cubeCount = positive('cubes', values.cubes);
  const goals = goalsFor(cubeCount);
  const cubesPerTopic = positive('cubes-per-topic', values['cubes-per-topic']);
  const stableMs = positive('stable-ms', values['stable-ms']);
  const moves = positive('moves', values.moves);
  const concurrency = positive('create-concurrency', values['create-concurrency']);
  const workers = positive('workers', values.workers);
  if (values.operator !== 'compiled' && values.operator !== 'source') {
    throw new Error(`--operator is compiled or source, not ${values.operator}`);
  }
  let operatorCli: string | undefined;
  if (values.operator === 'compiled') {
    say('building dist/ (npm run build): the operator runs as the image runs it');
    const root = resolve(import.meta.dirname, '..');
    execFileSync('npm', ['run', '-s', 'build'], { stdio: 'inherit', cwd: root });
    operatorCli = resolve(root, 'dist/cli.js');
  }

  const { env, stop: stopEnv } = await benchEnvironment();
  // The bench's creates and watches share their connections, as kubectl's do (client-node alone
  // opens a TLS connection per call: src/kubernetes/kube-config.ts).
  const kc = reuseConnections(adminKubeConfig());
  const api = cubeApi(kc);
  const kafka = createKafka({
    clientId: 'bench-scale',
    brokers: [env.kafka.bootstrap],
    logLevel: logLevel.NOTHING,
  });
  const admin: Admin = kafka.admin();
  const deep = tempDir('bench-scale-deep');
  const token = randomBytes(24).toString('hex');
  const receivers: ReceiverProcess[] = [];
  const topics: string[] = [];
  const writes = new WriteCounter();
  let operator: OperatorProcess | undefined;
  const operatorExited = () =>
    `the operator exited${/heap out of memory/.test(operator?.log() ?? '') ? ': JavaScript heap out of memory (BENCH_OPERATOR_NODE_ARGS raises its bound, e.g. --max-old-space-size=256)' : ''}; see ${operator?.logFile}`;
  let namespace: string | undefined;
  let ok = false;
  try {
    await Promise.all([admin.connect(), applyCrd()]);
    namespace = await createNamespace(kc, 'bench-scale');
    const ns = namespace;
    const port = await freePort();
    for (const [i, rs] of replicaSets.entries()) {
      receivers.push(
        new ReceiverProcess({
          id: `${rs}-0`,
          replicaSet: rs,
          deepStorageDir: deep,
          host: hosts[i],
          port,
          token,
          flushInterval: '10s',
          idleTimeout: '30s',
        }),
      );
    }
    await Promise.all(receivers.map((r) => r.start()));
    for (const [i, rs] of replicaSets.entries())
      await receiverPod(kc, ns, `${rs}-0`, rs, hosts[i]!);
    operator = new OperatorProcess({
      ...(operatorCli ? { cli: operatorCli } : {}),
      namespace: ns,
      receiverToken: token,
      receiverPort: port,
      // Production lease timings: the tests' short ones (4 s / 3 s) lose the lease on a machine
      // this busy, and the operator exits.
      args: [
        `--resync=${values.resync}`,
        `--workers=${workers}`,
        '--lease-duration=15s',
        '--renew-deadline=10s',
        '--retry-period=2s',
      ],
    });
    // Heap bounds go in BENCH_OPERATOR_NODE_ARGS (after the operator's own, node-options.ts, on
    // its command line): flags there win over NODE_OPTIONS.
    await operator.start(
      process.env.BENCH_OPERATOR_NODE_OPTIONS
        ? { NODE_OPTIONS: process.env.BENCH_OPERATOR_NODE_OPTIONS }
        : {},
    );
    const metricsUrl = `http://127.0.0.1:${operator.port}/metrics`;

    const topicCount = Math.ceil(cubeCount / cubesPerTopic) + 1;
    for (let t = 0; t < topicCount; t++) topics.push(await createTopic(admin, partitions));
    say(
      `namespace ${ns}: ${cubeCount} cubes × ${partitions} partitions on ${topicCount - 1} topics ` +
        `(${cubesPerTopic} a topic), each cube on one of ${replicaSets.length} replica sets ` +
        `(${Math.ceil(cubeCount / replicaSets.length)} cubes a receiver); operator --resync=${values.resync} --workers=${workers}`,
    );

    /** One full reassign of the probe cube to `to`: spec patch → Done with the new assignment. */
    const moveProbe = async (to: string): Promise<number> => {
      const started = performance.now();
      await api.patchSpec(ns, probe, { replicaSets: [to] });
      await waitFor(
        `probe moved to ${to}`,
        async () => {
          const c = await api.get(ns, probe);
          return isReady(c) && (c.status?.assignment?.[to]?.length ?? 0) === partitions;
        },
        120_000,
        50,
      );
      return performance.now() - started;
    };
    const moveProbeBackAndForth = async (): Promise<number[]> => {
      const times: number[] = [];
      for (let i = 0; i < moves; i++) times.push(await moveProbe(i % 2 === 0 ? 'rs-b' : 'rs-a'));
      if (moves % 2 === 1) await moveProbe('rs-a');
      return times;
    };

    // ---- the probe cube on an idle operator ----
    await api.create(ns, probe, {
      source: { brokers: [env.kafka.bootstrap], topic: topics[0]!, startingOffsets: 'latest' },
      schema: testSchema,
      replicaSets: ['rs-a'],
    });
    await waitFor('probe Ready', async () => isReady(await api.get(ns, probe)), 60_000, 100);
    const idleMoves = await moveProbeBackAndForth();
    say(`probe reassign on an idle operator: ${idleMoves.map(seconds).join(', ')}`);

    // ---- N cubes ----
    const names = Array.from({ length: cubeCount }, (_, i) => `c-${String(i).padStart(4, '0')}`);
    // Watched from before the first create: which are Ready, and every write while they become so
    // (a list of 1,000 cubes every second would load the API server more than the operator does).
    await writes.start(kc, ns);
    const created = performance.now();
    const cpuAtCreate = machineCpu();
    const partsAtCreate = partsCpu();
    /** Per cube, when its create returned. */
    const createdAt = new Map<string, number>();
    await inBatches(names, concurrency, async (name) => {
      const i = Number(name.slice(2));
      await api.create(ns, name, {
        source: {
          brokers: [env.kafka.bootstrap],
          topic: topics[1 + Math.floor(i / cubesPerTopic)]!,
          startingOffsets: 'latest',
        },
        schema: testSchema,
        replicaSets: [replicaSets[i % replicaSets.length]!],
      });
      createdAt.set(name, performance.now());
    });
    const allCreatedMs = performance.now() - created;
    let lastReport = 0;
    let operatorGone = false;
    await waitFor(
      `${cubeCount} cubes Ready`,
      () => {
        if (writes.ended) throw new Error(`readiness not followed: ${writes.ended}`);
        // An operator past its heap bound stops ("JavaScript heap out of memory"): said at once,
        // not after the wait's half hour (waitFor takes a throw for "not yet").
        operatorGone = !operator?.alive;
        if (operatorGone) return Promise.resolve(true);
        const ready = names.filter((n) => writes.ready.get(n) === true).length;
        if (performance.now() - lastReport > 10_000) {
          lastReport = performance.now();
          say(`  ${seconds(performance.now() - created)}: ${ready} / ${cubeCount} Ready`);
        }
        return Promise.resolve(ready === cubeCount);
      },
      30 * 60_000,
      1_000,
    );
    if (operatorGone) throw new Error(operatorExited());
    const allReadyMs = performance.now() - created;
    const cpuToReady = machineCpu();
    const partsToReady = partsCpuSince(partsAtCreate);
    // Each cube from its create to its Ready, and when half of them were Ready: placed cubes are
    // Ready at once, or only once every cube is placed.
    const toReady = names
      .map((n) => (writes.firstReadyAt.get(n) ?? Number.NaN) - (createdAt.get(n) ?? Number.NaN))
      .sort((a, b) => a - b);
    const halfReadyMs =
      [...writes.firstReadyAt.values()].sort((a, b) => a - b)[Math.ceil(cubeCount / 2) - 1]! -
      created;
    const p90ToReadyMs = toReady[Math.ceil(toReady.length * 0.9) - 1]!;
    const writesToReady = { cubes: writes.cubeWrites, events: writes.eventWrites };
    const atReady = memoryOf(operator.child?.pid);
    say(
      `operator RSS when all are Ready: ${atReady.rssMb.toFixed(0)} MiB (peak so far ${atReady.peakMb.toFixed(0)} MiB)`,
    );
    say(
      `all ${cubeCount} Ready ${seconds(allReadyMs)} after the first create (creates took ${seconds(allCreatedMs)})`,
    );
    if (cpuAtCreate && cpuToReady) {
      // A virtual machine's host may run others on its cores: the same code on a machine whose
      // host took a seventh of its time was 15 s slower to all Ready than on one it left alone.
      const total = cpuToReady.total - cpuAtCreate.total;
      const share = (ticks: number) => `${((100 * ticks) / total).toFixed(0)} %`;
      say(
        `the machine's CPU from the first create to all Ready: busy ${share(cpuToReady.busy - cpuAtCreate.busy)}, taken by the host (steal) ${share(cpuToReady.steal - cpuAtCreate.steal)}`,
      );
    }
    if (partsToReady.length > 0) {
      const used = partsToReady.map(([part, cpu]) => `${part} ${cpu.toFixed(1)} s`);
      say(`CPU time from the first create to all Ready: ${used.join(', ')}`);
    }
    say(
      `a cube's create → its Ready: median ${seconds(median(toReady))}, p90 ${seconds(p90ToReadyMs)}; half of them Ready ${seconds(halfReadyMs)} after the first create`,
    );
    say(
      `operator writes until then: ${writesToReady.cubes} cube versions (${(writesToReady.cubes / (cubeCount + 1)).toFixed(1)} a cube) and ${writesToReady.events} Events`,
    );

    // ---- stable ----
    // The first resync after Ready writes positions once; measured after it.
    await sleep(Math.max(15_000, 1.5 * Number.parseFloat(values.resync) * 1000));
    const writesBefore = { cubes: writes.cubeWrites, events: writes.eventWrites };
    const before = {
      reconciles: await counterSum(metricsUrl, 'controller_runtime_reconcile_total'),
      reads: await statusReads(receivers),
    };
    const stableStarted = performance.now();
    const cpuAtStable = partsCpu();
    await sleep(stableMs);
    const stableMinutes = (performance.now() - stableStarted) / 60_000;
    // What N stable cubes cost each part (the metrics reads above and below are the bench's).
    const cpuStable = partsCpuSince(cpuAtStable).map(
      ([part, cpu]) => `${part} ${((100 * cpu) / (stableMinutes * 60)).toFixed(1)} %`,
    );
    const reconcilesPerMin =
      ((await counterSum(metricsUrl, 'controller_runtime_reconcile_total')) - before.reconciles) /
      stableMinutes;
    writes.stop();
    if (writes.ended) throw new Error(`API writes not counted: ${writes.ended}`);
    const cubeWritesPerMin = (writes.cubeWrites - writesBefore.cubes) / stableMinutes;
    const eventWritesPerMin = (writes.eventWrites - writesBefore.events) / stableMinutes;
    const reads = await statusReads(receivers);
    const readsPerMin = {
      all: (reads.all - before.reads.all) / stableMinutes,
      one: (reads.one - before.reads.one) / stableMinutes,
    };

    // ---- the probe among N stable cubes ----
    const loadedMoves = await moveProbeBackAndForth();
    say(`probe reassign among ${cubeCount} stable cubes: ${loadedMoves.map(seconds).join(', ')}`);

    const operatorMemory = memoryOf(operator.child?.pid);
    const operatorHeapMb =
      (await counterSum(metricsUrl, 'nodejs_heap_size_used_bytes')) / 1024 / 1024;
    const mib = async (name: string): Promise<string> =>
      ((await counterSum(metricsUrl, name)) / 1024 / 1024).toFixed(0);
    say(
      `operator memory: V8 heap total ${await mib('nodejs_heap_size_total_bytes')} MiB, ` +
        `external ${await mib('nodejs_external_memory_bytes')} MiB, ` +
        `RSS ${operatorMemory.rssMb.toFixed(0)} MiB (peak ${operatorMemory.peakMb.toFixed(0)})`,
    );
    const spaces = await (await fetch(metricsUrl)).text();
    say(
      `operator V8 spaces (total MiB): ${[
        ...spaces.matchAll(/^nodejs_heap_space_size_total_bytes\{space="(\w+)"[^}]*\} (\S+)$/gm),
      ]
        .map(([, space, bytes]) => `${space} ${(Number(bytes) / 1024 / 1024).toFixed(0)}`)
        .join(', ')}`,
    );
    const receiverMemory = receivers.map((r) => memoryOf(r.child?.pid));
    const ratio = median(loadedMoves) / median(idleMoves);
    const mark = (met: boolean): string => (met ? 'met' : 'NOT met');
    say('');
    say(`| measure | value | goal |`);
    say(`|---|---|---|`);
    say(
      `| creates → all ${cubeCount} Ready | ${seconds(allReadyMs)} | < ${goals.readyMs / 1000} s: ${mark(allReadyMs < goals.readyMs)} |`,
    );
    say(
      `| a cube's create → its Ready: median (p90); half Ready | ${seconds(median(toReady))} (${seconds(p90ToReadyMs)}); ${seconds(halfReadyMs)} | — |`,
    );
    say(
      `| operator RSS: peak (at the end; V8 heap used) | ${operatorMemory.peakMb.toFixed(0)} MiB (${operatorMemory.rssMb.toFixed(0)}; ${operatorHeapMb.toFixed(0)}) | < ${goals.operatorRssMib.toFixed(0)} MiB: ${mark(operatorMemory.peakMb < goals.operatorRssMib)} |`,
    );
    say(`| reconciles/min, stable | ${reconcilesPerMin.toFixed(0)} | — |`);
    if (cpuStable.length > 0)
      say(`| CPU while stable, % of one core | ${cpuStable.join(', ')} | — |`);
    say(
      `| API writes/min, stable (cube versions + Events) | ${cubeWritesPerMin.toFixed(1)} + ${eventWritesPerMin.toFixed(1)} | no status write between resyncs: ${mark(cubeWritesPerMin === 0)} |`,
    );
    say(
      `| receiver status reads/min, stable: GET /v1/cubes, GET /v1/cubes/:cube | ${readsPerMin.all.toFixed(1)}, ${readsPerMin.one.toFixed(1)} | one per receiver per resync |`,
    );
    say(
      `| receiver RSS (now / peak), per receiver | ${receiverMemory.map((m) => `${m.rssMb.toFixed(0)}/${m.peakMb.toFixed(0)}`).join(', ')} MiB | — |`,
    );
    say(
      `| probe reassign, median (idle → ${cubeCount} stable) | ${seconds(median(idleMoves))} → ${seconds(median(loadedMoves))} (×${ratio.toFixed(2)}) | within ×${goals.reassignRatio}: ${mark(ratio <= goals.reassignRatio)} |`,
    );
    // Where the probe's time went, idle and loaded: the first reassign assigned it, then each
    // round of moves made `moves` rounded up to even reassigns.
    const perRound = moves + (moves % 2);
    const ids = reassignIds(operator.logFile, probe);
    const spansOf = (from: number): Map<string, number>[] =>
      ids.slice(from, from + moves).map((id) => phaseSpans(operator!.logFile, id));
    const [idleSpans, loadedSpans] = [spansOf(1), spansOf(1 + perRound)];
    say('');
    say('probe reassign by phase, median ms (operator log), idle → loaded:');
    for (const phase of phaseOrder) {
      const of = (spans: Map<string, number>[]): number =>
        median(spans.flatMap((m) => (m.has(phase) ? [m.get(phase)!] : [])));
      // A phase no move went through (a move has no Planned, Fencing or Done of its own).
      if (Number.isNaN(of(idleSpans)) && Number.isNaN(of(loadedSpans))) continue;
      say(`  ${phase.padEnd(9)} ${of(idleSpans)} → ${of(loadedSpans)}`);
    }
    ok = true;
  } catch (error) {
    // Later in the run (the stable watch, the probe's moves) its calls fail: say why.
    if (operator && !operator.alive) throw new Error(operatorExited(), { cause: error });
    throw error;
  } finally {
    writes.stop();
    if (!ok) {
      if (operator) say(`operator log: ${operator.logFile}`);
      for (const r of receivers) say(`${r.options.id} log: ${r.logFile}`);
    }
    await operator?.kill('SIGTERM');
    if (namespace) {
      // No operator is left to run the finalizers: they are dropped so the objects can go.
      const custom = kc.makeApiClient(CustomObjectsApi);
      const ns = namespace;
      const names = (await listCubes(kc, ns).catch(() => [])).map((c) => c.metadata.name ?? '');
      await inBatches(names, 16, (name) =>
        custom
          .patchNamespacedCustomObject(
            {
              group,
              version,
              namespace: ns,
              plural,
              name,
              body: { metadata: { finalizers: null } },
            },
            setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
          )
          .then(() => api.delete(ns, name))
          .catch(() => undefined),
      );
    }
    await Promise.all(receivers.map((r) => r.stop()));
    if (topics.length > 0) await admin.deleteTopics({ topics }).catch(() => undefined);
    await admin.disconnect();
    rmSync(deep, { recursive: true, force: true });
    if (ok) {
      for (const dir of [
        ...(operator ? [dirname(operator.logFile)] : []),
        ...receivers.map((r) => dirname(r.dataDir)),
      ])
        rmSync(dir, { recursive: true, force: true });
    }
    await stopEnv();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`bench failed: ${(error as Error).stack ?? String(error)}\n`);
  process.exitCode = 1;
});
