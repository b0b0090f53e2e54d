// Idle consumers (issue 8): the CPU a process spends on N cubes' consumers of a topic nothing is
// written to, the way a receiver reads them now (one fetch session for all, src/kafka/
// fetch-session.ts) and the way it did before (a kafkajs consumer per cube, in a group of its own,
// fetching every 3 s: bench/bare-consumer.ts). Each variant runs in a process of its own, rounds
// alternating; the result is the ratio of their CPU in the same run.
import { spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { logLevel } from 'kafkajs';
import { createKafka } from '../src/kafka/client.ts';
import { closeFetchSession } from '../src/kafka/fetch-session.ts';
import { SessionPartitionConsumer } from '../src/kafka/session-consumer.ts';
import { consumerSettings, exactPartitionAssigner } from './bare-consumer.ts';
import { createTopic } from '../test/support/events.ts';
import { benchFlags, median, positive, say } from './environment.ts';
import { benchBroker } from './kafka-broker.ts';

const usage = `Usage: npm run bench:idle -- [options]

  --consumers N   idle cubes' consumers in each process                [default 100]
  --partitions N  partitions of the topic, all read by every consumer  [default 4]
  --seconds N     how long CPU is measured, once every consumer runs   [default 15]
  --rounds N      runs of each variant, alternating                    [default 2]
`;

const variants = ['fetch session', 'a kafkajs consumer each'] as const;
type Variant = (typeof variants)[number];

/** One process: starts the consumers, waits, measures its own CPU, prints it as JSON. */
async function child(
  variant: Variant,
  brokers: string,
  topic: string,
  consumers: number,
  partitions: number,
  seconds: number,
): Promise<void> {
  const kafka = createKafka({
    clientId: 'bench-idle',
    brokers: [brokers],
    logLevel: logLevel.NOTHING,
  });
  const positions = new Map(Array.from({ length: partitions }, (_, p) => [p, 0n] as const));
  const ids = [...positions.keys()];
  const groupOf = (i: number) => `${topic}.${variant.replace(/ /g, '-')}.${i}`;
  const start = async (i: number): Promise<() => Promise<void>> => {
    if (variant === 'fetch session') {
      const consumer = new SessionPartitionConsumer({
        kafka,
        topic,
        groupId: groupOf(i),
        sink: {
          onRecords: () => undefined,
          onFilteredRange: () => undefined,
          wants: () => true,
          onCrash: (error) => {
            throw error;
          },
        },
      });
      await consumer.start(positions);
      return async () => {
        await consumer.stop();
        await consumer.deleteGroup().catch(() => undefined);
      };
    }
    const consumer = kafka.consumer({
      groupId: groupOf(i),
      partitionAssigners: [exactPartitionAssigner(topic, () => ids)],
      ...consumerSettings,
      // The receivers' fetch wait before the session.
      maxWaitTimeInMs: 3_000,
    });
    await consumer.connect();
    await consumer.subscribe({ topics: [topic], fromBeginning: true });
    await consumer.run({ autoCommit: false, eachBatch: () => Promise.resolve() });
    return () => consumer.disconnect();
  };
  // Started 10 at a time.
  const running: (() => Promise<void>)[] = [];
  for (let i = 0; i < consumers; i += 10) {
    const batch = Array.from({ length: Math.min(10, consumers - i) }, (_, j) => start(i + j));
    running.push(...(await Promise.all(batch)));
  }
  await sleep(3_000);
  const before = process.cpuUsage();
  const started = performance.now();
  await sleep(seconds * 1000);
  const used = process.cpuUsage(before);
  const elapsedMs = performance.now() - started;
  process.stdout.write(
    `${JSON.stringify({ cpu: (used.user + used.system) / 1000 / elapsedMs })}\n`,
  );
  await Promise.all(running.map((stop) => stop()));
  await closeFetchSession(kafka);
}

async function run(variant: Variant, args: string[]): Promise<number> {
  const proc = spawn(process.execPath, [import.meta.filename, '--child', variant, ...args], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  proc.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  const code = await new Promise<number | null>((r) => proc.once('exit', r));
  const line = out.trim().split('\n').pop() ?? '';
  if (code !== 0 || !line.startsWith('{'))
    throw new Error(`${variant}: the process failed (exit ${code})`);
  return (JSON.parse(line) as { cpu: number }).cpu;
}

const percent = (cpu: number): string => `${(cpu * 100).toFixed(1)}%`;

async function main(): Promise<void> {
  const values = benchFlags(usage, {
    consumers: '100',
    partitions: '4',
    seconds: '15',
    rounds: '2',
    child: undefined,
    brokers: undefined,
    topic: undefined,
  });
  if (!values) return;
  const consumers = positive('consumers', values.consumers);
  const partitions = positive('partitions', values.partitions);
  const seconds = positive('seconds', values.seconds);
  if (values.child !== undefined) {
    const variant = variants.find((v) => v === values.child);
    if (!variant) throw new Error(`--child must be one of ${variants.join(', ')}`);
    await child(variant, values.brokers ?? '', values.topic ?? '', consumers, partitions, seconds);
    return;
  }
  const rounds = positive('rounds', values.rounds);
  const { brokers, stop } = await benchBroker(say);
  const kafka = createKafka({
    clientId: 'bench-idle',
    brokers: [brokers],
    logLevel: logLevel.ERROR,
  });
  const admin = kafka.admin();
  await admin.connect();
  try {
    const topic = await createTopic(admin, partitions);
    say(
      `${consumers} idle consumers of ${partitions} partitions per process, CPU over ${seconds} s, ${rounds} rounds`,
    );
    const cpu = new Map<Variant, number[]>(variants.map((v) => [v, []]));
    const args = [
      `--brokers=${brokers}`,
      `--topic=${topic}`,
      `--consumers=${consumers}`,
      `--partitions=${partitions}`,
      `--seconds=${seconds}`,
    ];
    for (let round = 1; round <= rounds; round++) {
      for (const variant of variants) {
        const used = await run(variant, args);
        cpu.get(variant)!.push(used);
        say(`  round ${round}, ${variant}: ${percent(used)} of a core`);
      }
    }
    await admin.deleteTopics({ topics: [topic] });
    const session = median(cpu.get('fetch session')!);
    const each = median(cpu.get('a kafkajs consumer each')!);
    say('');
    say('| variant | CPU, median (of a core) |');
    say('|---|---|');
    say(`| one fetch session (the receivers') | ${percent(session)} |`);
    say(`| a kafkajs consumer per cube (before) | ${percent(each)} |`);
    say(`| ratio, per cube / session | ×${(each / session).toFixed(2)} |`);
  } finally {
    await admin.disconnect();
    await stop();
  }
}

await main();
