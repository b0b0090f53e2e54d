// Receiver soak (issue 8): many one-minute windows of event time through one real receiver with a
// short hand-off retention; prints, at intervals, the segments held, the checkpoint's size on disk
// and the flush time, which must stay flat once retention starts purging.
import { readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { logLevel } from 'kafkajs';
import { createKafka } from '../src/kafka/client.ts';
import { assignRequest, createTopic, produce, testSchema } from '../test/support/events.ts';
import { ReceiverProcess } from '../test/support/receiver-process.ts';
import { benchBroker } from './kafka-broker.ts';
import { tempDir } from '../test/support/scratch-dirs.ts';

const usage = `Usage: npm run bench:soak -- [options]

  --windows N            one-minute windows of event time to push     [default 10000]
  --events-per-window N  events per window and partition               [default 4]
  --partitions N         partitions of the topic                       [default 2]
  --slice N              windows produced at a time, then waited for   [default 100]
  --report-every N       windows between two lines of the table        [default 1000]
  --retention DUR        the receiver's --handed-off-retention         [default 20s]
`;

const MINUTE = 60_000;
const T0 = Date.UTC(2026, 0, 1);
const say = (text: string): void => {
  process.stdout.write(`${text}\n`);
};

/** Bytes and files below `dir`. */
function sizeOf(dir: string): { bytes: number; files: number } {
  let bytes = 0;
  let files = 0;
  for (const name of readdirSync(dir, { recursive: true, encoding: 'utf8' })) {
    // A flush may delete a file between the listing and its stat.
    const s = statSync(join(dir, name), { throwIfNoEntry: false });
    if (s?.isFile()) {
      bytes += s.size;
      files += 1;
    }
  }
  return { bytes, files };
}

/**
 * Retries a request the receiver did not answer: a hand-off pass holds its event loop for a
 * while, longer on a loaded machine, and a connection then times out.
 */
async function patiently<T>(request: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await request();
    } catch (error) {
      if (attempt >= 10) throw error;
      await sleep(500 * attempt);
    }
  }
}

/**
 * Sum and count of the receiver's flush-duration histogram, and its event loop's delay (p99 and
 * max, in seconds) since the scrape before: prom-client resets its delay histogram at each scrape,
 * and no one else scrapes the receiver here.
 */
async function scrape(
  r: ReceiverProcess,
): Promise<{ sum: number; count: number; loopP99: number; loopMax: number }> {
  const text = await (await fetch(`${r.baseUrl}/metrics`)).text();
  const value = (name: string): number =>
    text
      .split('\n')
      .filter((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `))
      .reduce((a, l) => a + Number(l.split(' ').at(-1)), 0);
  return {
    sum: value('streamcube_receiver_flush_duration_seconds_sum'),
    count: value('streamcube_receiver_flush_duration_seconds_count'),
    loopP99: value('nodejs_eventloop_lag_p99_seconds'),
    loopMax: value('nodejs_eventloop_lag_max_seconds'),
  };
}

function rssMiB(pid: number | undefined): string {
  if (pid === undefined) return '?';
  const line = readFileSync(`/proc/${pid}/status`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith('VmRSS:'));
  return (Number(line?.split(/\s+/)[1] ?? 0) / 1024).toFixed(0);
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      windows: { type: 'string', default: '10000' },
      'events-per-window': { type: 'string', default: '4' },
      partitions: { type: 'string', default: '2' },
      slice: { type: 'string', default: '100' },
      'report-every': { type: 'string', default: '1000' },
      retention: { type: 'string', default: '20s' },
    },
    strict: true,
  });
  const counts = [values.windows, values['events-per-window'], values.partitions, values.slice]
    .concat(values['report-every'])
    .map(Number);
  if (!counts.every((n) => Number.isInteger(n) && n > 0))
    throw new Error(`every count must be a positive integer\n${usage}`);
  const [windows, perWindow, partitions, slice, reportEvery] = counts as [
    number,
    number,
    number,
    number,
    number,
  ];
  const { retention } = values;

  const { brokers, stop: stopBroker } = await benchBroker(say);
  const kafka = createKafka({
    clientId: 'bench-soak',
    brokers: [brokers],
    logLevel: logLevel.ERROR,
  });
  const admin = kafka.admin();
  const producer = kafka.producer();
  await Promise.all([admin.connect(), producer.connect()]);
  const deepStorageDir = tempDir('soak-deep');
  const receiver = new ReceiverProcess({
    id: 'soak-0',
    replicaSet: 'rs-soak',
    deepStorageDir,
    flushInterval: '200ms',
    env: { STREAMCUBE_HANDED_OFF_RETENTION: retention },
  });
  let topic: string | undefined;
  try {
    topic = await createTopic(admin, partitions);
    await receiver.start();
    const schema = { ...testSchema, window: '1m', allowedLateness: '0s' };
    const all = Array.from({ length: partitions }, (_, partition) => ({
      partition,
      position: '0',
    }));
    await receiver.client.assign('soak', assignRequest(brokers, topic, 'rs-soak', all, schema));
    const cubeDir = join(receiver.dataDir, 'cubes', 'default', 'soak');
    say(
      `topic ${topic}: ${partitions} partitions, ${windows} one-minute windows, ${perWindow} events per window and partition, retention ${retention}`,
    );
    const header = [
      'windows',
      'elapsed s',
      'active',
      'immutable',
      'handed off',
      'checkpoint KiB',
      'files',
      'manifest KiB',
      'flushes',
      'flush ms mean',
      'loop p99 ms',
      'loop max ms',
      'RSS MiB',
    ];
    const rows: string[][] = [header];
    let last = await patiently(() => scrape(receiver));
    const started = Date.now();
    let produced = 0;
    const step = Math.floor(MINUTE / perWindow);
    for (let w = 0; w < windows; w += slice) {
      const upTo = Math.min(windows, w + slice);
      for (let p = 0; p < partitions; p++) {
        const events = [];
        for (let window = w; window < upTo; window++)
          for (let k = 0; k < perWindow; k++)
            events.push({
              ts: T0 + window * MINUTE + k * step,
              country: ['de', 'fr', 'jp', 'us'][k % 4]!,
              device: 'web',
              price: 1,
            });
        await produce(producer, topic, p, events);
      }
      produced += (upTo - w) * perWindow;
      // Consumed up to here before the next slice: event time moves on at the pace of the receiver.
      for (;;) {
        const status = await patiently(() => receiver.client.cubeStatus('soak'));
        if (status.partitions.every((p) => BigInt(p.position) >= BigInt(produced))) break;
        await sleep(50);
      }
      if (upTo % reportEvery === 0 || upTo === windows) {
        const status = await patiently(() => receiver.client.cubeStatus('soak'));
        const counts = status.segmentCounts ?? { ACTIVE: 0, IMMUTABLE: 0, HANDED_OFF: 0 };
        const disk = sizeOf(cubeDir);
        const manifest = statSync(join(cubeDir, 'checkpoint.json')).size;
        const now = await patiently(() => scrape(receiver));
        const flushes = now.count - last.count;
        rows.push([
          String(upTo),
          ((Date.now() - started) / 1000).toFixed(0),
          String(counts.ACTIVE),
          String(counts.IMMUTABLE),
          String(counts.HANDED_OFF),
          (disk.bytes / 1024).toFixed(0),
          String(disk.files),
          (manifest / 1024).toFixed(1),
          String(flushes),
          flushes > 0 ? (((now.sum - last.sum) / flushes) * 1000).toFixed(2) : '-',
          (now.loopP99 * 1000).toFixed(0),
          (now.loopMax * 1000).toFixed(0),
          rssMiB(receiver.child?.pid),
        ]);
        last = now;
        say(rows.at(-1)!.join('  '));
      }
    }
    const widths = header.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
    say('');
    say(
      `${windows} windows × ${perWindow} events × ${partitions} partitions; checkpoint = the cube's directory (manifest, segment records, fragments); flush = fragments + checkpoint, mean per interval; loop = the receiver's event-loop delay since the line before`,
    );
    for (const row of rows) say(row.map((cell, i) => cell.padStart(widths[i]!)).join('  '));
  } catch (error) {
    process.exitCode = 1;
    throw error;
  } finally {
    await receiver.stop().catch(() => undefined);
    if (topic) await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
    await Promise.all([admin.disconnect(), producer.disconnect()]);
    if (process.exitCode) say(`receiver log kept: ${receiver.logFile}`);
    else rmSync(dirname(receiver.dataDir), { recursive: true, force: true });
    rmSync(deepStorageDir, { recursive: true, force: true });
    await stopBroker();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`bench failed: ${(error as Error).stack ?? String(error)}\n`);
  process.exitCode = 1;
});
