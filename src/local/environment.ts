// The whole local environment (Kafka broker + Kubernetes control plane) as one unit: start,
// record in a state file, find again, stop. Used by `streamcube local`, jest's global set-up and
// `npm run env:up`.
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type KafkaBroker, brokerReportedVersion, startKafka } from './kafka.ts';
import { type ControlPlane, type ControlPlaneOptions, startControlPlane } from './controlplane.ts';
import { isAlive, stopService } from './processes.ts';
import { say } from './progress.ts';
import { nodeNetwork } from './settings.ts';
import { type LocalNode, createNodeHost, prepareNode, startNode, stopNode } from './node/node.ts';
import { undoHostChanges } from './node/host-changes.ts';
import { removeNodeNetwork } from './node/network.ts';

export interface TestEnvironment {
  dir: string;
  kafka: KafkaBroker & { reportedVersion: string | undefined };
  kube: ControlPlane;
  /** The one-node cluster, when started with `node: true`. */
  node?: LocalNode;
}

export interface EnvironmentOptions {
  /**
   * Also run a real node (kubelet, containerd, kube-proxy, controller-manager, scheduler). The API
   * server and the broker then listen on the node network's host address instead of loopback.
   */
  node?: boolean;
}

export const stateFileName = 'state.json';

/** Starts Kafka and the control plane side by side under `dir` and records them in its state file. */
export async function startEnvironment(
  dir: string,
  options: EnvironmentOptions = {},
): Promise<TestEnvironment> {
  mkdirSync(dir, { recursive: true });
  // Builds first, host changes after: a failed build leaves the host as it was.
  const prepared = options.node ? await prepareNode() : undefined;
  const host = options.node ? await createNodeHost() : undefined;
  const address = options.node ? nodeNetwork.hostAddress : '127.0.0.1';
  const planeOptions: ControlPlaneOptions = options.node
    ? {
        address,
        serviceCidr: nodeNetwork.serviceCidr,
        kubernetesServiceAddress: nodeNetwork.kubernetesServiceAddress,
        serviceAccountAdmission: true,
      }
    : {};
  const [kafka, kube] = await Promise.allSettled([
    startKafka(join(dir, 'kafka'), undefined, undefined, address),
    startControlPlane(join(dir, 'kube'), planeOptions),
  ]);
  if (kafka.status === 'rejected' || kube.status === 'rejected') {
    // Leave nothing running behind a half-started environment.
    if (kafka.status === 'fulfilled') await stopService(kafka.value.pid);
    if (kube.status === 'fulfilled') await stopControlPlane(kube.value);
    if (host) {
      await removeNodeNetwork();
      await undoHostChanges(host, join(dir, 'node'));
    }
    throw kafka.status === 'rejected' ? kafka.reason : (kube as PromiseRejectedResult).reason;
  }
  const env: TestEnvironment = {
    dir,
    kafka: { ...kafka.value, reportedVersion: brokerReportedVersion(kafka.value) },
    kube: kube.value,
  };
  if (prepared && host) {
    try {
      // startNode stops what it started and undoes the host changes when it fails.
      env.node = await startNode(join(dir, 'node'), kube.value, host, prepared);
    } catch (error) {
      await Promise.all([stopService(kafka.value.pid), stopControlPlane(kube.value)]);
      throw error;
    }
  }
  writeFileSync(join(dir, stateFileName), JSON.stringify(env, null, 2));
  return env;
}

/** Stops the API server, then its etcd. */
export async function stopControlPlane(kube: ControlPlane): Promise<void> {
  await stopService(kube.apiserver.pid);
  await stopService(kube.etcd.pid);
}

export async function stopEnvironment(env: TestEnvironment, removeData: boolean): Promise<void> {
  if (env.node) await stopNode(env.node);
  await Promise.all([stopService(env.kafka.pid), stopControlPlane(env.kube)]);
  rmSync(join(env.dir, stateFileName), { force: true });
  if (removeData) rmSync(env.dir, { recursive: true, force: true });
}

/** The environment recorded in `dir`'s state file, running or not. */
export function recordedEnvironment(dir: string): TestEnvironment | undefined {
  const file = join(dir, stateFileName);
  return existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as TestEnvironment) : undefined;
}

/** The environment recorded in `dir`, if every one of its processes is still running. */
export function findRunningEnvironment(dir: string): TestEnvironment | undefined {
  const env = recordedEnvironment(dir);
  if (!env) return undefined;
  const pids = [env.kafka.pid, env.kube.etcd.pid, env.kube.apiserver.pid];
  if (env.node) pids.push(env.node.services.containerd.pid, env.node.services.kubelet?.pid ?? 0);
  return pids.every(isAlive) ? env : undefined;
}

export function describeEnvironment(env: TestEnvironment): string {
  return [
    `Kafka ${env.kafka.reportedVersion ?? env.kafka.version} broker at ${env.kafka.bootstrap} (log: ${env.kafka.logFile})`,
    ...(env.kafka.auth
      ? [
          `Kafka SASL_SSL listener at ${env.kafka.auth.bootstrap} (CA: ${env.kafka.auth.caFile}; users: ${Object.entries(
            env.kafka.auth.users,
          )
            .map(([m, u]) => `${u.username} (${m})`)
            .join(', ')}; passwords in the state file)`,
        ]
      : []),
    `Kubernetes ${env.kube.version} API server at ${env.kube.server} (log: ${env.kube.apiserver.logFile}, etcd log: ${env.kube.etcd.logFile})`,
    ...(env.node
      ? [
          `node ${env.node.name} (${env.node.nodeAddress}, pods ${env.node.podCidr}; logs in ${env.node.dir})`,
        ]
      : []),
    `KUBECONFIG=${env.kube.kubeconfig}`,
  ].join('\n');
}

/** Environment variables through which tests and tools find a running environment. */
export function environmentVariables(env: TestEnvironment): Record<string, string> {
  return {
    STREAMCUBE_TEST_ENV: join(env.dir, stateFileName),
    STREAMCUBE_KAFKA_BROKERS: env.kafka.bootstrap,
    ...(env.kafka.auth
      ? {
          STREAMCUBE_KAFKA_SASL_SSL_BROKERS: env.kafka.auth.bootstrap,
          STREAMCUBE_KAFKA_CA_FILE: env.kafka.auth.caFile,
        }
      : {}),
    KUBECONFIG: env.kube.kubeconfig,
  };
}

export { say };
