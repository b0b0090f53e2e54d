// `streamcube local`: a whole stack on this machine — Kafka, etcd + kube-apiserver, the CRD, two
// replica sets of receivers (as processes, visible as pods), the operator, the query server, a
// demo topic with a trickle of orders at mixed rates and the demo CubeAssignment — until Ctrl-C,
// which stops everything it started (an environment started by `npm run env:up` it only uses,
// and leaves running).
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { randomBytes } from 'node:crypto';
import { ApiException, CoreV1Api, KubeConfig } from '@kubernetes/client-node';
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
import { applyCrdWith, receiverPod } from './cluster.ts';
import { type Teardown, runUntilSignal, startDemo } from './stack-parts.ts';
import { operatorEnvironment, operatorNodeOptions } from '../operator/node-options.ts';

const cliPath = resolve(import.meta.dirname, '../cli.ts');

/** What a running stack wrote to `<state dir>/local/stack.json`, for people and tests. */
export interface LocalStackInfo {
  pid: number;
  namespace: string;
  cube: string;
  topic: string;
  /** The receivers' read token: status and query, never a change (the operator has the admin one). */
  readToken: string;
  kubeconfig: string;
  bootstrap: string;
  receivers: { id: string; replicaSet: string; url: string; pid: number; logFile: string }[];
  operator: { url: string; pid: number; logFile: string };
  /** The query server: one answer over the whole cube (live receivers and committed windows). */
  queryServer?: { url: string; pid: number; logFile: string };
  /** The demo producer's ledger (see demo-data.ts). */
  ledgerFile: string;
  deepStorageDir: string;
  /** The environment's processes, when this stack started them (undefined when reused). */
  environmentPids: number[] | undefined;
}

/** A `streamcube receiver|operator` child in its own process group, ready when /readyz says so. */
async function startStreamcube(
  teardown: Teardown,
  name: string,
  args: string[],
  readyUrl: string,
  logFile: string,
  nodeOptions: readonly string[] = [],
  env: Readonly<Record<string, string>> = {},
): Promise<number> {
  const pid = startService(process.execPath, [...nodeOptions, cliPath, ...args], logFile, {
    ...process.env,
    ...env,
  });
  teardown.add(name, () => stopService(pid, 30_000));
  await waitForService(name, async () => (await fetch(readyUrl)).ok, { pid, logFile }, 30_000);
  return pid;
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
  // A token per role: the operator's admin token, the receivers' read token the query server
  // uses, and the query server's own, the one a user is told.
  const tokenIn = (name: string): { token: string; file: string } => {
    const token = randomBytes(24).toString('hex');
    const file = join(runDir, name);
    writeFileSync(file, `${token}\n`, { mode: 0o600 });
    return { token, file };
  };
  const { file: tokenFile } = tokenIn('receiver-token');
  const { token: readToken, file: readTokenFile } = tokenIn('receiver-read-token');
  const { token: queryToken, file: queryTokenFile } = tokenIn('query-token');
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
        `--read-token-file=${readTokenFile}`,
        '--flush-interval=1s',
        '--idle-timeout=30s',
        // Leader terms checked against the operator's Lease, as the chart's receivers do.
        `--leader-lease=${namespace}/streamcube-operator`,
      ],
      `${url}/readyz`,
      logFile,
      [],
      { KUBECONFIG: env.kube.kubeconfig },
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
      // Every process on this machine's loopback: plain HTTP between them.
      '--receiver-plain-http',
      `--receiver-port=${receiverPort}`,
      '--host=127.0.0.1',
      `--port=${operatorPort}`,
      `--lease-namespace=${namespace}`,
    ],
    `http://127.0.0.1:${operatorPort}/readyz`,
    operatorLog,
    operatorNodeOptions,
    operatorEnvironment,
  );
  const operator = {
    url: `http://127.0.0.1:${operatorPort}`,
    pid: operatorPid,
    logFile: operatorLog,
  };
  say(`operator at ${operator.url}/metrics, log ${operatorLog}`);
  teardown.check();

  const queryPort = await freePort();
  const queryLog = join(runDir, 'query-server.log');
  const queryServer = {
    url: `http://127.0.0.1:${queryPort}`,
    logFile: queryLog,
    pid: await startStreamcube(
      teardown,
      'query server',
      [
        'query-server',
        `--kubeconfig=${env.kube.kubeconfig}`,
        `--namespace=${namespace}`,
        `--receiver-token-file=${readTokenFile}`,
        '--receiver-plain-http',
        `--token-file=${queryTokenFile}`,
        `--receiver-port=${receiverPort}`,
        `--deep-storage-dir=${deepStorageDir}`,
        '--host=127.0.0.1',
        `--port=${queryPort}`,
      ],
      `http://127.0.0.1:${queryPort}/readyz`,
      queryLog,
    ),
  };
  say(`query server at ${queryServer.url}, log ${queryLog}`);
  teardown.check();

  const demo = await startDemo(teardown, {
    kc,
    namespace,
    bootstrap: env.kafka.bootstrap,
    cubeBrokers: env.kafka.bootstrap,
    runDir,
  });
  const { cube, topic, ledgerFile } = demo;

  const info: LocalStackInfo = {
    pid: process.pid,
    namespace,
    cube,
    topic,
    readToken,
    kubeconfig: env.kube.kubeconfig,
    bootstrap: env.kafka.bootstrap,
    receivers,
    operator,
    queryServer,
    ledgerFile,
    deepStorageDir,
    environmentPids: reused
      ? undefined
      : [env.kafka.pid, env.kube.etcd.pid, env.kube.apiserver.pid],
  };
  writeFileSync(join(runDir, 'stack.json'), JSON.stringify(info, null, 2));
  const kubectl = join(settings.cacheDir, 'bin', 'k8s-*', 'kubectl');
  console.log(`
streamcube is running locally.
${describeEnvironment(env)}

  export KUBECONFIG=${env.kube.kubeconfig}
  ${kubectl} get cube -n ${namespace}
  ${kubectl} describe cube ${cube} -n ${namespace}
  # one answer over the whole cube, live and committed, every Kafka offset counted once:
  STREAMCUBE_QUERY_TOKEN_FILE=${queryTokenFile} npm run -s streamcube -- query --server ${queryServer.url} -n ${namespace} --group-by country ${cube}
  # the same over HTTP (-o json above prints this answer):
  #   curl -s -H 'Authorization: Bearer ${queryToken}' -X POST ${queryServer.url}/v1/namespaces/${namespace}/cubes/${cube}/query -d '{"groupBy":["country"]}'

A producer writes about ${Math.round(demo.perSecond)} events/s to topic '${topic}' (${demo.partitions} partitions at mixed rates);
what it wrote so far is in ${ledgerFile}. State and logs: ${runDir}.
Ctrl-C stops everything${reused ? ' (the environment from env:up keeps running)' : ''}.
`);
  return info;
}

/** `streamcube local`; with `node`, on a real one-node cluster with the Helm chart (node-stack.ts). */
export async function runLocalStack(options: { node?: boolean } = {}): Promise<number> {
  if (options.node) {
    const { startNodeStack } = await import('./node-stack.ts');
    return runUntilSignal('streamcube local --node', startNodeStack);
  }
  return runUntilSignal('streamcube local', startStack);
}
