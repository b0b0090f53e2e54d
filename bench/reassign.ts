// Reassign latency (issue 4): a 32-partition cube under steady load moved back and forth between
// two replica sets by the real operator; per move the time from the spec change to Done, and per
// moved partition the hand-off gap measured from what the receivers report.
//
// Hand-off gap of partition p in one move, source S, target T, stop offset stop[p] (the journal's):
//   t_last_old  = the first poll of S at which its position of p equals stop[p], i.e. when S had
//                 consumed the last event it will consume (its position then stays put);
//   t_first_new = the first poll of T, after the spec change, at which its position of p is past
//                 stop[p], i.e. when T had consumed its first event;
//   gap         = t_first_new − t_last_old.
// Both sides are polled the same way (every --poll-ms), so each end is late by at most one poll;
// under steady load T's first event also waits for the next produced batch (one --tick-ms at most).
// The operator's phase timestamps (JSON log lines) tell where the time goes.
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { dirname } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { type KubeConfig, Watch } from '@kubernetes/client-node';
import { type Admin, type Producer, logLevel } from 'kafkajs';
import { group, plural, version, type CubeAssignment } from '../src/api/cube-assignment.ts';
import { createKafka } from '../src/kafka/client.ts';
import type { CubeStatus } from '../src/protocol/admin-api.ts';
import { ReceiverApiError } from '../src/protocol/client.ts';
import { adminKubeConfig } from '../test/env/connection.ts';
import { freePort } from '../src/local/processes.ts';
import { benchEnvironment, benchFlags, positive, say } from './environment.ts';
import { phaseOrder, phaseSpans, phaseTimes } from './operator-log.ts';
import {
  OperatorProcess,
  applyCrd,
  createNamespace,
  cubeApi,
  receiverPod,
  waitForSettled,
} from '../test/support/cluster.ts';
import { createTopic, highWatermarks, makeEvents, testSchema } from '../test/support/events.ts';
import { ReceiverProcess, tempDir } from '../test/support/receiver-process.ts';
import { waitFor } from '../test/support/wait.ts';

const usage = `Usage: npm run bench:reassign -- [options]

  --moves N        moves to time                                   [BENCH_MOVES, default 10]
  --mode M         all: every partition rs-a → rs-b and back (spec.replicaSets);
                   half: 16 of the 32 partitions swap sides (spec.pins)      [default all]
  --partitions N   partitions of the topic                          [default 32]
  --rate N         events/s produced, spread over the partitions    [default 3200]
  --tick-ms N      the producer sends one batch to every partition this often [default 50]
  --poll-ms N      how often the receivers' positions are read      [default 50]
  --settle-ms N    steady consumption between two moves             [default 1000]
`;

const cube = 'bench';
const replicaSets = ['rs-a', 'rs-b'] as const;
type ReplicaSet = (typeof replicaSets)[number];
const hosts: Record<ReplicaSet, string> = { 'rs-a': '127.0.0.41', 'rs-b': '127.0.0.42' };
const goals = { doneP99Ms: 5_000, gapP99Ms: 1_000 };

const seconds = (ms: number): string => `${(ms / 1000).toFixed(2)} s`;

function percentile(values: number[], q: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  // Nearest rank: with 10 values p99 is the largest, never an interpolation below it.
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;
}

// ---- steady load ----------------------------------------------------------------------------

/** Every tick one batch to every partition; event time = produce time, so data shows it too. */
class TimedLoad {
  private running = false;
  private loop: Promise<void> | undefined;
  produced = 0;
  private readonly producer: Producer;
  private readonly topic: string;
  private readonly partitions: number;
  private readonly perTick: number;
  private readonly tickMs: number;

  constructor(
    producer: Producer,
    topic: string,
    partitions: number,
    perTick: number,
    tickMs: number,
  ) {
    this.producer = producer;
    this.topic = topic;
    this.partitions = partitions;
    this.perTick = perTick;
    this.tickMs = tickMs;
  }

  start(): void {
    this.running = true;
    this.loop = (async () => {
      for (let round = 0; this.running; round++) {
        const began = Date.now();
        const messages: { partition: number; value: string }[] = [];
        for (let p = 0; p < this.partitions; p++) {
          for (const e of makeEvents(p, this.perTick, began, 1, round)) {
            messages.push({ partition: p, value: JSON.stringify(e) });
          }
        }
        await this.producer.send({ topic: this.topic, acks: -1, messages });
        this.produced += messages.length;
        await sleep(Math.max(0, this.tickMs - (Date.now() - began)));
      }
    })();
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
  }
}

// ---- what the receivers report, polled ------------------------------------------------------

interface Sample {
  at: number;
  /** partition → position and state; empty when the receiver does not hold the cube. */
  partitions: Map<number, { position: bigint; state: string }>;
}

class PositionSampler {
  readonly samples = new Map<ReplicaSet, Sample[]>(replicaSets.map((rs) => [rs, []]));
  private running = false;
  private loop: Promise<void> | undefined;
  errors = 0;
  private readonly receivers: Record<ReplicaSet, ReceiverProcess>;
  private readonly pollMs: number;

  constructor(receivers: Record<ReplicaSet, ReceiverProcess>, pollMs: number) {
    this.receivers = receivers;
    this.pollMs = pollMs;
  }

  private async sample(rs: ReplicaSet): Promise<void> {
    let status: CubeStatus | undefined;
    try {
      status = await this.receivers[rs].client.cubeStatus(cube);
    } catch (error) {
      if (!(error instanceof ReceiverApiError && error.status === 404)) {
        this.errors += 1;
        return;
      }
    }
    const partitions = new Map(
      (status?.partitions ?? []).map((p) => [
        p.partition,
        { position: BigInt(p.position), state: p.state },
      ]),
    );
    this.samples.get(rs)!.push({ at: Date.now(), partitions });
  }

  start(): void {
    this.running = true;
    this.loop = (async () => {
      while (this.running) {
        const began = Date.now();
        await Promise.all(replicaSets.map((rs) => this.sample(rs)));
        await sleep(Math.max(0, this.pollMs - (Date.now() - began)));
      }
    })();
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
  }

  /** When `source` reached `stop` for the last time before `until` (see the file's comment). */
  lastConsumed(source: ReplicaSet, p: number, stop: bigint, until: number): number | undefined {
    let found: number | undefined;
    let before: bigint | undefined;
    for (const s of this.samples.get(source)!) {
      if (s.at > until) break;
      const position = s.partitions.get(p)?.position;
      if (position === undefined) continue;
      if (position === stop && (before === undefined || before < stop)) found = s.at;
      before = position;
    }
    return found;
  }

  /** The longest time p stood still on `owner` within [from, to]: stalls of partitions that stay. */
  longestStall(owner: ReplicaSet, p: number, from: number, to: number): number | undefined {
    let lastAdvance: number | undefined;
    let before: bigint | undefined;
    let longest = 0;
    for (const s of this.samples.get(owner)!) {
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
    return lastAdvance === undefined ? undefined : Math.max(longest, to - lastAdvance);
  }

  /** The first poll of `target` after `from` that shows p consumed past `stop`. */
  firstConsumed(target: ReplicaSet, p: number, stop: bigint, from: number): number | undefined {
    for (const s of this.samples.get(target)!) {
      if (s.at < from) continue;
      const row = s.partitions.get(p);
      if (row && row.state !== 'released' && row.position > stop) return s.at;
    }
    return undefined;
  }
}

// ---- the cube, watched ----------------------------------------------------------------------

interface Observation {
  at: number;
  cube: CubeAssignment;
}

/**
 * Every version of the cube while a move runs: a watch (it sees each persisted phase, so the stop
 * offsets of even a fast Draining) and a poll every 50 ms beside it in case the watch drops.
 */
async function watchMove(
  kc: KubeConfig,
  namespace: string,
  isDone: (c: CubeAssignment) => boolean,
  timeoutMs: number,
  patch: () => Promise<unknown>,
): Promise<{ started: number; observations: Observation[]; doneAt: number }> {
  const observations: Observation[] = [];
  let doneAt: number | undefined;
  const { promise: done, resolve } = Promise.withResolvers<void>();
  const observe = (c: CubeAssignment): void => {
    observations.push({ at: Date.now(), cube: c });
    if (doneAt === undefined && isDone(c)) {
      doneAt = Date.now();
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
      if (type === 'MODIFIED' || type === 'ADDED') observe(object);
    },
    () => undefined,
  );
  let polling = true;
  const started = Date.now();
  await patch();
  const poll = (async () => {
    while (polling) {
      await sleep(50);
      const c = await api.get(namespace, cube).catch(() => undefined);
      if (c) observe(c);
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
  if (doneAt === undefined) throw new Error(`move not done after ${timeoutMs} ms`);
  return { started, observations, doneAt };
}

// ---- the operator's log ---------------------------------------------------------------------

/** What each span of the operator's log holds (src/operator/reassign/, cube/journal-runner.ts). */
const phaseContents: Record<string, string> = {
  react: 'spec change → informer → plan → journal written (Planned)',
  Planned: 'one status write (→ Pausing)',
  Pausing: 'pause on every source receiver + status write with stop offsets',
  Draining: 'drain to the stop offsets on every source receiver + status write',
  Starting: 'release on the sources, assign on the targets (consumer restart) + status write',
  Sealing: 'seal + hand-off + unassign on emptied sources + status write (assignment, epochs)',
  Done: 'journal cleared + Event',
};

// ---- the run --------------------------------------------------------------------------------

interface MoveResult {
  label: string;
  moved: number;
  doneMs: number;
  gapsMs: number[];
  /** Longest stand-still of each partition that stayed, from the spec change to Done + 0.5 s. */
  stallsMs: number[];
  unmeasured: number;
  /** Phase → ms, from the operator's log; 'react' is spec change → Planned. */
  phases: Map<string, number>;
  /** Pausing logged → Sealing logged (the targets have started): the log's view of the gap. */
  logGapMs: number | undefined;
}

async function main(): Promise<void> {
  const values = benchFlags(usage, {
    moves: undefined,
    mode: 'all',
    partitions: '32',
    rate: '3200',
    'tick-ms': '50',
    'poll-ms': '50',
    'settle-ms': '1000',
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
  const settleMs = positive('settle-ms', values['settle-ms']);
  const perTick = Math.max(1, Math.round((rate * tickMs) / 1000 / partitions));

  const { env, stop: stopEnv } = await benchEnvironment();
  const kc = adminKubeConfig();
  const kafka = createKafka({
    clientId: 'bench-reassign',
    brokers: [env.kafka.bootstrap],
    // The producer's first sends may meet a leader not yet known (retried; not worth a line).
    logLevel: logLevel.NOTHING,
  });
  const admin: Admin = kafka.admin();
  const producer = kafka.producer({ allowAutoTopicCreation: false });
  const deep = tempDir('bench-reassign-deep');
  const token = randomBytes(24).toString('hex');
  const receivers = {} as Record<ReplicaSet, ReceiverProcess>;
  let operator: OperatorProcess | undefined;
  let load: TimedLoad | undefined;
  let sampler: PositionSampler | undefined;
  let topic: string | undefined;
  /** Where the cube lives, for the clean-up. */
  let cubeNamespace: string | undefined;
  let ok = false;
  try {
    await Promise.all([admin.connect(), producer.connect(), applyCrd()]);
    const namespace = await createNamespace(kc, 'bench-reassign');
    const port = await freePort();
    for (const rs of replicaSets) {
      receivers[rs] = new ReceiverProcess({
        id: `${rs}-0`,
        replicaSet: rs,
        deepStorageDir: deep,
        host: hosts[rs],
        port,
        token,
        namespace,
        // The receiver's own defaults, as a pod runs it.
        flushInterval: '1s',
        idleTimeout: '30s',
      });
    }
    await Promise.all(replicaSets.map((rs) => receivers[rs].start()));
    for (const rs of replicaSets) await receiverPod(kc, namespace, `${rs}-0`, rs, hosts[rs]);
    operator = new OperatorProcess({ namespace, receiverToken: token, receiverPort: port });
    await operator.start();

    topic = await createTopic(admin, partitions);
    load = new TimedLoad(producer, topic, partitions, perTick, tickMs);
    load.start();
    say(
      `namespace ${namespace}, topic ${topic}: ${partitions} partitions, ${perTick * partitions * Math.round(1000 / tickMs)} events/s ` +
        `(${perTick} per partition every ${tickMs} ms); ${moves} moves, mode ${mode}`,
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
    const target = (i: number): ReplicaSet => (i % 2 === 1 ? 'rs-b' : 'rs-a');
    const layoutOf = (i: number): Record<string, number[]> =>
      mode === 'all' ? { [target(i)]: all } : i % 2 === 1 ? layouts.B : layouts.A;
    const specOf = (i: number) =>
      mode === 'all'
        ? { replicaSets: [target(i)] }
        : { replicaSets: [...replicaSets], pins: layoutOf(i) };
    const sameAssignment = (c: CubeAssignment, expected: Record<string, number[]>): boolean => {
      const actual = Object.entries(c.status?.assignment ?? {}).filter(([, ps]) => ps.length > 0);
      return (
        JSON.stringify(Object.fromEntries(actual.sort(([a], [b]) => (a < b ? -1 : 1)))) ===
        JSON.stringify(expected)
      );
    };

    await api.create(namespace, cube, {
      source: { brokers: [env.kafka.bootstrap], topic, startingOffsets: 'latest' },
      schema: testSchema,
      strategy: 'sticky',
      ...specOf(0),
    });
    cubeNamespace = namespace;
    await waitForSettled(kc, namespace, cube, (c) => sameAssignment(c, layoutOf(0)));
    say('initial assignment settled');
    sampler = new PositionSampler(receivers, pollMs);
    sampler.start();
    await sleep(settleMs);

    const results: MoveResult[] = [];
    for (let i = 1; i <= moves; i++) {
      const before = await api.get(namespace, cube);
      const epochsBefore = before.status?.epochs ?? {};
      const expected = layoutOf(i);
      const { started, observations, doneAt } = await watchMove(
        kc,
        namespace,
        (c) => !c.status?.reassign && sameAssignment(c, expected),
        60_000,
        () => api.patchSpec(namespace, cube, specOf(i)),
      );
      const journals = observations.map((o) => o.cube.status?.reassign).filter((j) => j);
      const journal = journals.find((j) => j?.stopOffsets) ?? journals[0];
      if (!journal) throw new Error(`move ${i}: no reassign journal was observed`);
      const stops = journals.find((j) => j?.stopOffsets)?.stopOffsets ?? {};
      // Let the targets consume past their start before reading the samples.
      await sleep(Math.max(settleMs, 500));
      const gapsMs: number[] = [];
      let unmeasured = 0;
      for (const m of journal.moves) {
        const stop = stops[String(m.partition)];
        if (!m.from || stop === undefined) {
          unmeasured += 1;
          continue;
        }
        const last = sampler.lastConsumed(m.from as ReplicaSet, m.partition, BigInt(stop), doneAt);
        const first = sampler.firstConsumed(m.to as ReplicaSet, m.partition, BigInt(stop), started);
        if (last === undefined || first === undefined) unmeasured += 1;
        else gapsMs.push(first - last);
      }
      // Partitions that did not move should not notice the move at all.
      const movedSet = new Set(journal.moves.map((m) => m.partition));
      const stallsMs: number[] = [];
      for (const [rs, ps] of Object.entries(expected)) {
        for (const p of ps) {
          if (movedSet.has(p)) continue;
          const stall = sampler.longestStall(rs as ReplicaSet, p, started, doneAt + 500);
          if (stall !== undefined) stallsMs.push(stall);
        }
      }
      const times = phaseTimes(operator.logFile, journal.id);
      const phases = new Map<string, number>();
      const planned = times.get('Planned');
      if (planned !== undefined) phases.set('react', planned - started);
      for (const [phase, ms] of phaseSpans(operator.logFile, journal.id)) phases.set(phase, ms);
      const pausing = times.get('Pausing');
      const sealing = times.get('Sealing');
      const epochsAfter = observations.at(-1)?.cube.status?.epochs ?? {};
      const bumped = journal.moves.every(
        (m) =>
          (epochsAfter[String(m.partition)] ?? 0) === (epochsBefore[String(m.partition)] ?? 0) + 1,
      );
      if (!bumped) throw new Error(`move ${i}: epochs of the moved partitions were not bumped`);
      const result: MoveResult = {
        label: mode === 'all' ? `${target(i - 1)}→${target(i)}` : `swap ${2 * quarter}`,
        moved: journal.moves.length,
        doneMs: doneAt - started,
        gapsMs,
        stallsMs,
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
      await waitForSettled(kc, namespace, cube, (c) => sameAssignment(c, expected));
      await sleep(settleMs);
    }

    await load.stop();
    load = undefined;
    const ends = await highWatermarks(kafka, topic);
    const owner = mode === 'all' ? target(moves) : undefined;
    await waitFor(
      'the final owners to reach the high watermarks',
      async () => {
        for (const rs of owner ? [owner] : replicaSets) {
          const status = await receivers[rs].client.cubeStatus(cube);
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

    const done = results.map((r) => r.doneMs);
    const gaps = results.flatMap((r) => r.gapsMs);
    const logGaps = results.flatMap((r) => (r.logGapMs === undefined ? [] : [r.logGapMs]));
    const unmeasured = results.reduce((a, r) => a + r.unmeasured, 0);
    say('');
    say(
      `${results.length} moves (${mode}), ${gaps.length} partition hand-offs measured` +
        `${unmeasured ? `, ${unmeasured} not measurable` : ''}; every final owner caught up with the topic`,
    );
    say(
      `spec change → Done:            p50 ${seconds(percentile(done, 0.5))}  p99 ${seconds(percentile(done, 0.99))}  ` +
        `goal p99 < ${seconds(goals.doneP99Ms)}: ${percentile(done, 0.99) < goals.doneP99Ms ? 'met' : 'MISSED'}`,
    );
    say(
      `hand-off gap (receiver data):  p50 ${seconds(percentile(gaps, 0.5))}  p99 ${seconds(percentile(gaps, 0.99))}  ` +
        `goal p99 < ${seconds(goals.gapP99Ms)}: ${percentile(gaps, 0.99) < goals.gapP99Ms ? 'met' : 'MISSED'}`,
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
    if (sampler.errors > 0) say(`(${sampler.errors} receiver status polls failed)`);
    ok = true;
  } finally {
    await load?.stop().catch(() => undefined);
    await sampler?.stop().catch(() => undefined);
    if (!ok) {
      if (operator) say(`operator log: ${operator.logFile}`);
      for (const rs of replicaSets) if (receivers[rs]) say(`${rs} log: ${receivers[rs].logFile}`);
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
    await Promise.all(replicaSets.map((rs) => receivers[rs]?.stop()));
    if (topic) await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
    await Promise.all([admin.disconnect(), producer.disconnect()]);
    rmSync(deep, { recursive: true, force: true });
    // A failed run keeps the logs and data directories named above for a look.
    if (ok) {
      for (const dir of [
        ...(operator ? [dirname(operator.logFile)] : []),
        ...replicaSets.flatMap((rs) => (receivers[rs] ? [dirname(receivers[rs].dataDir)] : [])),
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
