// Reassign latency (issues 4 and 28): a cube under steady load moved back and forth between two
// halves of its replica sets by the real operator; per move the time from the spec change to Done,
// and per moved partition the hand-off gap measured from what the receivers report.
//
// Hand-off gap of partition p in one move, source set S, target set T, stop offset stop[p] (the
// journal's):
//   t_last_old  = when a replica of S consumed the last event it will consume (its position then
//                 equals stop[p] and stays put): its `consumedAt` of p; the latest over S's replicas
//                 that reached it;
//   t_first_new = when a replica of T consumed its first event of p under the new epoch: its
//                 `firstConsumedAt` of p; the latest over T's replicas (every replica serves queries);
//   gap         = t_first_new − t_last_old.
// Both times are the receivers' own (one machine, one clock), read by polls of their status every
// --poll-ms. The gap by the polls' arrival is printed beside it: the first poll showing a source at
// its stop and the first showing a target past it, each late by up to a poll and its round trip.
// Under steady load T's first event also waits for the next produced batch (one --tick-ms at
// most).
// The operator's phase timestamps (JSON log lines) tell where the time goes.
import { randomBytes } from 'node:crypto';
import { rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import { type KubeConfig, Watch } from '@kubernetes/client-node';
import { type Admin, logLevel } from 'kafkajs';
import { group, plural, version, type CubeAssignment } from '../src/api/cube-assignment.ts';
import { createKafka } from '../src/kafka/client.ts';
import type { CubeSummary } from '../src/protocol/admin-api.ts';
import { ReceiverApiError } from '../src/protocol/client.ts';
import { adminKubeConfig } from '../test/env/connection.ts';
import { freePort } from '../src/local/processes.ts';
import { benchEnvironment, benchFlags, positive, say } from './environment.ts';
import { firstPhaseAt, phaseOrder, phaseSpans, phaseTimes } from './operator-log.ts';
import {
  OperatorProcess,
  applyCrd,
  createNamespace,
  cubeApi,
  receiverPod,
  waitForSettled,
} from '../test/support/cluster.ts';
import { createTopic, highWatermarks, makeEvents, testSchema } from '../test/support/events.ts';
import { ReceiverProcess } from '../test/support/receiver-process.ts';
import { waitFor } from '../test/support/wait.ts';
import { tempDir } from '../test/support/scratch-dirs.ts';

const usage = `Usage: npm run bench:reassign -- [options]

  --moves N        moves to time                                   [BENCH_MOVES, default 10]
  --mode M         all: every partition from the first half of the sets to the second and
                   back (spec.replicaSets: rs-a → rs-b with two sets);
                   half: half the partitions swap sides (spec.pins; two sets only) [default all]
  --partitions N   partitions of the topic                          [default 32]
  --replica-sets N the cube moves between the first and the second half of N sets [default 2]
  --replicas R     receivers (replicas) in each replica set         [default 1]
  --rate N         events/s produced, spread over the partitions    [default 3200]
  --tick-ms N      the producer sends one batch to every partition this often [default 50]
  --poll-ms N      how often each receiver's status is read (the gap is timed by the
                   receivers' own clocks; 50 until 2026-12-06)     [default 500]
  --cube-poll-ms N how often the cube is read beside its watch (Done: whichever sees it
                   first; 50 until 2026-12-06)                     [default 1000]
  --operator-resync D  the operator's --resync (the tests run it at 1s; 1s until 2026-12-06)
                                                                   [default 10s]
  --poll-view V    what each poll reads: summary (GET ?view=summary) or full (the status
                   with its segments listed, as before 2026-12-06)   [default summary]
  --settle-ms N    steady consumption between two moves             [default 1000]
  --warmup-moves N moves made first and left out of the figures (each set's first turn as
                   source and as target: their code paths are cold in a fresh receiver) [default 0]
  --warmup-s N     load before the first move, at least; then until the
                   producer has not stood still 0.5 s in the last 3 s [default 10]
  --keep-logs      keep the operator's and the receivers' logs (and say where)
`;

const cube = 'bench';
type ReplicaSet = string;
/** rs-a, rs-b, …: the sets' names. */
const setName = (i: number): ReplicaSet => `rs-${String.fromCharCode(97 + i)}`;
/** Every receiver its own loopback address from 127.0.0.41 on, as in a cluster. */
const hostOf = (n: number): string => `127.0.0.${41 + n}`;
/**
 * The goals a run is judged by: issue 28's for moves of 512 partitions or more (Done p99 2 s, gap
 * p99 1 s) and of 32 or fewer (gap p99 250 ms); the first bench's (Done 5 s, gap 1 s) otherwise.
 */
function goalsFor(partitions: number): { doneP99Ms: number; gapP99Ms: number; of: string } {
  if (partitions >= 512)
    return { doneP99Ms: 2_000, gapP99Ms: 1_000, of: 'issue 28, 512 partitions' };
  if (partitions <= 32) return { doneP99Ms: 5_000, gapP99Ms: 250, of: 'issue 28, 32 partitions' };
  return { doneP99Ms: 5_000, gapP99Ms: 1_000, of: 'the first bench' };
}

const seconds = (ms: number): string => `${(ms / 1000).toFixed(2)} s`;

function percentile(values: number[], q: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  // Nearest rank: with 10 values p99 is the largest, never an interpolation below it.
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;
}

// ---- steady load ----------------------------------------------------------------------------

interface LoadSettings {
  brokers: string[];
  topic: string;
  partitions: number;
  perTick: number;
  tickMs: number;
}

/**
 * Every tick one batch to every partition; event time = produce time, so data shows it too. Runs
 * in a worker thread of its own: on the main thread, parsing the status polls of hundreds of
 * partitions held its sends back for seconds, and a target had nothing to consume past its stop.
 */
async function produceInWorker(settings: LoadSettings): Promise<void> {
  const kafka = createKafka({
    clientId: 'bench-reassign-load',
    brokers: settings.brokers,
    logLevel: logLevel.NOTHING,
  });
  const producer = kafka.producer({ allowAutoTopicCreation: false });
  await producer.connect();
  let running = true;
  parentPort!.on('message', () => {
    running = false;
  });
  for (let round = 0; running; round++) {
    const began = Date.now();
    const messages: { partition: number; value: string }[] = [];
    for (let p = 0; p < settings.partitions; p++) {
      for (const e of makeEvents(p, settings.perTick, began, 1, round)) {
        messages.push({ partition: p, value: JSON.stringify(e) });
      }
    }
    await producer.send({ topic: settings.topic, acks: -1, messages });
    parentPort!.postMessage({ at: Date.now(), count: messages.length });
    await sleep(Math.max(0, settings.tickMs - (Date.now() - began)));
  }
  await producer.disconnect();
  parentPort!.postMessage({ stopped: true });
}

class TimedLoad {
  produced = 0;
  /** When each batch was acknowledged. */
  readonly sends: number[] = [];
  private readonly worker: Worker;
  private readonly stopped: Promise<void>;

  constructor(settings: LoadSettings) {
    this.worker = new Worker(new URL(import.meta.url), { workerData: settings });
    const { promise, resolve, reject } = Promise.withResolvers<void>();
    this.stopped = promise;
    this.worker.on('message', (m: { at?: number; count?: number; stopped?: boolean }) => {
      if (m.stopped) resolve();
      else {
        this.produced += m.count!;
        this.sends.push(m.at!);
      }
    });
    this.worker.on('error', reject);
    this.worker.on('exit', () => resolve());
  }

  /** The longest time between two acknowledged batches that began outside every window. */
  longestPauseOutside(windows: [number, number][]): number {
    let longest = 0;
    for (let k = 1; k < this.sends.length; k++) {
      const from = this.sends[k - 1]!;
      if (windows.some(([a, b]) => from >= a && from <= b)) continue;
      longest = Math.max(longest, this.sends[k]! - from);
    }
    return longest;
  }

  /** The longest time between two acknowledged batches within [from, to]. */
  longestPause(from: number, to: number): number {
    let longest = 0;
    let before = from;
    for (const at of this.sends) {
      if (at < from) continue;
      if (at > to) break;
      longest = Math.max(longest, at - before);
      before = at;
    }
    return Math.max(longest, to - before);
  }

  async stop(): Promise<void> {
    this.worker.postMessage('stop');
    await this.stopped;
    await this.worker.terminate();
  }
}

// ---- what the receivers report, polled ------------------------------------------------------

interface Sample {
  /** When the answer arrived. */
  at: number;
  /**
   * partition → position, state, and when the receiver last and first (under its epoch) consumed
   * records of it, by its own clock; empty when the receiver does not hold the cube.
   */
  partitions: Map<number, PolledPartition>;
}

interface PolledPartition {
  position: bigint;
  state: string;
  consumedAt: number | undefined;
  firstConsumedAt: number | undefined;
}

const timeOf = (iso: string | undefined): number | undefined =>
  iso === undefined ? undefined : Date.parse(iso);

/** Every receiver polled on its own loop: one slow answer does not hold back the others' polls. */
class PositionSampler {
  /** receiver id → its samples, in order. */
  readonly samples = new Map<string, Sample[]>();
  /** Round trip of every poll, ms. */
  readonly roundTrips: number[] = [];
  private running = false;
  private loops: Promise<void>[] = [];
  errors = 0;
  private readonly sets: Map<ReplicaSet, ReceiverProcess[]>;
  private readonly pollMs: number;

  private readonly view: 'summary' | 'full';

  constructor(sets: Map<ReplicaSet, ReceiverProcess[]>, pollMs: number, view: 'summary' | 'full') {
    this.sets = sets;
    this.pollMs = pollMs;
    this.view = view;
    for (const receivers of sets.values())
      for (const r of receivers) this.samples.set(r.options.id, []);
  }

  private async sample(receiver: ReceiverProcess): Promise<void> {
    const sent = Date.now();
    let status: Pick<CubeSummary, 'partitions'> | undefined;
    try {
      status =
        this.view === 'summary'
          ? await receiver.client.cubeSummary(cube)
          : await receiver.client.cubeStatus(cube);
    } catch (error) {
      if (!(error instanceof ReceiverApiError && error.status === 404)) {
        this.errors += 1;
        return;
      }
    }
    const at = Date.now();
    this.roundTrips.push(at - sent);
    const partitions = new Map(
      (status?.partitions ?? []).map((p) => [
        p.partition,
        {
          position: BigInt(p.position),
          state: p.state,
          consumedAt: timeOf(p.consumedAt),
          firstConsumedAt: timeOf(p.firstConsumedAt),
        },
      ]),
    );
    this.samples.get(receiver.options.id)!.push({ at, partitions });
  }

  start(): void {
    this.running = true;
    for (const receivers of this.sets.values()) {
      for (const receiver of receivers) {
        this.loops.push(
          (async () => {
            while (this.running) {
              const began = Date.now();
              await this.sample(receiver);
              await sleep(Math.max(0, this.pollMs - (Date.now() - began)));
            }
          })(),
        );
      }
    }
  }

  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.loops);
  }

  private replicas(rs: ReplicaSet): Sample[][] {
    return (this.sets.get(rs) ?? []).map((r) => this.samples.get(r.options.id)!);
  }

  /**
   * When the replicas of `source` that reached `stop` had reached it (the latest of them): each
   * one's first poll at `stop` after one below it (see the file's comment). Positions only grow,
   * so that poll is of this move.
   */
  lastConsumed(source: ReplicaSet, p: number, stop: bigint): number | undefined {
    let latest: number | undefined;
    for (const samples of this.replicas(source)) {
      let found: number | undefined;
      let before: bigint | undefined;
      for (const s of samples) {
        const position = s.partitions.get(p)?.position;
        if (position === undefined) continue;
        if (position === stop && (before === undefined || before < stop) && found === undefined)
          found = s.at;
        before = position;
      }
      if (found !== undefined) latest = Math.max(latest ?? found, found);
    }
    return latest;
  }

  /**
   * The same instant by the receivers' own clocks: when the replicas of `source` that reached
   * `stop` took the event before it (`consumedAt` at a poll that shows them at `stop`; it stays
   * put until the partition comes back), the latest of them. Exact, where a poll is late by up to
   * one period and its round trip.
   */
  lastConsumedAt(source: ReplicaSet, p: number, stop: bigint): number | undefined {
    let latest: number | undefined;
    for (const samples of this.replicas(source)) {
      const at = samples
        .findLast((s) => s.partitions.get(p)?.position === stop)
        ?.partitions.get(p)?.consumedAt;
      if (at !== undefined) latest = Math.max(latest ?? at, at);
    }
    return latest;
  }

  /**
   * By the receivers' own clocks, when every replica of `target` took its first event of p past
   * `stop` (`firstConsumedAt` under the new epoch); undefined while one has not, or no poll after
   * `from` shows it yet.
   */
  firstConsumedAt(target: ReplicaSet, p: number, stop: bigint, from: number): number | undefined {
    return this.whenPast(target, p, stop, from, (s) => s.partitions.get(p)!.firstConsumedAt);
  }

  /** The longest time p stood still on `owner` within [from, to]: stalls of partitions that stay. */
  longestStall(owner: ReplicaSet, p: number, from: number, to: number): number | undefined {
    let longestOver: number | undefined;
    for (const samples of this.replicas(owner)) {
      let lastAdvance: number | undefined;
      let before: bigint | undefined;
      let longest = 0;
      for (const s of samples) {
        if (s.at < from) {
          before = s.partitions.get(p)?.position ?? before;
          continue;
        }
        if (s.at > to) break;
        const position = s.partitions.get(p)?.position;
        lastAdvance ??= s.at;
        if (position !== undefined && before !== undefined && position > before) {
          longest = Math.max(longest, s.at - lastAdvance);
          lastAdvance = s.at;
        }
        before = position ?? before;
      }
      if (lastAdvance !== undefined)
        longestOver = Math.max(longestOver ?? 0, longest, to - lastAdvance);
    }
    return longestOver;
  }

  /**
   * When every replica of `target` had consumed p past `stop`: the latest of their first polls
   * after `from` that show it; undefined while one has not.
   */
  firstConsumed(target: ReplicaSet, p: number, stop: bigint, from: number): number | undefined {
    return this.whenPast(target, p, stop, from, (s) => s.at);
  }

  /**
   * Over the replicas of `target`, the latest `timeOf` their first poll after `from` that shows p
   * past `stop` (not released); undefined while one has no such poll or it has no time.
   */
  private whenPast(
    target: ReplicaSet,
    p: number,
    stop: bigint,
    from: number,
    timeOf: (first: Sample) => number | undefined,
  ): number | undefined {
    let latest: number | undefined;
    for (const samples of this.replicas(target)) {
      const first = samples.find((s) => {
        if (s.at < from) return false;
        const row = s.partitions.get(p);
        return row !== undefined && row.state !== 'released' && row.position > stop;
      });
      const at = first && timeOf(first);
      if (at === undefined) return undefined;
      latest = Math.max(latest ?? at, at);
    }
    return latest;
  }
}

// ---- the cube, watched ----------------------------------------------------------------------

interface Observation {
  at: number;
  cube: CubeAssignment;
}

/**
 * Every version of the cube while a move runs: a watch (it sees each persisted phase, so the stop
 * offsets of even a fast Draining) and a poll every `pollMs` beside it in case the watch drops.
 * Says which of the two saw Done first.
 */
async function watchMove(
  kc: KubeConfig,
  namespace: string,
  isDone: (c: CubeAssignment) => boolean,
  timeoutMs: number,
  pollMs: number,
  patch: () => Promise<unknown>,
): Promise<{
  started: number;
  observations: Observation[];
  doneAt: number;
  doneCube: CubeAssignment;
  doneSeenBy: 'watch' | 'poll';
}> {
  const observations: Observation[] = [];
  let doneAt: number | undefined;
  let doneCube: CubeAssignment | undefined;
  let doneSeenBy: 'watch' | 'poll' = 'watch';
  const { promise: done, resolve } = Promise.withResolvers<void>();
  const observe = (c: CubeAssignment, by: 'watch' | 'poll'): void => {
    observations.push({ at: Date.now(), cube: c });
    if (doneAt === undefined && isDone(c)) {
      doneAt = Date.now();
      doneCube = c;
      doneSeenBy = by;
      resolve();
    }
  };
  const api = cubeApi(kc);
  const current = await api.get(namespace, cube);
  const controller = await new Watch(kc).watch(
    `/apis/${group}/${version}/namespaces/${namespace}/${plural}`,
    {
      fieldSelector: `metadata.name=${cube}`,
      resourceVersion: current.metadata?.resourceVersion,
    },
    (type: string, object: CubeAssignment) => {
      if (type === 'MODIFIED' || type === 'ADDED') observe(object, 'watch');
    },
    () => undefined,
  );
  let polling = true;
  const started = Date.now();
  await patch();
  const poll = (async () => {
    while (polling) {
      await sleep(pollMs);
      const c = await api.get(namespace, cube).catch(() => undefined);
      if (c) observe(c, 'poll');
    }
  })();
  const timer = setTimeout(resolve, timeoutMs);
  try {
    await done;
  } finally {
    clearTimeout(timer);
    polling = false;
    controller.abort();
    await poll.catch(() => undefined);
  }
  if (doneAt === undefined || !doneCube) throw new Error(`move not done after ${timeoutMs} ms`);
  return { started, observations, doneAt, doneCube, doneSeenBy };
}

// ---- the operator's log ---------------------------------------------------------------------

/** What each span of the operator's log holds (src/operator/reassign/, cube/journal-runner.ts). */
const phaseContents: Record<string, string> = {
  react:
    'spec change → informer → plan → journal written (at Pausing; at Planned before 2026-12-05)',
  Planned: 'one status write (→ Pausing); a move is no longer written at Planned',
  Pausing: 'pause on every source receiver + status write with stop offsets',
  Draining: 'drain to the stop offsets on every source receiver + status write',
  Starting: 'release on the sources, assign on the targets (consumer restart) + status write',
  Sealing:
    'seal + hand-off + unassign on emptied sources + status write (assignment, epochs, journal cleared)',
  Done: 'journal cleared + Event (a move wrote Done before 2026-12-05)',
};

// ---- the receivers' own accounts ------------------------------------------------------------

/**
 * Time the receivers spent on each admin route, on flushes and on hand-offs over the run (their
 * histograms' sums and counts), summed over the receivers: the status polls of this bench are
 * GET routes, the reassign's calls POST and PUT.
 */
function receiverTotals(texts: string[]): Map<string, { seconds: number; count: number }> {
  const totals = new Map<string, { seconds: number; count: number }>();
  const line =
    /^streamcube_receiver_(admin_request|flush|handoff)_duration_seconds_(sum|count)\{([^}]*)\} (\S+)$/;
  for (const text of texts) {
    for (const l of text.split('\n')) {
      const m = line.exec(l);
      if (!m) continue;
      const labels = Object.fromEntries(
        [...m[3]!.matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1]!, x[2]!]),
      );
      const key = m[1] === 'admin_request' ? `${labels.method} ${labels.route}` : `(${m[1]})`;
      const t = totals.get(key) ?? { seconds: 0, count: 0 };
      if (m[2] === 'sum') t.seconds += Number(m[4]);
      else t.count += Number(m[4]);
      totals.set(key, t);
    }
  }
  return totals;
}

// ---- the run --------------------------------------------------------------------------------

interface MoveResult {
  label: string;
  moved: number;
  doneMs: number;
  /** Hand-off gaps by the receivers' clocks. */
  gapsMs: number[];
  /** The same hand-offs by the polls' arrival (each end late by up to a poll and its round trip). */
  polledGapsMs: number[];
  /** Longest stand-still of each partition that stayed, from the spec change to Done + 0.5 s. */
  stallsMs: number[];
  unmeasured: number;
  /** Phase → ms, from the operator's log; 'react' is spec change → Planned. */
  phases: Map<string, number>;
  /** Pausing logged → Sealing logged (the targets have started): the log's view of the gap. */
  logGapMs: number | undefined;
  /** The load's longest pause between two acknowledged batches, spec change → Done + 1 s. */
  producerPauseMs: number;
  /** Spec change → Done + 1 s. */
  window: [number, number];
}

async function main(): Promise<void> {
  const values = benchFlags(usage, {
    moves: undefined,
    mode: 'all',
    partitions: '32',
    rate: '3200',
    'tick-ms': '50',
    'poll-ms': '500',
    'poll-view': 'summary',
    'cube-poll-ms': '1000',
    'operator-resync': '10s',
    'settle-ms': '1000',
    'warmup-s': '10',
    'warmup-moves': '0',
    'replica-sets': '2',
    replicas: '1',
    'keep-logs': false,
  });
  if (!values) return;
  const moves = positive('moves', values.moves ?? process.env.BENCH_MOVES ?? '10');
  const mode = values.mode;
  if (mode !== 'all' && mode !== 'half') throw new Error('--mode must be all or half');
  const partitions = positive('partitions', values.partitions);
  if (mode === 'half' && partitions % 4 !== 0)
    throw new Error('--mode half needs a partition count divisible by 4');
  const rate = positive('rate', values.rate);
  const tickMs = positive('tick-ms', values['tick-ms']);
  const pollMs = positive('poll-ms', values['poll-ms']);
  const pollView = values['poll-view'];
  const cubePollMs = positive('cube-poll-ms', values['cube-poll-ms']);
  const operatorResync = values['operator-resync'];
  if (pollView !== 'summary' && pollView !== 'full')
    throw new Error('--poll-view must be summary or full');
  const settleMs = positive('settle-ms', values['settle-ms']);
  const warmupMs = 1000 * Number(values['warmup-s']);
  const warmupMoves = Number(values['warmup-moves']);
  if (!Number.isInteger(warmupMoves) || warmupMoves < 0)
    throw new Error('--warmup-moves must be a whole number');
  const perTick = Math.max(1, Math.round((rate * tickMs) / 1000 / partitions));
  const setCount = positive('replica-sets', values['replica-sets']);
  const replicasPerSet = positive('replicas', values.replicas);
  if (setCount < 2 || setCount > 26 || setCount % 2 !== 0)
    throw new Error('--replica-sets must be even, from 2 to 26');
  if (mode === 'half' && setCount !== 2) throw new Error('--mode half needs --replica-sets 2');
  const replicaSets = Array.from({ length: setCount }, (_, i) => setName(i));
  /** The cube moves between these two halves of the sets. */
  const halves = [replicaSets.slice(0, setCount / 2), replicaSets.slice(setCount / 2)] as const;

  const { env, stop: stopEnv } = await benchEnvironment();
  const kc = adminKubeConfig();
  const kafka = createKafka({
    clientId: 'bench-reassign',
    brokers: [env.kafka.bootstrap],
    // The producer's first sends may meet a leader not yet known (retried; not worth a line).
    logLevel: logLevel.NOTHING,
  });
  const admin: Admin = kafka.admin();
  const deep = tempDir('bench-reassign-deep');
  const token = randomBytes(24).toString('hex');
  const receivers = new Map<ReplicaSet, ReceiverProcess[]>();
  const everyReceiver = (): ReceiverProcess[] => [...receivers.values()].flat();
  let operator: OperatorProcess | undefined;
  let load: TimedLoad | undefined;
  let sampler: PositionSampler | undefined;
  let topic: string | undefined;
  /** Where the cube lives, for the clean-up. */
  let cubeNamespace: string | undefined;
  let ok = false;
  try {
    await Promise.all([admin.connect(), applyCrd()]);
    const namespace = await createNamespace(kc, 'bench-reassign');
    const port = await freePort();
    for (const [i, rs] of replicaSets.entries()) {
      receivers.set(rs, []);
      for (let r = 0; r < replicasPerSet; r++) {
        receivers.get(rs)!.push(
          new ReceiverProcess({
            id: `${rs}-${r}`,
            replicaSet: rs,
            deepStorageDir: deep,
            host: hostOf(i * replicasPerSet + r),
            port,
            token,
            namespace,
            // The receiver's own defaults, as a pod runs it.
            flushInterval: '1s',
            idleTimeout: '30s',
          }),
        );
      }
    }
    // Four at a time: sixteen node processes starting at once on two cores miss the 30 s bound.
    const starting = everyReceiver();
    while (starting.length > 0) await Promise.all(starting.splice(0, 4).map((r) => r.start()));
    for (const r of everyReceiver())
      await receiverPod(kc, namespace, r.options.id, r.options.replicaSet, r.options.host!);
    operator = new OperatorProcess({
      namespace,
      receiverToken: token,
      receiverPort: port,
      // The operator's own resync (10 s), as a pod runs it, unless told: the tests' 1 s has it
      // read every receiver's status of the cube every second, 16 reads a second at 8 × 2.
      args: [`--resync=${operatorResync}`],
    });
    await operator.start();

    topic = await createTopic(admin, partitions);
    load = new TimedLoad({
      brokers: [env.kafka.bootstrap],
      topic,
      partitions,
      perTick,
      tickMs,
    });
    say(
      `namespace ${namespace}, topic ${topic}: ${partitions} partitions, ${perTick * partitions * Math.round(1000 / tickMs)} events/s ` +
        `(${perTick} per partition every ${tickMs} ms); ${setCount} replica sets of ${replicasPerSet}; ` +
        `${moves} moves, mode ${mode}`,
    );

    const all = Array.from({ length: partitions }, (_, i) => i);
    const quarter = partitions / 4;
    // half: layout A = rs-a [0, P/2), rs-b [P/2, P); layout B swaps the 2nd and 3rd quarters.
    const layouts = {
      A: {
        'rs-a': all.slice(0, 2 * quarter),
        'rs-b': all.slice(2 * quarter),
      },
      B: {
        'rs-a': [...all.slice(0, quarter), ...all.slice(2 * quarter, 3 * quarter)],
        'rs-b': [...all.slice(quarter, 2 * quarter), ...all.slice(3 * quarter)],
      },
    };
    const api = cubeApi(kc);
    /** The half of the sets the cube is on after move i (mode all). */
    const target = (i: number): readonly ReplicaSet[] => halves[i % 2]!;
    const layoutOf = (i: number): Record<string, number[]> => (i % 2 === 1 ? layouts.B : layouts.A);
    const specOf = (i: number) =>
      mode === 'all'
        ? { replicaSets: [...target(i)] }
        : { replicaSets: [...replicaSets], pins: layoutOf(i) };
    const sameAssignment = (c: CubeAssignment, expected: Record<string, number[]>): boolean => {
      const actual = Object.entries(c.status?.assignment ?? {}).filter(([, ps]) => ps.length > 0);
      return (
        JSON.stringify(Object.fromEntries(actual.sort(([a], [b]) => (a < b ? -1 : 1)))) ===
        JSON.stringify(expected)
      );
    };
    /** Every partition assigned, each to a set of the half (the strategy spreads them). */
    const allOn = (c: CubeAssignment, sets: readonly ReplicaSet[]): boolean => {
      const assigned = Object.entries(c.status?.assignment ?? {}).filter(([, ps]) => ps.length > 0);
      return (
        assigned.every(([rs]) => sets.includes(rs)) &&
        assigned.reduce((n, [, ps]) => n + ps.length, 0) === partitions
      );
    };
    const settledAfter = (i: number) => (c: CubeAssignment) =>
      mode === 'all' ? allOn(c, target(i)) : sameAssignment(c, layoutOf(i));

    await api.create(namespace, cube, {
      source: { brokers: [env.kafka.bootstrap], topic, startingOffsets: 'latest' },
      schema: testSchema,
      strategy: 'sticky',
      ...specOf(0),
    });
    cubeNamespace = namespace;
    await waitForSettled(kc, namespace, cube, settledAfter(0));
    say('initial assignment settled');
    sampler = new PositionSampler(receivers, pollMs, pollView);
    sampler.start();
    await sleep(settleMs);
    // A new topic's first seconds of load are not the protocol's: the broker's first appends to
    // hundreds of new partitions stood the producer still for 3-7 s (2026-12-05, 512 partitions),
    // and a target has nothing to consume past its stop meanwhile.
    const warmStart = Date.now();
    await sleep(warmupMs);
    while (
      load.longestPause(Date.now() - 3_000, Date.now()) > 500 &&
      Date.now() - warmStart < warmupMs + 60_000
    )
      await sleep(250);
    say(
      `warm-up: ${seconds(Date.now() - warmStart)} of load before the first move; the producer's longest pause in it ${seconds(load.longestPause(warmStart, Date.now()))}`,
    );

    let results: MoveResult[] = [];
    for (let i = 1; i <= warmupMoves + moves; i++) {
      const before = await api.get(namespace, cube);
      const epochsBefore = before.status?.epochs ?? {};
      const { started, observations, doneAt, doneCube, doneSeenBy } = await watchMove(
        kc,
        namespace,
        (c) => !c.status?.reassign && settledAfter(i)(c),
        60_000,
        cubePollMs,
        () => api.patchSpec(namespace, cube, specOf(i)),
      );
      const journals = observations.map((o) => o.cube.status?.reassign).filter((j) => j);
      const journal = journals.find((j) => j?.stopOffsets) ?? journals[0];
      if (!journal) throw new Error(`move ${i}: no reassign journal was observed`);
      const stops = journals.find((j) => j?.stopOffsets)?.stopOffsets ?? {};
      // Every hand-off is measured: the samples are read once every target replica has consumed
      // past its stop (or after a minute, when what is missing is counted and said).
      const measure = () => {
        /** By the receivers' clocks (consumedAt, firstConsumedAt). */
        const gapsMs: number[] = [];
        /** By the polls' arrival: late by up to a poll and its round trip at each end. */
        const polledGapsMs: number[] = [];
        /** Since the spec change: when each source stopped, when each target went on. */
        const lastsMs: number[] = [];
        const firstsMs: number[] = [];
        const missing = new Map<string, number>();
        const miss = (why: string) => missing.set(why, (missing.get(why) ?? 0) + 1);
        for (const m of journal.moves) {
          const stop = stops[String(m.partition)];
          if (!m.from || stop === undefined) {
            miss(m.from ? 'no stop offset observed' : 'no source');
            continue;
          }
          const last = sampler!.lastConsumedAt(m.from, m.partition, BigInt(stop));
          const first = sampler!.firstConsumedAt(m.to, m.partition, BigInt(stop), started);
          if (last === undefined) miss('source never polled at its stop');
          else if (first === undefined) miss('target not past its stop');
          else {
            gapsMs.push(first - last);
            lastsMs.push(last - started);
            firstsMs.push(first - started);
            const polledLast = sampler!.lastConsumed(m.from, m.partition, BigInt(stop));
            const polledFirst = sampler!.firstConsumed(m.to, m.partition, BigInt(stop), started);
            if (polledLast !== undefined && polledFirst !== undefined)
              polledGapsMs.push(polledFirst - polledLast);
          }
        }
        return { gapsMs, polledGapsMs, lastsMs, firstsMs, missing };
      };
      await sleep(Math.max(settleMs, 500));
      let measured = measure();
      for (const until = Date.now() + 60_000; measured.missing.size > 0 && Date.now() < until;) {
        await sleep(200);
        measured = measure();
      }
      const { gapsMs, polledGapsMs, lastsMs, firstsMs, missing } = measured;
      const unmeasured = [...missing.values()].reduce((a, n) => a + n, 0);
      for (const [why, n] of missing) say(`move ${i}: ${n} hand-offs not measured: ${why}`);
      // Partitions that did not move should not notice the move at all.
      const movedSet = new Set(journal.moves.map((m) => m.partition));
      const stallsMs: number[] = [];
      for (const [rs, ps] of mode === 'half' ? Object.entries(layoutOf(i)) : []) {
        for (const p of ps) {
          if (movedSet.has(p)) continue;
          const stall = sampler.longestStall(rs, p, started, doneAt + 500);
          if (stall !== undefined) stallsMs.push(stall);
        }
      }
      const times = phaseTimes(operator.logFile, journal.id);
      const phases = new Map<string, number>();
      const journaled = firstPhaseAt(times);
      if (journaled !== undefined) phases.set('react', journaled - started);
      for (const [phase, ms] of phaseSpans(operator.logFile, journal.id)) phases.set(phase, ms);
      const pausing = times.get('Pausing');
      const sealing = times.get('Sealing');
      // The version that ended the move (its write bumped the epochs): a poll that was under way
      // then may still add an older version after it.
      const epochsAfter = doneCube.status?.epochs ?? {};
      const bumped = journal.moves.every(
        (m) =>
          (epochsAfter[String(m.partition)] ?? 0) === (epochsBefore[String(m.partition)] ?? 0) + 1,
      );
      if (!bumped) throw new Error(`move ${i}: epochs of the moved partitions were not bumped`);
      const result: MoveResult = {
        label:
          mode === 'all'
            ? `${target(i - 1).join(',')}→${target(i).join(',')}`
            : `swap ${2 * quarter}`,
        moved: journal.moves.length,
        doneMs: doneAt - started,
        gapsMs,
        polledGapsMs,
        stallsMs,
        producerPauseMs: load.longestPause(started, doneAt + 1000),
        window: [started, doneAt + 1000],
        unmeasured,
        phases,
        logGapMs: pausing !== undefined && sealing !== undefined ? sealing - pausing : undefined,
      };
      results.push(result);
      say(
        `move ${String(i).padStart(2)}: ${result.label.padEnd(11)} ${result.moved} partitions, ` +
          `done in ${seconds(result.doneMs)}; gap p50 ${seconds(percentile(gapsMs, 0.5))} ` +
          `max ${seconds(Math.max(...gapsMs))}${unmeasured ? ` (${unmeasured} unmeasured)` : ''}` +
          `${stallsMs.length > 0 ? `; staying partitions stood still up to ${seconds(Math.max(...stallsMs))}` : ''}; ` +
          [...phases].map(([k, v]) => `${k} ${v} ms`).join(', '),
      );
      say(
        `         producer: longest pause between two batches ${seconds(result.producerPauseMs)} (a tick is ${tickMs} ms); Done seen by the ${doneSeenBy}`,
      );
      if (gapsMs.length > 0) {
        const range = (xs: number[]) => `${seconds(Math.min(...xs))}–${seconds(Math.max(...xs))}`;
        say(
          `         since the spec change: sources at their stops ${range(lastsMs)}, ` +
            `targets past them ${range(firstsMs)} (median ${seconds(percentile(firstsMs, 0.5))})`,
        );
      }
      await waitForSettled(kc, namespace, cube, settledAfter(i));
      await sleep(settleMs);
    }

    await load.stop();
    const pauseOutside = load.longestPauseOutside(results.map((r) => r.window));
    load = undefined;
    const ends = await highWatermarks(kafka, topic);
    const owner = mode === 'all' ? target(warmupMoves + moves) : undefined;
    await waitFor(
      'the final owners to reach the high watermarks',
      async () => {
        for (const r of (owner ?? replicaSets).flatMap((rs) => receivers.get(rs)!)) {
          const status = await r.client.cubeSummary(cube).catch((error: unknown) => {
            if (error instanceof ReceiverApiError && error.status === 404) return undefined;
            throw error;
          });
          if (!status) continue;
          for (const p of status.partitions) {
            if (p.state === 'released') continue;
            if (BigInt(p.position) < (ends.get(p.partition) ?? 0n)) return false;
          }
        }
        return true;
      },
      60_000,
      200,
    );
    await sampler.stop();

    say('');
    if (warmupMoves > 0) {
      const done = results.map((r) => r.doneMs);
      const gaps = results.flatMap((r) => r.gapsMs);
      const p = (xs: number[], q: number) => seconds(percentile(xs, q));
      say(
        `all ${results.length} moves, the ${warmupMoves} warm-up moves included: spec change → Done p50 ${p(done, 0.5)} p99 ${p(done, 0.99)}; ` +
          `gap p50 ${p(gaps, 0.5)} p99 ${p(gaps, 0.99)}`,
      );
      say(`the figures below leave out the first ${warmupMoves} (--warmup-moves):`);
      results = results.slice(warmupMoves);
    }
    const done = results.map((r) => r.doneMs);
    const gaps = results.flatMap((r) => r.gapsMs);
    const logGaps = results.flatMap((r) => (r.logGapMs === undefined ? [] : [r.logGapMs]));
    const unmeasured = results.reduce((a, r) => a + r.unmeasured, 0);
    say(
      `${results.length} moves (${mode}), ${gaps.length} partition hand-offs measured` +
        `${unmeasured ? `, ${unmeasured} not measurable` : ''}; every final owner caught up with the topic`,
    );
    const goals = goalsFor(partitions);
    say(`goals (${goals.of}):`);
    say(
      `spec change → Done:            p50 ${seconds(percentile(done, 0.5))}  p99 ${seconds(percentile(done, 0.99))}  ` +
        `goal p99 < ${seconds(goals.doneP99Ms)}: ${percentile(done, 0.99) < goals.doneP99Ms ? 'met' : 'MISSED'}`,
    );
    say(
      `hand-off gap (receiver clocks): p50 ${seconds(percentile(gaps, 0.5))}  p99 ${seconds(percentile(gaps, 0.99))}  ` +
        `goal p99 < ${seconds(goals.gapP99Ms)}: ${percentile(gaps, 0.99) < goals.gapP99Ms ? 'met' : 'MISSED'}`,
    );
    const polledGaps = results.flatMap((r) => r.polledGapsMs);
    say(
      `hand-off gap (by the polls):    p50 ${seconds(percentile(polledGaps, 0.5))}  p99 ${seconds(percentile(polledGaps, 0.99))}  ` +
        `(each end late by up to a poll, ${pollMs} ms, and its round trip)`,
    );
    const stalls = results.flatMap((r) => r.stallsMs);
    if (stalls.length > 0) {
      say(
        `stand-still of partitions that stayed: p50 ${seconds(percentile(stalls, 0.5))}  p99 ${seconds(percentile(stalls, 0.99))} ` +
          `(steady state: about one tick + one poll, ${tickMs + pollMs} ms)`,
      );
    }
    say(
      `Pausing → Starting persisted (log): p50 ${seconds(percentile(logGaps, 0.5))}  p99 ${seconds(percentile(logGaps, 0.99))}`,
    );
    say('where the time goes (operator log, ms, p50 / max over the moves):');
    for (const phase of ['react', ...phaseOrder]) {
      const spent = results.flatMap((r) => (r.phases.has(phase) ? [r.phases.get(phase)!] : []));
      if (spent.length === 0) continue;
      say(
        `  ${phase.padEnd(9)} ${String(Math.round(percentile(spent, 0.5))).padStart(6)} / ${String(Math.max(...spent)).padStart(6)}  ${phaseContents[phase] ?? ''}`,
      );
    }
    const pauses = results.map((r) => r.producerPauseMs);
    say(
      `load: longest producer pause during a move p50 ${seconds(percentile(pauses, 0.5))}, max ${seconds(Math.max(...pauses))}; ` +
        `between the moves ${seconds(pauseOutside)} (a target has nothing to consume past its stop until the next batch)`,
    );
    const trips = sampler.roundTrips;
    say(
      `receiver status polls (view ${pollView}): ${trips.length}, round trip p50 ${percentile(trips, 0.5)} ms, ` +
        `p99 ${percentile(trips, 0.99)} ms, max ${Math.max(...trips)} ms (every ${pollMs} ms at most)`,
    );
    if (sampler.errors > 0) say(`(${sampler.errors} receiver status polls failed)`);
    say('receiver time over the run (all receivers, total s / calls / mean ms):');
    const totals = [
      ...receiverTotals(
        await Promise.all(
          everyReceiver().map((r) => fetch(`${r.baseUrl}/metrics`).then((res) => res.text())),
        ),
      ),
    ].sort(([, a], [, b]) => b.seconds - a.seconds);
    for (const [key, { seconds: s, count }] of totals) {
      if (count === 0) continue;
      say(
        `  ${key.padEnd(48)} ${s.toFixed(2).padStart(8)} ${String(count).padStart(7)} ${((1000 * s) / count).toFixed(1).padStart(8)}`,
      );
    }
    ok = true;
  } finally {
    await load?.stop().catch(() => undefined);
    await sampler?.stop().catch(() => undefined);
    if (!ok || values['keep-logs']) {
      if (operator) say(`operator log: ${operator.logFile}`);
      if (sampler) {
        // Per receiver and poll: how many partitions it held and the sum of their positions (its
        // progress: events consumed between two lines).
        const file = join(dirname(operator?.logFile ?? deep), 'positions.jsonl');
        writeFileSync(
          file,
          [...sampler.samples]
            .flatMap(([receiver, samples]) =>
              samples.map(
                (s) =>
                  `${JSON.stringify({
                    receiver,
                    at: new Date(s.at).toISOString(),
                    partitions: s.partitions.size,
                    consumed: String(
                      [...s.partitions.values()].reduce((a, p) => a + p.position, 0n),
                    ),
                  })}\n`,
              ),
            )
            .join(''),
        );
        say(`receiver positions polled: ${file}`);
      }
      for (const r of everyReceiver()) say(`${r.options.id} log: ${r.logFile}`);
    }
    if (cubeNamespace && operator) {
      // The operator's finalizer unassigns the cube from the receivers; the namespace stays (no
      // namespace controller runs in this environment), as the integration tests' do.
      const ns = cubeNamespace;
      await cubeApi(kc)
        .delete(ns, cube)
        .then(() =>
          waitFor(
            'the cube to be finalized',
            () =>
              cubeApi(kc)
                .get(ns, cube)
                .then(() => false)
                .catch(() => true),
            30_000,
            200,
          ),
        )
        .catch(() => say(`the cube in ${ns} was not finalized; left as it is`));
    }
    await operator?.kill('SIGTERM');
    await Promise.all(everyReceiver().map((r) => r.stop()));
    if (topic) await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
    await admin.disconnect();
    rmSync(deep, { recursive: true, force: true });
    // A failed run keeps the logs and data directories named above for a look.
    if (ok && !values['keep-logs']) {
      for (const dir of [
        ...(operator ? [dirname(operator.logFile)] : []),
        ...everyReceiver().map((r) => dirname(r.dataDir)),
      ])
        rmSync(dir, { recursive: true, force: true });
    }
    await stopEnv();
  }
}

if (isMainThread) {
  main().catch((error: unknown) => {
    process.stderr.write(`bench failed: ${(error as Error).stack ?? String(error)}\n`);
    process.exitCode = 1;
  });
} else {
  await produceInWorker(workerData as LoadSettings);
}
