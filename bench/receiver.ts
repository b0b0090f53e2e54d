// Receiver throughput (issue 3): events/s of a real `streamcube receiver` aggregating a topic,
// against a bare kafkajs consumer draining the same topic in the same run, and peak RSS of each.
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { type Kafka, type Producer, logLevel } from 'kafkajs';
import { createKafka } from '../src/kafka/client.ts';
import { kafkajsCompression } from '../src/kafka/codecs.ts';
import { consumerSettings, exactPartitionAssigner } from './bare-consumer.ts';
import { assignRequest, createTopic, highWatermarks, makeEvents } from '../test/support/events.ts';
import { ReceiverProcess } from '../test/support/receiver-process.ts';
import {
  type Compression,
  compressions,
  startJavaProducer,
} from '../test/support/java-producer.ts';
import { logBatches } from '../test/support/log-batches.ts';
import { benchBroker } from './kafka-broker.ts';
import { median } from './environment.ts';
import { tempDir } from '../test/support/scratch-dirs.ts';

const usage = `Usage: npm run bench:receiver -- [options]

  --events N        events to produce, spread over the partitions  [BENCH_EVENTS, default 1000000]
  --partitions N    partitions of the topic                         [default 8]
  --rounds N        rounds of (bare consumer, receiver)             [default 2]
  --step-ms N       event-time step between events of a partition   [default 50]
  --compression C   none | gzip | snappy | lz4 | zstd                [default none]
  --producer P      kafkajs: 10,000 events a request, one batch each;
                    java: Kafka's own producer (kafka-clients defaults,
                    batch.size 16 KiB), as production topics hold    [default kafkajs]
  --cpu-prof        write V8 CPU profiles of each receiver and, under bare/, of each bare
                    consumer (node --cpu-prof)
`;

/** What one consumption run measured. */
interface RunResult {
  events: number;
  /** From the first records seen to the last: the consuming rate, without group join. */
  steadyMs: number;
  /** Events counted in the steady part (all but those already in at the first observation). */
  steadyEvents: number;
  /** From the request to consume to the last record, group join included. */
  wallMs: number;
  peakRssBytes: number;
}

const rate = (r: RunResult): number => r.steadyEvents / (r.steadyMs / 1000);
const mib = (bytes: number): string => (bytes / 2 ** 20).toFixed(0);
const say = (text: string): void => {
  process.stdout.write(`${text}\n`);
};

// ---- the bare consumer, run as a child process of this script --------------------------------

/**
 * Drains the topic from offset 0 with a plain kafkajs consumer (a group of its own, exactly the
 * partitions asked for), counting messages and doing nothing else.
 */
async function bareConsumer(
  brokers: string,
  topic: string,
  partitions: number,
  expected: number,
): Promise<void> {
  const kafka = createKafka({ clientId: 'bench-bare', brokers: [brokers] });
  const ids = [...Array(partitions).keys()];
  const started = performance.now();
  const groupId = `bench-bare.${randomUUID()}`;
  const consumer = kafka.consumer({
    groupId,
    partitionAssigners: [exactPartitionAssigner(topic, () => ids)],
    ...consumerSettings,
    retry: { retries: 10 },
  });
  let count = 0;
  let first: { at: number; count: number } | undefined;
  let lastReport = performance.now();
  const { promise: done, resolve } = Promise.withResolvers<number>();
  await consumer.connect();
  await consumer.subscribe({ topics: [topic], fromBeginning: true });
  await consumer.run({
    autoCommit: false,
    eachBatchAutoResolve: false,
    partitionsConsumedConcurrently: Math.min(4, partitions),
    eachBatch: async (payload) => {
      const { batch } = payload;
      if (!payload.isRunning() || payload.isStale()) return;
      count += batch.messages.length;
      const now = performance.now();
      first ??= { at: now, count };
      const last = batch.messages[batch.messages.length - 1];
      if (last) payload.resolveOffset(last.offset);
      await payload.heartbeat();
      if (now - lastReport > 2000) {
        lastReport = now;
        process.stderr.write(`  bare: ${count}/${expected}\n`);
      }
      if (count >= expected) resolve(now);
    },
  });
  // As the receiver starts: a seek to each start position once the consumer runs.
  for (const partition of ids) consumer.seek({ topic, partition, offset: '0' });
  const end = await done;
  const result: RunResult = {
    events: count,
    steadyMs: end - (first?.at ?? started),
    steadyEvents: count - (first?.count ?? 0),
    wallMs: end - started,
    peakRssBytes: process.resourceUsage().maxRSS * 1024,
  };
  await consumer.disconnect();
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

async function runBare(
  brokers: string,
  topic: string,
  partitions: number,
  expected: number,
  profileDir: string | undefined,
): Promise<RunResult> {
  const child = spawn(
    process.execPath,
    [
      ...(profileDir ? ['--cpu-prof', `--cpu-prof-dir=${join(profileDir, 'bare')}`] : []),
      import.meta.filename,
      '--bare-child',
      `--brokers=${brokers}`,
      `--topic=${topic}`,
      `--partitions=${partitions}`,
      `--events=${expected}`,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  const code = await new Promise<number | null>((r) => child.once('exit', r));
  const line = out.trim().split('\n').pop() ?? '';
  if (code !== 0 || !line.startsWith('{')) throw new Error(`bare consumer failed (exit ${code})`);
  return JSON.parse(line) as RunResult;
}

// ---- the receiver ------------------------------------------------------------------------------

function peakRssOf(pid: number): number {
  const match = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!match) throw new Error(`no VmHWM in /proc/${pid}/status`);
  return Number(match[1]) * 1024;
}

async function runReceiver(
  brokers: string,
  topic: string,
  ends: Map<number, bigint>,
  round: number,
  profileDir: string | undefined,
): Promise<RunResult> {
  const deepStorageDir = tempDir('bench-deep');
  const receiver = new ReceiverProcess({
    id: `bench-${round}`,
    replicaSet: 'rs-bench',
    deepStorageDir,
    // The receiver's own defaults, as a pod runs it.
    flushInterval: '1s',
    idleTimeout: '30s',
    env: profileDir ? { NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${profileDir}` } : {},
  });
  const expected = [...ends.values()].reduce((a, b) => a + b, 0n);
  const cube = `bench-${round}`;
  let done = false;
  try {
    await receiver.start();
    const started = performance.now();
    await receiver.client.assign(
      cube,
      assignRequest(
        brokers,
        topic,
        'rs-bench',
        [...ends.keys()].map((partition) => ({ partition, position: '0' })),
      ),
    );
    let first: { at: number; count: bigint } | undefined;
    let lastReport = performance.now();
    let failedPolls = 0;
    for (;;) {
      let status: Awaited<ReturnType<typeof receiver.client.cubeStatus>>;
      try {
        status = await receiver.client.cubeStatus(cube);
        failedPolls = 0;
      } catch (error) {
        // A busy receiver may close a kept-alive connection as the next poll reuses it.
        const cause = (error as Error).cause;
        say(`  status poll failed: ${(error as Error).message} (${String(cause)})`);
        if (++failedPolls >= 20) throw error;
        await sleep(100);
        continue;
      }
      const now = performance.now();
      const consumed = status.partitions.reduce((a, p) => a + BigInt(p.position), 0n);
      if (consumed > 0n) first ??= { at: now, count: consumed };
      const caughtUp =
        status.partitions.length === ends.size &&
        status.partitions.every((p) => BigInt(p.position) >= (ends.get(p.partition) ?? 0n));
      if (caughtUp) {
        const rejected = Object.entries(status.rejected).filter(([, n]) => n > 0);
        if (rejected.length > 0) say(`  receiver rejected events: ${JSON.stringify(rejected)}`);
        const states = status.segments.map((s) => s.state).join(' ');
        say(`  receiver: done; segments ${states}`);
        done = true;
        return {
          events: Number(consumed),
          steadyMs: now - (first?.at ?? started),
          steadyEvents: Number(consumed - (first?.count ?? 0n)),
          wallMs: now - started,
          peakRssBytes: peakRssOf(receiver.child!.pid!),
        };
      }
      if (now - lastReport > 2000) {
        lastReport = now;
        say(`  receiver: ${consumed}/${expected}`);
      }
      if (now - started > 300_000) throw new Error(`receiver not done after 5 min`);
      await sleep(50);
    }
  } finally {
    await receiver.stop();
    // A failed run keeps its data directory and log for a look.
    if (done) rmSync(dirname(receiver.dataDir), { recursive: true, force: true });
    else say(`  receiver log: ${receiver.logFile}`);
    rmSync(deepStorageDir, { recursive: true, force: true });
  }
}

// ---- producing -------------------------------------------------------------------------------

/**
 * Produces `perPartition[p]` events to each partition in big batches: the partitions in parallel,
 * each partition's batches one after the other so that its event times stay in order.
 */

async function produceEvents(
  kafka: Kafka,
  topic: string,
  perPartition: number[],
  stepMs: number,
  compression: Compression,
): Promise<void> {
  const producer: Producer = kafka.producer({ allowAutoTopicCreation: false });
  await producer.connect();
  const total = perPartition.reduce((a, b) => a + b, 0);
  const start = Date.UTC(2026, 0, 1);
  const batch = 10_000;
  let produced = 0;
  let lastReport = performance.now();
  const began = performance.now();
  const producePartition = async (count: number, partition: number): Promise<void> => {
    for (let from = 0; from < count; from += batch) {
      const events = makeEvents(
        partition,
        Math.min(batch, count - from),
        start + from * stepMs,
        stepMs,
        from,
      );
      await producer.send({
        topic,
        acks: 1,
        compression: kafkajsCompression[compression],
        messages: events.map((e) => ({ partition, value: JSON.stringify(e) })),
      });
      produced += events.length;
      if (performance.now() - lastReport > 2000) {
        lastReport = performance.now();
        say(`  produced ${produced}/${total}`);
      }
    }
  };
  await Promise.all(perPartition.map(producePartition));
  await producer.disconnect();
  const seconds = (performance.now() - began) / 1000;
  say(`produced ${total} events in ${seconds.toFixed(1)} s (${(total / seconds).toFixed(0)}/s)`);
}

/** The same events written by Kafka's own Java producer, with its default batching. */
async function produceEventsWithJava(
  broker: { bootstrap: string; version: string },
  topic: string,
  perPartition: number[],
  stepMs: number,
  compression: Compression,
): Promise<void> {
  const producer = await startJavaProducer({
    topic,
    bootstrap: broker.bootstrap,
    kafkaVersion: broker.version,
    compression,
    settings: { acks: '1' },
  });
  const total = perPartition.reduce((a, b) => a + b, 0);
  const start = Date.UTC(2026, 0, 1);
  const chunk = 10_000;
  let produced = 0;
  let lastReport = performance.now();
  const began = performance.now();
  try {
    await Promise.all(
      perPartition.map(async (count, partition) => {
        for (let from = 0; from < count; from += chunk) {
          const n = Math.min(chunk, count - from);
          await producer.send(
            partition,
            makeEvents(partition, n, start + from * stepMs, stepMs, from),
          );
          produced += n;
          if (performance.now() - lastReport > 2000) {
            lastReport = performance.now();
            say(`  produced ${produced}/${total}`);
          }
        }
      }),
    );
    await producer.close();
  } finally {
    producer.kill();
  }
  const seconds = (performance.now() - began) / 1000;
  say(`produced ${total} events in ${seconds.toFixed(1)} s (${(total / seconds).toFixed(0)}/s)`);
}

// ---- the run ---------------------------------------------------------------------------------

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      events: { type: 'string' },
      partitions: { type: 'string', default: '8' },
      rounds: { type: 'string', default: '2' },
      'step-ms': { type: 'string', default: '50' },
      compression: { type: 'string', default: 'none' },
      producer: { type: 'string', default: 'kafkajs' },
      'cpu-prof': { type: 'boolean', default: false },
      'bare-child': { type: 'boolean', default: false },
      brokers: { type: 'string' },
      topic: { type: 'string' },
      help: { type: 'boolean', short: 'h', default: false },
    },
    strict: true,
  });
  if (values.help) {
    say(usage);
    return;
  }
  const positive = (name: string, text: string): number => {
    const n = Number(text);
    if (!Number.isSafeInteger(n) || n <= 0) throw new Error(`--${name} must be a positive integer`);
    return n;
  };
  const events = positive('events', values.events ?? process.env.BENCH_EVENTS ?? '1000000');
  const partitions = positive('partitions', values.partitions);
  if (values['bare-child']) {
    await bareConsumer(values.brokers ?? '', values.topic ?? '', partitions, events);
    return;
  }
  const compression = compressions.find((c) => c === values.compression);
  if (!compression) throw new Error(`--compression must be one of ${compressions.join(', ')}`);
  const producerKind = values.producer;
  if (producerKind !== 'kafkajs' && producerKind !== 'java') {
    throw new Error('--producer must be kafkajs or java');
  }
  const rounds = positive('rounds', values.rounds);
  const stepMs = positive('step-ms', values['step-ms']);

  const { broker, brokers, stop: stopBroker } = await benchBroker(say);
  const kafka = createKafka({
    clientId: 'bench-receiver',
    brokers: [brokers],
    logLevel: logLevel.ERROR,
  });
  const admin = kafka.admin();
  await admin.connect();
  let topic: string | undefined;
  try {
    topic = await createTopic(admin, partitions);
    const perPartition = Array.from(
      { length: partitions },
      (_, p) => Math.floor(events / partitions) + (p < events % partitions ? 1 : 0),
    );
    say(
      `topic ${topic}: ${partitions} partitions, producing ${events} events with ${producerKind}, compression ${compression}`,
    );
    if (producerKind === 'java') {
      await produceEventsWithJava(broker, topic, perPartition, stepMs, compression);
    } else {
      await produceEvents(kafka, topic, perPartition, stepMs, compression);
    }
    const batches = await logBatches(topic, 0, broker);
    const codecs = [...new Set(batches.map((b) => b.codec))].join(', ');
    const perBatch = batches.reduce((a, b) => a + b.count, 0) / Math.max(1, batches.length);
    say(
      `partition 0 holds ${batches.length} batches (${codecs}), ${perBatch.toFixed(0)} events each on average`,
    );
    const ends = await highWatermarks(kafka, topic);
    const onTopic = [...ends.values()].reduce((a, b) => a + b, 0n);
    if (onTopic !== BigInt(events)) throw new Error(`topic holds ${onTopic} events, not ${events}`);

    const profileDir = values['cpu-prof']
      ? mkdtempSync(join(tmpdir(), 'streamcube-bench-prof-'))
      : undefined;
    const bare: RunResult[] = [];
    const receiver: RunResult[] = [];
    const line = (what: string, r: RunResult): string =>
      `${what}: ${rate(r).toFixed(0)} events/s steady, ${(r.wallMs / 1000).toFixed(1)} s wall, peak RSS ${mib(r.peakRssBytes)} MiB`;
    for (let round = 1; round <= rounds; round++) {
      say(`round ${round}/${rounds}: bare kafkajs consumer`);
      bare.push(await runBare(brokers, topic, partitions, events, profileDir));
      say(line('  bare', bare[bare.length - 1]!));
      say(`round ${round}/${rounds}: streamcube receiver`);
      receiver.push(await runReceiver(brokers, topic, ends, round, profileDir));
      say(line('  receiver', receiver[receiver.length - 1]!));
    }

    const rows = [
      ['', 'events/s best', 'events/s median', 'wall s median', 'peak RSS MiB max'],
      ...(
        [
          ['bare kafkajs', bare],
          ['receiver', receiver],
        ] as const
      ).map(([name, results]) => [
        name,
        Math.max(...results.map(rate)).toFixed(0),
        median(results.map(rate)).toFixed(0),
        (median(results.map((r) => r.wallMs)) / 1000).toFixed(1),
        mib(Math.max(...results.map((r) => r.peakRssBytes))),
      ]),
    ];
    const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
    say('');
    say(
      `${events} events, ${partitions} partitions, ${rounds} round(s), ${producerKind} producer, compression ${compression}, steady rate = first to last record`,
    );
    for (const row of rows) say(row.map((cell, i) => cell.padStart(widths[i]!)).join('  '));
    const best = Math.max(...receiver.map(rate)) / Math.max(...bare.map(rate));
    const mid = median(receiver.map(rate)) / median(bare.map(rate));
    say(
      `ratio receiver/bare = ${best.toFixed(2)} (best), ${mid.toFixed(2)} (median); goal >= 0.8 (issue 7)`,
    );
    if (profileDir) say(`CPU profiles: ${profileDir} (receivers), ${join(profileDir, 'bare')}`);
  } finally {
    if (topic) await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
    await admin.disconnect();
    await stopBroker();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`bench failed: ${(error as Error).stack ?? String(error)}\n`);
  process.exitCode = 1;
});
