// The whole local environment (Kafka broker + Kubernetes control plane) as one unit: start,
// record in a state file, find again, stop. Used by `streamcube local`, jest's global set-up and
// `npm run env:up`.
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type KafkaBroker, brokerReportedVersion, startKafka } from './kafka.ts';
import { type ControlPlane, startControlPlane } from './controlplane.ts';
import { isAlive, stopService } from './processes.ts';
import { say } from './progress.ts';

export interface TestEnvironment {
  dir: string;
  kafka: KafkaBroker & { reportedVersion: string | undefined };
  kube: ControlPlane;
}

export const stateFileName = 'state.json';

/** Starts Kafka and the control plane side by side under `dir` and records them in its state file. */
export async function startEnvironment(dir: string): Promise<TestEnvironment> {
  mkdirSync(dir, { recursive: true });
  const [kafka, kube] = await Promise.allSettled([
    startKafka(join(dir, 'kafka')),
    startControlPlane(join(dir, 'kube')),
  ]);
  if (kafka.status === 'rejected' || kube.status === 'rejected') {
    // Leave nothing running behind a half-started environment.
    if (kafka.status === 'fulfilled') await stopService(kafka.value.pid);
    if (kube.status === 'fulfilled') await stopControlPlane(kube.value);
    throw kafka.status === 'rejected' ? kafka.reason : (kube as PromiseRejectedResult).reason;
  }
  const env: TestEnvironment = {
    dir,
    kafka: { ...kafka.value, reportedVersion: brokerReportedVersion(kafka.value) },
    kube: kube.value,
  };
  writeFileSync(join(dir, stateFileName), JSON.stringify(env, null, 2));
  return env;
}

async function stopControlPlane(kube: ControlPlane): Promise<void> {
  await stopService(kube.apiserver.pid);
  await stopService(kube.etcd.pid);
}

export async function stopEnvironment(env: TestEnvironment, removeData: boolean): Promise<void> {
  await Promise.all([stopService(env.kafka.pid), stopControlPlane(env.kube)]);
  rmSync(join(env.dir, stateFileName), { force: true });
  if (removeData) rmSync(env.dir, { recursive: true, force: true });
}

/** The environment recorded in `dir`, if every one of its processes is still running. */
export function findRunningEnvironment(dir: string): TestEnvironment | undefined {
  const file = join(dir, stateFileName);
  if (!existsSync(file)) return undefined;
  const env = JSON.parse(readFileSync(file, 'utf8')) as TestEnvironment;
  const pids = [env.kafka.pid, env.kube.etcd.pid, env.kube.apiserver.pid];
  return pids.every(isAlive) ? env : undefined;
}

export function describeEnvironment(env: TestEnvironment): string {
  return [
    `Kafka ${env.kafka.reportedVersion ?? env.kafka.version} broker at ${env.kafka.bootstrap} (log: ${env.kafka.logFile})`,
    `Kubernetes ${env.kube.version} API server at ${env.kube.server} (log: ${env.kube.apiserver.logFile}, etcd log: ${env.kube.etcd.logFile})`,
    `KUBECONFIG=${env.kube.kubeconfig}`,
  ].join('\n');
}

/** Environment variables through which tests and tools find a running environment. */
export function environmentVariables(env: TestEnvironment): Record<string, string> {
  return {
    STREAMCUBE_TEST_ENV: join(env.dir, stateFileName),
    STREAMCUBE_KAFKA_BROKERS: env.kafka.bootstrap,
    KUBECONFIG: env.kube.kubeconfig,
  };
}

export { say };
