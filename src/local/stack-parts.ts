// What both kinds of `streamcube local` share: the teardown of what they started, the demo topic,
// the demo CubeAssignment and its producer, and running until Ctrl-C.
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { ApiException, type KubeConfig } from '@kubernetes/client-node';
import { type Kafka, logLevel } from 'kafkajs';
import { createKafka } from '../kafka/client.ts';
import { say } from './progress.ts';
import { cubeApi } from './cluster.ts';
import { DemoProducer, demoRates, demoSchema } from './demo-data.ts';

export class Stopped extends Error {}

/** Things started, stopped in reverse order; a signal stops start-up after its current step. */
export class Teardown {
  private readonly steps: { what: string; stop: () => Promise<void> }[] = [];
  readonly signalled = new AbortController();

  add(what: string, stop: () => Promise<void>): void {
    this.steps.push({ what, stop });
  }

  /** Throws once a signal has come, so start-up goes straight to the teardown. */
  check(): void {
    if (this.signalled.signal.aborted) throw new Stopped();
  }

  async run(): Promise<void> {
    for (const step of this.steps.reverse()) {
      try {
        await step.stop();
      } catch (error) {
        say(`stopping ${step.what} failed: ${(error as Error).message}`);
      }
    }
  }
}

export async function deleteCubeAndWait(
  kc: KubeConfig,
  namespace: string,
  name: string,
): Promise<void> {
  const cubes = cubeApi(kc);
  const gone = (error: unknown): boolean => error instanceof ApiException && error.code === 404;
  try {
    await cubes.delete(namespace, name);
  } catch (error) {
    if (gone(error)) return;
    throw error;
  }
  // The finalizer hands the cube's data off first (the operator is running by now).
  for (const deadline = Date.now() + 60_000; Date.now() < deadline; await sleep(250)) {
    try {
      await cubes.get(namespace, name);
    } catch (error) {
      if (gone(error)) return;
      throw error;
    }
  }
  throw new Error(
    `the CubeAssignment ${namespace}/${name} of an earlier run is not gone after 60s`,
  );
}

/** The demo's topic, cube and producer: what `local` runs once its receivers and operator are up. */
export interface DemoRun {
  topic: string;
  cube: string;
  ledgerFile: string;
  partitions: number;
  /** Events per second the producer writes, on average. */
  perSecond: number;
}

/**
 * Creates the demo topic on `bootstrap`, (re)creates the demo CubeAssignment `orders` in
 * `namespace` reading it through `cubeBrokers` (the address receivers reach the broker at), waits
 * for it to be Ready with every partition assigned, then starts the demo producer.
 */
export async function startDemo(
  teardown: Teardown,
  options: {
    kc: KubeConfig;
    namespace: string;
    bootstrap: string;
    cubeBrokers: string;
    runDir: string;
  },
): Promise<DemoRun> {
  const { kc, namespace } = options;
  const kafka: Kafka = createKafka({
    clientId: 'streamcube-local',
    brokers: [options.bootstrap],
    logLevel: logLevel.NOTHING,
  });
  const topic = 'orders';
  const admin = kafka.admin();
  await admin.connect();
  try {
    await admin.createTopics({
      topics: [{ topic, numPartitions: demoRates.length }],
      waitForLeaders: true,
    });
  } finally {
    await admin.disconnect();
  }
  const cube = 'orders';
  await deleteCubeAndWait(kc, namespace, cube);
  // From the latest offsets: the demo producer starts once the cube is Ready, so the cube sees
  // every demo event of this run and none of an earlier one.
  await cubeApi(kc).create(namespace, cube, {
    source: { brokers: [options.cubeBrokers], topic, startingOffsets: 'latest' },
    schema: demoSchema,
    replicaSets: ['rs-a', 'rs-b'],
    strategy: 'sticky',
  });
  say(`waiting for the CubeAssignment ${namespace}/${cube} to be Ready`);
  for (;;) {
    teardown.check();
    const c = await cubeApi(kc).get(namespace, cube);
    const ready = c.status?.conditions?.find((x) => x.type === 'Ready')?.status === 'True';
    const assigned = Object.values(c.status?.assignment ?? {}).flat().length;
    if (ready && assigned === demoRates.length && !c.status?.reassign) break;
    await sleep(250);
  }

  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  teardown.add('the demo producer connection', () => producer.disconnect());
  const ledgerFile = join(options.runDir, 'demo-produced.json');
  const demo = new DemoProducer(producer, topic, ledgerFile);
  demo.start(
    (error) => say(`demo producer: ${(error as Error).message}`),
    (message) => say(`demo producer: ${message}`),
  );
  teardown.add('the demo producer', () => demo.stop());
  const perSecond = demoRates.reduce(
    (sum, r) => sum + ('perSecond' in r ? r.perSecond : r.burst / r.everySeconds),
    0,
  );
  return { topic, cube, ledgerFile, partitions: demoRates.length, perSecond };
}

/**
 * Starts a stack with `start` and keeps it until SIGINT or SIGTERM, then stops everything it
 * started, in reverse order (also when start-up failed or was interrupted). Returns the exit code.
 */
export async function runUntilSignal(
  what: string,
  start: (teardown: Teardown) => Promise<unknown>,
): Promise<number> {
  const teardown = new Teardown();
  let signals = 0;
  const onSignal = (signal: NodeJS.Signals): void => {
    signals += 1;
    if (signals === 1) {
      say(`${signal}: stopping everything ${what} started`);
      teardown.signalled.abort();
    } else say(`${signal} again: still stopping, please wait`);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  let exitCode = 0;
  try {
    await start(teardown);
    await new Promise<void>((r) => teardown.signalled.signal.addEventListener('abort', () => r()));
  } catch (error) {
    // A step cut short by the signal (a command it ended) is a stop, not a failure.
    if (!(error instanceof Stopped) && !teardown.signalled.signal.aborted) {
      say(`${what} failed: ${(error as Error).stack ?? String(error)}`);
      exitCode = 1;
    }
  } finally {
    say('stopping');
    await teardown.run();
    say('stopped');
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
  return exitCode;
}
