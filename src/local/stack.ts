// `streamcube local`: a whole stack on this machine — Kafka, etcd + kube-apiserver, the CRD, two
// replica sets of receivers (as processes, visible as pods), the operator, a demo topic with a
// trickle of orders at mixed rates and the demo CubeAssignment — until Ctrl-C, which stops
// everything it started (an environment started by `npm run env:up` it only uses, and leaves
// running).
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { ApiException, CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { logLevel } from 'kafkajs';
import { createKafka } from '../kafka/client.ts';
import { settings } from './settings.ts';
import {
  type TestEnvironment,
  describeEnvironment,
  findRunningEnvironment,
  startEnvironment,
  stopEnvironment,
} from './environment.ts';
import { freePort, startService, stopService, waitForService } from './processes.ts';
import { say } from './progress.ts';
import { applyCrdWith, cubeApi, receiverPod } from './cluster.ts';
import { DemoProducer, demoRates, demoSchema } from './demo-data.ts';

const cliPath = resolve(import.meta.dirname, '../cli.ts');

/** What a running stack wrote to `<state dir>/local/stack.json`, for people and tests. */
export interface LocalStackInfo {
  pid: number;
  namespace: string;
  cube: string;
  topic: string;
  token: string;
  kubeconfig: string;
  bootstrap: string;
  receivers: { id: string; replicaSet: string; url: string; pid: number; logFile: string }[];
  operator: { url: string; pid: number; logFile: string };
  /** The demo producer's ledger (see demo-data.ts). */
  ledgerFile: string;
  deepStorageDir: string;
  /** The environment's processes, when this stack started them (undefined when reused). */
  environmentPids: number[] | undefined;
}

class Stopped extends Error {}

/** Things started, stopped in reverse order; a signal stops start-up after its current step. */
class Teardown {
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

/** A `streamcube receiver|operator` child in its own process group, ready when /readyz says so. */
async function startStreamcube(
  teardown: Teardown,
  name: string,
  args: string[],
  readyUrl: string,
  logFile: string,
): Promise<number> {
  const pid = startService(process.execPath, [cliPath, ...args], logFile);
  teardown.add(name, () => stopService(pid, 30_000));
  await waitForService(name, async () => (await fetch(readyUrl)).ok, { pid, logFile }, 30_000);
  return pid;
}

async function deleteCubeAndWait(kc: KubeConfig, namespace: string, name: string): Promise<void> {
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

async function startStack(teardown: Teardown): Promise<LocalStackInfo> {
  const reused = findRunningEnvironment(settings.stateDir);
  let env: TestEnvironment;
  if (reused) {
    env = reused;
    say(`using the environment in ${settings.stateDir} (npm run env:up); it stays running`);
  } else {
    env = await startEnvironment(settings.stateDir);
    teardown.add('Kafka, etcd and kube-apiserver', () => stopEnvironment(env, false));
  }
  teardown.check();
  const kc = new KubeConfig();
  kc.loadFromFile(env.kube.kubeconfig);
  const namespace = 'streamcube-local';
  await kc
    .makeApiClient(CoreV1Api)
    .createNamespace({ body: { metadata: { name: namespace } } })
    .catch((error: unknown) => {
      if (!(error instanceof ApiException && error.code === 409)) throw error;
    });
  await applyCrdWith(env.kube.kubeconfig);
  teardown.check();

  const runDir = join(settings.stateDir, 'local');
  rmSync(runDir, { recursive: true, force: true });
  mkdirSync(runDir, { recursive: true });
  const deepStorageDir = join(settings.stateDir, 'deep-storage');
  mkdirSync(deepStorageDir, { recursive: true });
  const token = randomBytes(24).toString('hex');
  const tokenFile = join(runDir, 'receiver-token');
  writeFileSync(tokenFile, `${token}\n`, { mode: 0o600 });
  const receiverPort = await freePort();
  const receivers: LocalStackInfo['receivers'] = [];
  for (const [id, replicaSet, ip] of [
    ['rs-a-0', 'rs-a', '127.0.0.2'],
    ['rs-b-0', 'rs-b', '127.0.0.3'],
  ] as const) {
    const dir = join(runDir, id);
    mkdirSync(dir, { recursive: true });
    const url = `http://${ip}:${receiverPort}`;
    const logFile = join(dir, 'receiver.log');
    const pid = await startStreamcube(
      teardown,
      `receiver ${id}`,
      [
        'receiver',
        `--id=${id}`,
        `--replica-set=${replicaSet}`,
        `--host=${ip}`,
        `--port=${receiverPort}`,
        `--data-dir=${join(dir, 'data')}`,
        `--deep-storage-dir=${deepStorageDir}`,
        `--admin-token-file=${tokenFile}`,
        '--flush-interval=1s',
        '--idle-timeout=30s',
      ],
      `${url}/readyz`,
      logFile,
    );
    await kc
      .makeApiClient(CoreV1Api)
      .deleteNamespacedPod({ name: id, namespace })
      .catch(() => undefined);
    await receiverPod(kc, namespace, id, replicaSet, ip);
    receivers.push({ id, replicaSet, url, pid, logFile });
    say(`receiver ${id} (${replicaSet}) at ${url}, log ${logFile}`);
    teardown.check();
  }

  const operatorPort = await freePort();
  const operatorLog = join(runDir, 'operator.log');
  const operatorPid = await startStreamcube(
    teardown,
    'operator',
    [
      'operator',
      `--kubeconfig=${env.kube.kubeconfig}`,
      `--namespace=${namespace}`,
      `--receiver-token-file=${tokenFile}`,
      `--receiver-port=${receiverPort}`,
      '--host=127.0.0.1',
      `--port=${operatorPort}`,
      `--lease-namespace=${namespace}`,
    ],
    `http://127.0.0.1:${operatorPort}/readyz`,
    operatorLog,
  );
  const operator = {
    url: `http://127.0.0.1:${operatorPort}`,
    pid: operatorPid,
    logFile: operatorLog,
  };
  say(`operator at ${operator.url}/metrics, log ${operatorLog}`);
  teardown.check();

  const kafka = createKafka({
    clientId: 'streamcube-local',
    brokers: [env.kafka.bootstrap],
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
    source: { brokers: [env.kafka.bootstrap], topic, startingOffsets: 'latest' },
    schema: demoSchema,
    replicaSets: ['rs-a', 'rs-b'],
    strategy: 'sticky',
  });
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
  const ledgerFile = join(runDir, 'demo-produced.json');
  const demo = new DemoProducer(producer, topic, ledgerFile);
  demo.start((error) => say(`demo producer: ${(error as Error).message}`));
  teardown.add('the demo producer', () => demo.stop());

  const info: LocalStackInfo = {
    pid: process.pid,
    namespace,
    cube,
    topic,
    token,
    kubeconfig: env.kube.kubeconfig,
    bootstrap: env.kafka.bootstrap,
    receivers,
    operator,
    ledgerFile,
    deepStorageDir,
    environmentPids: reused
      ? undefined
      : [env.kafka.pid, env.kube.etcd.pid, env.kube.apiserver.pid],
  };
  writeFileSync(join(runDir, 'stack.json'), JSON.stringify(info, null, 2));
  const kubectl = join(settings.cacheDir, 'bin', 'k8s-*', 'kubectl');
  const perSecond = demoRates.reduce(
    (sum, r) => sum + ('perSecond' in r ? r.perSecond : r.burst / r.everySeconds),
    0,
  );
  console.log(`
streamcube is running locally.
${describeEnvironment(env)}

  export KUBECONFIG=${env.kube.kubeconfig}
  ${kubectl} get cube -n ${namespace}
  ${kubectl} describe cube ${cube} -n ${namespace}
  # each replica set holds some of the partitions: ask both
${receivers
  .map(
    (r) =>
      `  curl -s -H 'Authorization: Bearer ${token}' -X POST ${r.url}/v1/cubes/${cube}/query -d '{"groupBy":["country"]}'`,
  )
  .join('\n')}

A producer writes about ${Math.round(perSecond)} events/s to topic '${topic}' (${demoRates.length} partitions at mixed rates);
what it wrote so far is in ${ledgerFile}. State and logs: ${runDir}.
Ctrl-C stops everything${reused ? ' (the environment from env:up keeps running)' : ''}.
`);
  return info;
}

export async function runLocalStack(): Promise<number> {
  const teardown = new Teardown();
  let signals = 0;
  const onSignal = (signal: NodeJS.Signals): void => {
    signals += 1;
    if (signals === 1) {
      say(`${signal}: stopping everything streamcube local started`);
      teardown.signalled.abort();
    } else say(`${signal} again: still stopping, please wait`);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  let exitCode = 0;
  try {
    await startStack(teardown);
    await new Promise<void>((r) => teardown.signalled.signal.addEventListener('abort', () => r()));
  } catch (error) {
    if (!(error instanceof Stopped)) {
      say(`streamcube local failed: ${(error as Error).stack ?? String(error)}`);
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
