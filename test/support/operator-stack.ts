// A fixture for operator suites: a namespace of its own, one receiver process per replica set made
// visible as a Ready pod on a loopback address allocated for the suite, and the operator — started
// in beforeAll, stopped in afterAll. The fields are set once beforeAll has run.
import { randomInt } from 'node:crypto';
import { logLevel, type Admin, type Kafka } from 'kafkajs';
import type { KubeConfig } from '@kubernetes/client-node';
import { createKafka } from '../../src/kafka/client.ts';
import { type TestEnvironment } from '../../src/local/environment.ts';
import { freePort } from '../../src/local/processes.ts';
import { adminKubeConfig, testEnvironment } from '../env/connection.ts';
import { OperatorProcess, applyCrd, createNamespace, startReceiverPod } from './cluster.ts';
import { type ReceiverProcessOptions, ReceiverProcess, tempDir } from './receiver-process.ts';

export interface OperatorStack {
  env: TestEnvironment;
  kc: KubeConfig;
  kafka: Kafka;
  admin: Admin;
  namespace: string;
  token: string;
  deepStorageDir: string;
  operator: OperatorProcess;
  /** Receiver `<rs>-0` of each replica set, by replica set. */
  receivers: Record<string, ReceiverProcess>;
}

/** A loopback address of its own (127.0.0.0/8 is all loopback), unlikely to meet another suite's. */
function loopbackAddress(): string {
  return `127.${randomInt(100, 250)}.${randomInt(0, 256)}.${randomInt(1, 255)}`;
}

export function useOperatorStack(options: {
  name: string;
  replicaSets: string[];
  receiver?: Pick<ReceiverProcessOptions, 'idleTimeout' | 'flushInterval' | 'env'>;
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
    deepStorageDir: tempDir(`${options.name}-deep`),
    receivers: {},
  } as OperatorStack;

  beforeAll(async () => {
    stack.admin = stack.kafka.admin();
    await Promise.all([stack.admin.connect(), applyCrd()]);
    stack.namespace = await createNamespace(stack.kc, options.name);
    const port = await freePort();
    for (const rs of options.replicaSets) {
      stack.receivers[rs] = await startReceiverPod(stack.kc, stack.namespace, {
        name: `${rs}-0`,
        replicaSet: rs,
        ip: loopbackAddress(),
        port,
        token: stack.token,
        deepStorageDir: stack.deepStorageDir,
        ...options.receiver,
      });
    }
    stack.operator = new OperatorProcess({
      namespace: stack.namespace,
      receiverToken: stack.token,
      receiverPort: port,
    });
    await stack.operator.start();
  });

  afterAll(async () => {
    await stack.operator?.kill('SIGTERM');
    for (const r of Object.values(stack.receivers)) await r.stop();
    await stack.admin?.disconnect();
  });

  return stack;
}
