// One receiver process and a kafkajs admin for a suite (or a describe block): started before its
// tests, stopped after them, so that suites do not copy the same beforeAll/afterAll.
import type { Admin, Kafka } from 'kafkajs';
import { testEnvironment } from '../env/connection.ts';
import type { TestEnvironment } from '../../src/local/environment.ts';
import { testKafka } from './kafka-clients.ts';
import { ReceiverProcess, type ReceiverProcessOptions, tempDir } from './receiver-process.ts';

export interface ReceiverFixture {
  readonly env: TestEnvironment;
  readonly kafka: Kafka;
  /** Connected for the tests of the block. */
  readonly admin: Admin;
  /** Started (ready) for the tests of the block. */
  readonly receiver: ReceiverProcess;
}

export function useReceiver(
  options: Pick<ReceiverProcessOptions, 'id'> & Partial<ReceiverProcessOptions>,
): ReceiverFixture {
  const env = testEnvironment();
  const kafka = testKafka(`${options.id}-test`);
  let admin: Admin | undefined;
  let receiver: ReceiverProcess | undefined;
  beforeAll(async () => {
    admin = kafka.admin();
    await admin.connect();
    receiver = new ReceiverProcess({
      replicaSet: 'rs-a',
      deepStorageDir: tempDir('deep'),
      ...options,
    });
    await receiver.start();
  });
  afterAll(async () => {
    await receiver?.stop();
    await admin?.disconnect();
  });
  const started = <T>(what: string, value: T | undefined): T => {
    if (value === undefined) throw new Error(`${what} is used outside the tests of its fixture`);
    return value;
  };
  return {
    env,
    kafka,
    get admin() {
      return started('admin', admin);
    },
    get receiver() {
      return started(`receiver ${options.id}`, receiver);
    },
  };
}
