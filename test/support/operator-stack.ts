// A fixture for operator suites: a namespace of its own, receiver processes (one per replica set,
// or `replicas` each) made visible as Ready pods on loopback addresses allocated for the suite, a
// Kafka admin and producer, and the operator — started in beforeAll, stopped in afterAll with any
// other operator the suite started on the same Lease. The fields are set once beforeAll has run.
import { randomInt } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { logLevel, type Admin, type Kafka, type Producer } from 'kafkajs';
import type { CoreV1Event, KubeConfig } from '@kubernetes/client-node';
import { createKafka } from '../../src/kafka/client.ts';
import {
  type TestEnvironment,
  stateFileName,
  stopControlPlane,
} from '../../src/local/environment.ts';
import { type KafkaBroker, startKafka } from '../../src/local/kafka.ts';
import { freePort, stopService } from '../../src/local/processes.ts';
import {
  type ControlPlane,
  restartApiServer,
  startControlPlane,
} from '../../src/local/controlplane.ts';
import { adminKubeConfig, testEnvironment } from '../env/connection.ts';
import type { CubeAssignment, CubeAssignmentSpecInput } from '../../src/api/cube-assignment.ts';
import { testSchema } from './events.ts';
import {
  OperatorProcess,
  applyCrd,
  createNamespace,
  cubeApi,
  cubeEvents,
  setPodReady,
  startReceiverPod,
  waitForCube,
  waitForSettled,
} from './cluster.ts';
import { type ReceiverProcessOptions, ReceiverProcess } from './receiver-process.ts';
import { tempDir } from './scratch-dirs.ts';

export interface OperatorStack {
  env: TestEnvironment;
  kc: KubeConfig;
  kafka: Kafka;
  admin: Admin;
  /** A plain producer (not idempotent; useLoads gives loads their own). */
  producer: Producer;
  namespace: string;
  /** The receivers' admin token, the operator's. */
  token: string;
  /** The receivers' read token, the query server's. */
  readToken: string;
  /** The port every receiver listens on, each on a loopback address of its own (as pods do). */
  receiverPort: number;
  deepStorageDir: string;
  /** The operator started in beforeAll; unset with `operator: false`. */
  operator: OperatorProcess;
  /** Receiver `<rs>-0` of each replica set, by replica set. */
  receivers: Record<string, ReceiverProcess>;
  /** Every receiver `<rs>-<i>` of each replica set, in replica order, by replica set. */
  replicas: Record<string, ReceiverProcess[]>;
  /** The receiver of pod `name` (`rs-a-1`). */
  receiver(name: string): ReceiverProcess;
  /**
   * Creates the CubeAssignment `name` in the stack's namespace: `topic` of the stack's broker from
   * the earliest offsets, testSchema, and what `spec` adds (replicaSets, strategy) or replaces.
   */
  createCube(name: string, topic: string, spec: CubeSpecOptions): Promise<unknown>;
  /** waitForSettled of the cube `name` in the stack's namespace. */
  waitForSettled(
    name: string,
    check?: (cube: CubeAssignment) => boolean,
    timeoutMs?: number,
  ): Promise<CubeAssignment>;
  /** waitForCube of the cube `name` in the stack's namespace. */
  waitForCube(
    name: string,
    what: string,
    check: (cube: CubeAssignment) => boolean,
    timeoutMs?: number,
  ): Promise<CubeAssignment>;
  /** The Events of the cube `name` in the stack's namespace, oldest first. */
  cubeEvents(name: string): Promise<CoreV1Event[]>;
  /**
   * Starts one more operator on the same Lease (a candidate for leader); stopped in afterAll.
   * With `cubesIn`: an operator of the CubeAssignments of that namespace (its Lease there) that
   * finds its receivers in the stack's namespace (--receiver-namespace), as the Helm chart's do.
   * `args` are added after the stack's (a later flag wins: `--lease-duration=60s`, say).
   */
  startOperator(
    env?: NodeJS.ProcessEnv,
    cubesIn?: string,
    args?: string[],
    /** Its kubeconfig: the environment's admin unless given (one of a ServiceAccount, say). */
    kubeconfig?: string,
  ): Promise<OperatorProcess>;
  /**
   * Starts one more receiver in `replicaSet`, `<rs>-<n>` after the last, with its Ready pod: the
   * set scaled up, as a StatefulSet would do it. Appended to `replicas`; stopped in afterAll.
   */
  addReplica(replicaSet: string): Promise<ReceiverProcess>;
  /**
   * With `ownBroker`: stops the suite's broker, waits `downMs`, and starts it again on the same
   * ports and data, as an outage of the Kafka cluster is.
   */
  restartBroker?: (downMs: number) => Promise<void>;
  /**
   * With `ownControlPlane`: stops the suite's API server, waits `downMs`, and starts it again on
   * its ports, certs and etcd, as a control-plane restart is.
   */
  restartApiServer?: (downMs: number) => Promise<void>;
}

export type CubeSpecOptions = Pick<CubeAssignmentSpecInput, 'replicaSets'> &
  Partial<CubeAssignmentSpecInput>;

/** A loopback address of its own (127.0.0.0/8 is all loopback), unlikely to meet another suite's. */
export function loopbackAddress(): string {
  return `127.${randomInt(100, 250)}.${randomInt(0, 256)}.${randomInt(1, 255)}`;
}

export function useOperatorStack(options: {
  name: string;
  replicaSets: string[];
  /** Receivers per replica set, or by replica set; default 1. */
  replicas?: number | Record<string, number>;
  receiver?: Pick<ReceiverProcessOptions, 'idleTimeout' | 'flushInterval' | 'env' | 'tls'>;
  /** Environment added to one receiver's, by pod name (`rs-a-1`): a fault directory, say. */
  podEnv?: Record<string, NodeJS.ProcessEnv>;
  /**
   * Runs once the namespace exists, before any receiver starts (Secrets a receiver reads, say);
   * the environment it returns is added to every receiver's started in beforeAll.
   */
  prepare?: (stack: OperatorStack) => Promise<NodeJS.ProcessEnv | void>;
  /** false: no operator in beforeAll; the suite starts its own (`startOperator`). */
  operator?: boolean;
  /** Environment of the operator started in beforeAll (a fault point, say). */
  operatorEnv?: NodeJS.ProcessEnv;
  /** Flags added to every operator this stack starts. */
  operatorArgs?: string[];
  /** The kubeconfig of the operator started in beforeAll (the others use the environment's). */
  operatorKubeconfig?: string;
  /**
   * A Kafka broker of the suite's own (started in beforeAll, stopped in afterAll), which it may
   * restart (`restartBroker`) without touching other suites' broker.
   */
  ownBroker?: boolean;
  /**
   * An API server and etcd of the suite's own (started in beforeAll, stopped in afterAll), which it
   * may restart (`restartApiServer`) while the other suites of the run go on with the shared one.
   * The file's STREAMCUBE_TEST_ENV and KUBECONFIG name it from beforeAll on, so every operator,
   * receiver, kubectl and KubeConfig of the file uses it; `kc` is replaced then.
   */
  ownControlPlane?: boolean;
}): OperatorStack {
  const env = testEnvironment();
  const stack = {
    env,
    kc: adminKubeConfig(),
    kafka: createKafka({
      clientId: `${options.name}-test`,
      brokers: [env.kafka.bootstrap],
      logLevel: logLevel.NOTHING,
    }),
    token: `${options.name}-${Date.now()}-receiver-token`,
    readToken: `${options.name}-${Date.now()}-receiver-read-token`,
    deepStorageDir: tempDir(`${options.name}-deep`),
    receivers: {},
    replicas: {},
  } as OperatorStack;
  const operators: OperatorProcess[] = [];
  let receiverPort = 0;
  let preparedEnv: NodeJS.ProcessEnv = {};
  const startOperator = async (
    env: NodeJS.ProcessEnv = {},
    cubesIn?: string,
    args: string[] = [],
    kubeconfig?: string,
  ): Promise<OperatorProcess> => {
    const operator = new OperatorProcess({
      ...(kubeconfig ? { kubeconfig } : {}),
      namespace: cubesIn ?? stack.namespace,
      receiverToken: stack.token,
      receiverPort,
      args: [
        ...(options.operatorArgs ?? []),
        ...(cubesIn ? [`--receiver-namespace=${stack.namespace}`] : []),
        ...args,
      ],
    });
    operators.push(operator);
    await operator.start(env);
    return operator;
  };
  stack.startOperator = (env, cubesIn, args, kubeconfig) =>
    startOperator(env, cubesIn, args, kubeconfig);

  stack.addReplica = async (rs) => {
    const replicas = (stack.replicas[rs] ??= []);
    const name = `${rs}-${replicas.length}`;
    const receiver = await startReceiverPod(stack.kc, stack.namespace, {
      name,
      replicaSet: rs,
      ip: loopbackAddress(),
      port: receiverPort,
      token: stack.token,
      readToken: stack.readToken,
      deepStorageDir: stack.deepStorageDir,
      ...options.receiver,
      env: { ...options.receiver?.env, ...preparedEnv, ...options.podEnv?.[name] },
    });
    replicas.push(receiver);
    return receiver;
  };

  stack.receiver = (name) => {
    const found = Object.values(stack.replicas)
      .flat()
      .find((r) => r.options.id === name);
    if (!found) throw new Error(`no receiver ${name} in ${options.name}'s stack`);
    return found;
  };

  stack.createCube = (name, topic, spec) =>
    cubeApi(stack.kc).create(stack.namespace, name, {
      source: { brokers: [stack.env.kafka.bootstrap], topic, startingOffsets: 'earliest' },
      schema: testSchema,
      ...spec,
    });

  stack.waitForSettled = (name, check, timeoutMs) =>
    waitForSettled(stack.kc, stack.namespace, name, check, timeoutMs);
  stack.waitForCube = (name, what, check, timeoutMs) =>
    waitForCube(stack.kc, stack.namespace, name, what, check, timeoutMs);
  stack.cubeEvents = (name) => cubeEvents(stack.kc, stack.namespace, name);

  let ownKube: ControlPlane | undefined;
  let broker: KafkaBroker | undefined;
  beforeAll(async () => {
    if (options.ownControlPlane) {
      const dir = tempDir(`${options.name}-kube`);
      const stateFile = join(dir, stateFileName);
      /** The running API server, in the state file (kubectl, operators started later) and env. */
      const record = (kube: ControlPlane): void => {
        ownKube = kube;
        writeFileSync(stateFile, JSON.stringify({ ...env, kube }, null, 2));
        stack.env = { ...stack.env, kube };
      };
      record(await startControlPlane(dir));
      process.env.STREAMCUBE_TEST_ENV = stateFile;
      process.env.KUBECONFIG = ownKube!.kubeconfig;
      stack.kc = adminKubeConfig();
      stack.restartApiServer = async (downMs) => record(await restartApiServer(ownKube!, downMs));
    }
    if (options.ownBroker) {
      const dir = join(tempDir(`${options.name}-kafka`), 'kafka');
      broker = await startKafka(dir);
      stack.env = { ...stack.env, kafka: { ...env.kafka, bootstrap: broker.bootstrap } };
      stack.kafka = createKafka({
        clientId: `${options.name}-test`,
        brokers: [broker.bootstrap],
        logLevel: logLevel.NOTHING,
      });
      stack.restartBroker = async (downMs) => {
        const before = broker!;
        await stopService(before.pid);
        broker = undefined;
        await sleep(downMs);
        broker = await startKafka(dir, before.version, before.ports);
      };
    }
    stack.admin = stack.kafka.admin();
    stack.producer = stack.kafka.producer();
    await Promise.all([stack.admin.connect(), stack.producer.connect(), applyCrd()]);
    stack.namespace = await createNamespace(stack.kc, options.name);
    preparedEnv = (await options.prepare?.(stack)) ?? {};
    receiverPort = await freePort();
    stack.receiverPort = receiverPort;
    for (const rs of options.replicaSets) {
      const count = typeof options.replicas === 'object' ? options.replicas[rs] : options.replicas;
      for (let i = 0; i < (count ?? 1); i++) await stack.addReplica(rs);
      stack.receivers[rs] = stack.replicas[rs]![0]!;
    }
    if (options.operator === false) return;
    stack.operator = await startOperator(
      options.operatorEnv,
      undefined,
      [],
      options.operatorKubeconfig,
    );
  });

  afterAll(async () => {
    for (const operator of operators) await operator.kill('SIGTERM');
    for (const r of Object.values(stack.replicas).flat()) await r.stop();
    await Promise.all([stack.admin?.disconnect(), stack.producer?.disconnect()]);
    if (broker) await stopService(broker.pid);
    if (ownKube) await stopControlPlane(ownKube);
  });

  return stack;
}

/** kill -9, and the pod NotReady: the operator's phases leave it out. */
export async function takeDown(stack: OperatorStack, r: ReceiverProcess): Promise<void> {
  await setPodReady(stack.kc, stack.namespace, r.options.id, r.options.host!, false);
  await r.kill('SIGKILL');
}

/** Restarted on its volume, Ready again. */
export async function bringBack(stack: OperatorStack, r: ReceiverProcess): Promise<void> {
  await r.start();
  await setPodReady(stack.kc, stack.namespace, r.options.id, r.options.host!, true);
}
