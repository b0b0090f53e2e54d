// `streamcube local --node`: the stack as users run it — the image built from the Dockerfile and
// the Helm chart on a real one-node cluster (kubelet, containerd, runc; see node/node.ts) — with
// the same demo topic, producer and CubeAssignment as the process stack. Ctrl-C stops everything
// it started: the whole environment and its data, or, on an environment of
// `npm run env:up -- --node`, the cube, the release and the namespace.
import { applyCrdWith } from './cluster.ts';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { setTimeout as sleep } from 'node:timers/promises';
import { settings } from './settings.ts';
import {
  type TestEnvironment,
  describeEnvironment,
  findRunningEnvironment,
  startEnvironment,
  stopEnvironment,
} from './environment.ts';
import { binDir, ensureHelm } from './controlplane.ts';
import { ensureNodeImages, streamcubeImage } from './node/images.ts';
import { importImages } from './node/node.ts';
import { recycleReleasedVolumes } from './node/storage.ts';
import { runCommand } from './processes.ts';
import { say, step } from './progress.ts';
import { type Teardown, deleteCubeAndWait, startDemo } from './stack-parts.ts';

const chart = resolve(import.meta.dirname, '../../deploy/helm/streamcube');
const namespace = 'streamcube-local';
const release = 'streamcube';
const replicaSets = ['rs-a', 'rs-b'] as const;

/** What a running `local --node` wrote to `<state dir>/local/stack.json`, for people and tests. */
export interface NodeStackInfo {
  mode: 'node';
  pid: number;
  namespace: string;
  release: string;
  cube: string;
  topic: string;
  kubeconfig: string;
  kubectl: string;
  bootstrap: string;
  /** Receiver pods, one per replica set; their admin port is 8080 (reach it with port-forward). */
  receiverPods: string[];
  /** The Secret holding the receivers' read token (key `token`): status and query only. */
  tokenSecret: string;
  ledgerFile: string;
  /** Seconds from the command's start to the demo producer's first event. */
  startSeconds: number;
  /** Whether this stack started the environment (and so stops it on Ctrl-C). */
  ownsEnvironment: boolean;
}

export async function startNodeStack(teardown: Teardown): Promise<NodeStackInfo> {
  const t0 = Date.now();
  const reused = findRunningEnvironment(settings.stateDir);
  if (reused && !reused.node) {
    throw new Error(
      `the environment in ${settings.stateDir} runs without a node: stop it (npm run env:down) ` +
        'or start it with npm run env:up -- --node',
    );
  }
  let env: TestEnvironment;
  if (reused) {
    env = reused;
    say(`using the environment in ${settings.stateDir} (env:up --node); it stays running`);
    // The image of the sources as they are now (a cache hit when unchanged).
    await importImages(reused.node!, await ensureNodeImages());
  } else {
    env = await startEnvironment(settings.stateDir, { node: true });
    // With its data: the next run starts a fresh cluster rather than the pods of this one.
    teardown.add('the environment and its node', () => stopEnvironment(env, true));
  }
  teardown.check();
  const kubeconfig = env.kube.kubeconfig;
  const kubectlPath = join(binDir(), 'kubectl');
  const helmPath = await ensureHelm();
  /** helm in the namespace; `interruptible`: Ctrl-C ends it (never for what the teardown runs). */
  const helm = (args: string[], interruptible = false): Promise<string> =>
    runCommand(helmPath, ['--kubeconfig', kubeconfig, '-n', namespace, ...args], {
      ...(interruptible ? { signal: teardown.signalled.signal } : {}),
    });

  // A release of an earlier run that was not stopped: its cube first (the finalizer needs the
  // operator), then the release.
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfig);
  if ((await helm(['list', '-q'])).split('\n').includes(release)) {
    await step(`removing the release of an earlier run`, async () => {
      await deleteCubeAndWait(kc, namespace, 'orders');
      await helm(['uninstall', release, '--wait', '--timeout', '3m']);
    });
  }
  await recycleReleasedVolumes(kubeconfig, kubectlPath);
  // The CRD outlives releases (crds.keep) and may belong to another release on this cluster (the
  // e2e's): applied here, not owned by this release.
  await step('applying the CRDs', () => applyCrdWith(kubeconfig));

  await step(`helm install ${release} (namespace ${namespace})`, () =>
    helm(
      [
        'install',
        release,
        chart,
        '--create-namespace',
        '--wait',
        '--timeout',
        '5m',
        '--set',
        `image.repository=${streamcubeImage.repository}`,
        '--set',
        `image.tag=${streamcubeImage.tag}`,
        '--set',
        'image.pullPolicy=IfNotPresent',
        '--set',
        'crds.enabled=false',
        '--set',
        'operator.replicas=1',
        // One replica per replica set (the chart's default is two): a list is set whole.
        ...replicaSets.flatMap((rs, i) => [
          '--set',
          `receivers.replicaSets[${i}].name=${rs}`,
          '--set',
          `receivers.replicaSets[${i}].replicas=1`,
        ]),
        '--set',
        'receivers.dataVolume.size=1Gi',
        '--set',
        'deepStorage.size=1Gi',
      ],
      true,
    ),
  );
  // The operator runs the receivers from the chart's ReceiverPool once the install is done (helm
  // --wait does not wait for them): the demo cube is created when every set has its receiver.
  await step('waiting for the receivers the operator runs from the ReceiverPool', () =>
    waitForReceivers(kc, teardown),
  );
  teardown.add(`the release ${release} and namespace ${namespace}`, async () => {
    if (!reused) return; // the environment, node and all, stops after this
    await deleteCubeAndWait(kc, namespace, 'orders');
    await helm(['uninstall', release, '--wait', '--timeout', '3m']);
    await runCommand(kubectlPath, [
      '--kubeconfig',
      kubeconfig,
      'delete',
      'namespace',
      namespace,
      '--wait',
    ]);
  });
  teardown.check();

  const runDir = join(settings.stateDir, 'local');
  rmSync(runDir, { recursive: true, force: true });
  mkdirSync(runDir, { recursive: true });
  // The broker listens on the node network's host address: pods and this process both reach it.
  const demo = await startDemo(teardown, {
    kc,
    namespace,
    bootstrap: env.kafka.bootstrap,
    cubeBrokers: env.kafka.bootstrap,
    runDir,
  });
  const info: NodeStackInfo = {
    mode: 'node',
    pid: process.pid,
    namespace,
    release,
    cube: demo.cube,
    topic: demo.topic,
    kubeconfig,
    kubectl: kubectlPath,
    bootstrap: env.kafka.bootstrap,
    receiverPods: replicaSets.map((rs) => `${release}-${rs}-0`),
    tokenSecret: `${release}-read-token`,
    ledgerFile: demo.ledgerFile,
    startSeconds: Math.round((Date.now() - t0) / 100) / 10,
    ownsEnvironment: !reused,
  };
  writeFileSync(join(runDir, 'stack.json'), JSON.stringify(info, null, 2));
  const k = `${kubectlPath} -n ${namespace}`;
  console.log(`
streamcube is running on a one-node Kubernetes cluster (Helm release ${release}), started in ${info.startSeconds}s.
${describeEnvironment(env)}

  export KUBECONFIG=${kubeconfig}
  ${k} get pods,cube
  ${k} describe cube ${demo.cube}
  # one answer over the whole cube, live and committed, through the chart's query service, with
  # the read token (it can read, never change anything):
  ${k} get secret ${info.tokenSecret} -o jsonpath='{.data.token}' | base64 -d > ${runDir}/read-token
  ${k} port-forward service/${release}-query 18082:8082 &
  npm run -s streamcube -- query --server http://127.0.0.1:18082 --token-file ${runDir}/read-token -n ${namespace} --group-by country ${demo.cube}

A producer writes about ${Math.round(demo.perSecond)} events/s to topic '${demo.topic}' (${demo.partitions} partitions at mixed rates);
what it wrote so far is in ${demo.ledgerFile}.
Ctrl-C stops everything${reused ? ' it started (the environment from env:up keeps running)' : ', and removes the cluster with its data'}.
`);
  return info;
}

/** Until the receiver pod of each replica set is Ready (five minutes at most). */
async function waitForReceivers(kc: KubeConfig, teardown: Teardown): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  const deadline = Date.now() + 300_000;
  for (;;) {
    teardown.check();
    const pods = await core.listNamespacedPod({
      namespace,
      labelSelector: `streamcube.io/pool=${release}`,
    });
    const ready = new Set(
      pods.items
        .filter((p) => p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'))
        .map((p) => p.metadata?.name),
    );
    const missing = replicaSets.map((rs) => `${release}-${rs}-0`).filter((p) => !ready.has(p));
    if (missing.length === 0) return;
    if (Date.now() > deadline)
      throw new Error(`the receivers ${missing.join(', ')} are not Ready after 5 minutes`);
    await sleep(1000);
  }
}
