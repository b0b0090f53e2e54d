// The Kubernetes side of operator tests: the CRD applied with kubectl, a namespace per test,
// receiver pods made Ready by writing their status (no kubelet runs), and the operator as a
// real `streamcube operator` process.
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { randomBytes, randomUUID } from 'node:crypto';
import {
  ApiException,
  CoordinationV1Api,
  CoreV1Api,
  type CoreV1Event,
  type KubeConfig,
  Watch,
} from '@kubernetes/client-node';
import { type CubeAssignment, group, plural, version } from '../../src/api/cube-assignment.ts';
import type { Condition } from '../../src/api/conditions.ts';
import {
  applyCrdWith,
  cubeApi,
  kubectlWith,
  receiverPod,
  setPodReady,
} from '../../src/local/cluster.ts';
import { freePort } from '../../src/local/processes.ts';
import { benchNodeArgs } from './bench-node-args.ts';
import { testEnvironment } from '../env/connection.ts';
import { waitFor } from './wait.ts';
import { ReceiverProcess, type ReceiverProcessOptions } from './receiver-process.ts';
import { operatorEnvironment, operatorNodeOptions } from '../../src/operator/node-options.ts';
import { processExited, processRunning, processStopped } from './child-process-state.ts';
import { tempDir } from './scratch-dirs.ts';

export { cubeApi, receiverPod, setPodReady };

const repoRoot = resolve(import.meta.dirname, '../..');
const cliPath = join(repoRoot, 'src/cli.ts');

export function kubectl(...args: string[]): Promise<string> {
  return kubectlWith(testEnvironment().kube.kubeconfig, ...args);
}

export function applyCrd(): Promise<void> {
  return applyCrdWith(testEnvironment().kube.kubeconfig);
}

export async function createNamespace(kc: KubeConfig, prefix: string): Promise<string> {
  const name = `${prefix}-${randomUUID().slice(0, 8)}`;
  await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name } } });
  return name;
}

/** A receiver process on `ip` and the Ready pod standing for it, as one StatefulSet pod would be. */
export async function startReceiverPod(
  kc: KubeConfig,
  namespace: string,
  o: {
    name: string;
    replicaSet: string;
    ip: string;
    port: number;
    token: string;
    readToken?: string;
    tls?: ReceiverProcessOptions['tls'];
    deepStorageDir: string;
    idleTimeout?: string;
    flushInterval?: string;
    env?: NodeJS.ProcessEnv;
    /** The namespace of the cubes its client names; default: the pod's. */
    cubeNamespace?: string;
  },
): Promise<ReceiverProcess> {
  const receiver = new ReceiverProcess({
    namespace: o.cubeNamespace ?? namespace,
    id: o.name,
    replicaSet: o.replicaSet,
    deepStorageDir: o.deepStorageDir,
    host: o.ip,
    port: o.port,
    token: o.token,
    ...(o.readToken ? { readToken: o.readToken } : {}),
    ...(o.tls ? { tls: o.tls } : {}),
    idleTimeout: o.idleTimeout,
    flushInterval: o.flushInterval,
    ...(o.env ? { env: o.env } : {}),
  });
  await receiver.start();
  await receiverPod(kc, namespace, o.name, o.replicaSet, o.ip);
  return receiver;
}

/** Waits until the cube is gone from the API server (its finalizer ran), for up to `timeoutMs`. */
export async function waitForCubeGone(
  kc: KubeConfig,
  namespace: string,
  name: string,
  timeoutMs = 90_000,
): Promise<void> {
  await waitFor(
    `cube ${namespace}/${name} gone`,
    async () => {
      try {
        await cubeApi(kc).get(namespace, name);
        return false;
      } catch (error) {
        if (error instanceof ApiException && error.code === 404) return true;
        throw error;
      }
    },
    timeoutMs,
    200,
  );
}

/** Waits until the cube has no reassign in flight, is Ready, and its assignment satisfies `check`. */
export async function waitForSettled(
  kc: KubeConfig,
  namespace: string,
  name: string,
  check: (cube: CubeAssignment) => boolean = () => true,
  timeoutMs = 90_000,
): Promise<CubeAssignment> {
  const api = cubeApi(kc);
  return waitFor(
    `cube ${namespace}/${name} settled`,
    async () => {
      const cube = await api.get(namespace, name);
      const ready = cube.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True';
      return !cube.status?.reassign &&
        ready &&
        cube.status?.observedGeneration === cube.metadata?.generation &&
        check(cube)
        ? cube
        : undefined;
    },
    timeoutMs,
    200,
  );
}

/** The holder of a coordination.k8s.io Lease ('' when released), or undefined when there is none. */
export async function leaseHolder(
  kc: KubeConfig,
  namespace: string,
  name: string,
): Promise<string | undefined> {
  try {
    const lease = await kc
      .makeApiClient(CoordinationV1Api)
      .readNamespacedLease({ name, namespace });
    return lease.spec?.holderIdentity ?? '';
  } catch (error) {
    if (error instanceof ApiException && error.code === 404) return undefined;
    throw error;
  }
}

/**
 * When `identity` took the Lease (its acquireTime, written by the holder itself): the moment a
 * new leader's own waits start from, however long the takeover took on a loaded machine.
 */
export async function leaseAcquiredAt(
  kc: KubeConfig,
  namespace: string,
  name: string,
  identity: string,
): Promise<number> {
  const lease = await kc.makeApiClient(CoordinationV1Api).readNamespacedLease({ name, namespace });
  if (lease.spec?.holderIdentity !== identity || !lease.spec.acquireTime)
    throw new Error(
      `lease ${namespace}/${name} is held by '${lease.spec?.holderIdentity ?? ''}', not ${identity}`,
    );
  return new Date(lease.spec.acquireTime).getTime();
}

export function conditionOf(cube: CubeAssignment, type: string): Condition | undefined {
  return cube.status?.conditions?.find((c) => c.type === type);
}

/** Polls the cube until `check` holds; returns the cube that satisfied it. */
export async function waitForCube(
  kc: KubeConfig,
  namespace: string,
  name: string,
  what: string,
  check: (cube: CubeAssignment) => boolean,
  timeoutMs = 60_000,
): Promise<CubeAssignment> {
  const api = cubeApi(kc);
  return waitFor(
    `cube ${namespace}/${name}: ${what}`,
    async () => {
      const cube = await api.get(namespace, name);
      return check(cube) ? cube : undefined;
    },
    timeoutMs,
    200,
  );
}

/** One version of a cube as a watch delivered it, with when it arrived. */
export interface SeenVersion {
  type: 'ADDED' | 'MODIFIED';
  cube: CubeAssignment;
  at: number;
}

/**
 * Every version of the cube written from now until `stop()`, as the API server's watch delivers
 * them (each write one event, in order), not as a poll samples them: a phase the operator holds
 * for less than a poll's interval is seen all the same.
 */
export async function recordVersions(
  kc: KubeConfig,
  namespace: string,
  name: string,
  /** From after this resourceVersion (the watch's own); from the cube as it is when not given. */
  since?: string,
): Promise<{ versions: SeenVersion[]; stop: () => void; failure: () => unknown }> {
  const versions: SeenVersion[] = [];
  let failure: unknown;
  let stopped = false;
  let request: { abort: () => void } | undefined;
  // The API server may end a watch at any time (its request timeout, a busy machine): the
  // recording goes on from the last version seen, so no version in between is missed. A resume
  // the server can no longer serve (410 Gone) is a failure, not a gap.
  let lastVersion = since;
  const watch = async (): Promise<void> => {
    request = await new Watch(kc).watch(
      `/apis/${group}/${version}/namespaces/${namespace}/${plural}`,
      {
        fieldSelector: `metadata.name=${name}`,
        ...(lastVersion ? { resourceVersion: lastVersion } : {}),
      },
      (type: string, object: CubeAssignment | { code?: number; message?: string }) => {
        if (type === 'ERROR') {
          failure = new Error(`the watch failed: ${JSON.stringify(object)}`);
          return;
        }
        if (type !== 'ADDED' && type !== 'MODIFIED') return;
        const cube = object as CubeAssignment;
        lastVersion = cube.metadata?.resourceVersion ?? lastVersion;
        versions.push({ type, cube, at: Date.now() });
      },
      (error: unknown) => {
        // An abort by stop() ends the watch with an AbortError: not a failure.
        if (stopped || (error instanceof Error && error.name === 'AbortError')) return;
        if (error) failure = error;
        else if (failure === undefined)
          watch().catch((e: unknown) => {
            failure = e;
          });
      },
    );
  };
  await watch();
  return {
    versions,
    stop: () => {
      stopped = true;
      request?.abort();
    },
    failure: () => failure,
  };
}

/** The core/v1 Events whose involved object is the cube, oldest first. */
export async function cubeEvents(
  kc: KubeConfig,
  namespace: string,
  name: string,
): Promise<CoreV1Event[]> {
  const list = await kc.makeApiClient(CoreV1Api).listNamespacedEvent({
    namespace,
    fieldSelector: `involvedObject.name=${name}`,
  });
  return list.items.sort(
    (a, b) => new Date(a.firstTimestamp ?? 0).getTime() - new Date(b.firstTimestamp ?? 0).getTime(),
  );
}

export interface OperatorProcessOptions {
  namespace: string;
  receiverToken: string;
  receiverPort: number;
  leaseName?: string;
  /** More flags, after the defaults (a later flag wins). */
  args?: string[];
  /** The CLI to run: src/cli.ts (default), or a compiled dist/cli.js as the image runs it. */
  cli?: string;
  /** Its kubeconfig: the environment's unless set (one through a PausableApiProxy, say). */
  kubeconfig?: string;
}

/** `streamcube operator` as a child process, with short lease timings for tests. */
export class OperatorProcess {
  readonly options: OperatorProcessOptions;
  readonly logFile: string;
  readonly identity = `op-${randomBytes(3).toString('hex')}`;
  child: ChildProcess | undefined;
  port = 0;
  /** The file the operator reads the receivers' token from; rewrite it to rotate the token. */
  readonly tokenFile: string;

  constructor(options: OperatorProcessOptions) {
    this.options = options;
    const dir = tempDir('operator');
    this.logFile = join(dir, 'operator.log');
    this.tokenFile = join(dir, 'receiver-token');
    writeFileSync(this.tokenFile, `${options.receiverToken}\n`);
  }

  async start(env: NodeJS.ProcessEnv = {}): Promise<void> {
    this.port = await freePort();
    const log = openSync(this.logFile, 'a');
    this.child = spawn(
      process.execPath,
      [
        ...operatorNodeOptions,
        ...benchNodeArgs('BENCH_OPERATOR_NODE_ARGS'),
        this.options.cli ?? cliPath,
        'operator',
        `--kubeconfig=${this.options.kubeconfig ?? testEnvironment().kube.kubeconfig}`,
        `--namespace=${this.options.namespace}`,
        `--receiver-token-file=${this.tokenFile}`,
        `--receiver-port=${this.options.receiverPort}`,
        '--host=127.0.0.1',
        `--port=${this.port}`,
        `--identity=${this.identity}`,
        `--lease-namespace=${this.options.namespace}`,
        `--lease-name=${this.options.leaseName ?? 'streamcube-operator'}`,
        '--lease-duration=4s',
        '--renew-deadline=3s',
        '--retry-period=500ms',
        '--phase-timeout=30s',
        '--drain-timeout=20s',
        '--resync=1s',
        // Receivers on loopback, plain HTTP, unless a suite gives their CA (HTTPS).
        ...((this.options.args ?? []).some((a) => a.startsWith('--receiver-ca-file'))
          ? []
          : ['--receiver-plain-http']),
        ...(this.options.args ?? []),
      ],
      { stdio: ['ignore', log, log], env: { ...process.env, ...operatorEnvironment, ...env } },
    );
    closeSync(log);
    try {
      await waitFor(
        `operator ${this.identity} ready`,
        async () => {
          if (this.child?.exitCode !== null || this.child.signalCode !== null)
            throw new Error(`operator exited; see ${this.logFile}`);
          const answer = await fetch(`http://127.0.0.1:${this.port}/readyz`);
          if (!answer.ok) throw new Error(`/readyz: ${answer.status} ${await answer.text()}`);
          return true;
        },
        30_000,
      );
    } catch (error) {
      // Say why in the test's output: a CI run keeps nothing else of the operator's log.
      const tail = readFileSync(this.logFile, 'utf8').trimEnd().split('\n').slice(-15);
      throw new Error(`${(error as Error).message}; its log ends:\n${tail.join('\n')}`, {
        cause: error,
      });
    }
  }

  exited(): Promise<void> {
    return processExited(this.child);
  }

  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    const exited = this.exited();
    const stopped = this.stopped;
    this.child?.kill(signal);
    // A stopped process acts on any signal but SIGKILL only once continued.
    if (stopped && signal !== 'SIGKILL') this.child?.kill('SIGCONT');
    await exited;
  }

  /** Waits for the process to end by itself (at a fault point, say); fails after the deadline. */
  async waitForExit(timeoutMs = 60_000): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () =>
          reject(
            new Error(
              `operator ${this.identity} still running after ${timeoutMs} ms; see ${this.logFile}`,
            ),
          ),
        timeoutMs,
      );
    });
    try {
      await Promise.race([this.exited(), deadline]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** The signal that ended the process (SIGKILL after a fault point), or null. */
  get exitSignal(): NodeJS.Signals | null {
    return this.child?.signalCode ?? null;
  }

  async metrics(): Promise<string> {
    return (await fetch(`http://127.0.0.1:${this.port}/metrics`)).text();
  }

  /** True while the process is stopped (SIGSTOP, from outside or at a fault point). */
  get stopped(): boolean {
    return processStopped(this.child);
  }

  /** True while the process has neither exited nor been killed. */
  get alive(): boolean {
    return processRunning(this.child);
  }

  /** Reconciles this process has run, all results summed (`controller_runtime_reconcile_total`). */
  async reconciles(): Promise<number> {
    let total = 0;
    for (const line of (await this.metrics()).split('\n')) {
      const match = /^controller_runtime_reconcile_total\{[^}]*\} (\S+)$/.exec(line);
      if (match) total += Number(match[1]);
    }
    return total;
  }

  /** What the process wrote to stdout and stderr so far. */
  log(): string {
    return readFileSync(this.logFile, 'utf8');
  }
}

/**
 * The operator's own tiling report, once an observation at rest wrote it: every partition row
 * says how far it is handed off, and no condition says the replicas' offsets do not tile. On a
 * timeout the error tells what the status said last.
 */
export function waitForTilingReported(
  kc: KubeConfig,
  namespace: string,
  name: string,
  timeoutMs = 60_000,
): Promise<CubeAssignment> {
  const api = cubeApi(kc);
  return waitFor(
    `cube ${namespace}/${name}: every partition handed off to some offset, and no OffsetsNotTiled`,
    async () => {
      const cube = await api.get(namespace, name);
      const rows = cube.status?.partitions ?? [];
      const notTiled = (cube.status?.conditions ?? []).find((c) => c.reason === 'OffsetsNotTiled');
      if (rows.length > 0 && rows.every((p) => p.handedOffTo !== undefined) && !notTiled)
        return cube;
      throw new Error(
        `partitions ${JSON.stringify(rows.map((p) => [p.partition, p.handedOffTo ?? null]))}` +
          (notTiled ? `; ${notTiled.message}` : ''),
      );
    },
    timeoutMs,
    200,
  );
}
