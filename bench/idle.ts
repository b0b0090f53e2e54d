// Idle consumers (issue 8): the CPU a process spends on N receiver consumers (KafkajsPartitionConsumer,
// as a receiver runs one per cube) of a topic nothing is written to, with kafkajs's connections
// as streamcube installs them (src/kafka/request-queue.ts) and as kafkajs 2.2.4 leaves them (a
// 1 ms timer per connection). Each variant runs in a process of its own, rounds alternating; the
// result is the ratio of their CPU in the same run.
import { spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { Kafka, logLevel } from 'kafkajs';
import { createKafka } from '../src/kafka/client.ts';
import { registerCodecs } from '../src/kafka/codecs.ts';
import { KafkajsPartitionConsumer } from '../src/kafka/partition-consumer.ts';
import { createTopic } from '../test/support/events.ts';
import { benchFlags, median, positive, say } from './environment.ts';
import { benchBroker } from './kafka-broker.ts';

const usage = `Usage: npm run bench:idle -- [options]

  --consumers N   idle receiver consumers in each process              [default 100]
  --partitions N  partitions of the topic, all read by every consumer  [default 4]
  --seconds N     how long CPU is measured, once every consumer runs   [default 15]
  --rounds N      runs of each variant, alternating                    [default 2]
`;

const variants = ['as installed', 'kafkajs as is'] as const;
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
  const config = { clientId: 'bench-idle', brokers: [brokers], logLevel: logLevel.NOTHING };
  let kafka: Kafka;
  if (variant === 'as installed') kafka = createKafka(config);
  else {
    registerCodecs();
    process.removeAllListeners('warning'); // kafkajs's TimeoutNegativeWarning, once per connection
    kafka = new Kafka(config);
  }
  const positions = new Map(Array.from({ length: partitions }, (_, p) => [p, 0n] as const));
  const start = async (i: number): Promise<KafkajsPartitionConsumer> => {
    const consumer = new KafkajsPartitionConsumer({
      kafka,
      topic,
      groupId: `${topic}.${variant.replace(/ /g, '-')}.${i}`,
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
    return consumer;
  };
  // Started 10 at a time.
  const running: KafkajsPartitionConsumer[] = [];
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
  await Promise.all(running.map((c) => c.stop()));
  await Promise.all(running.map((c) => c.deleteGroup().catch(() => undefined)));
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
    const installed = median(cpu.get('as installed')!);
    const asIs = median(cpu.get('kafkajs as is')!);
    say('');
    say('| variant | CPU, median (of a core) |');
    say('|---|---|');
    say(`| streamcube's kafkajs (no idle timer loop) | ${percent(installed)} |`);
    say(`| kafkajs 2.2.4 as is | ${percent(asIs)} |`);
    say(`| ratio, as is / streamcube's | ×${(asIs / installed).toFixed(2)} |`);
  } finally {
    await admin.disconnect();
    await stop();
  }
}

await main();
