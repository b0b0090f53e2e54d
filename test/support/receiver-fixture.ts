// Receiver processes and a kafkajs admin and producer for a suite (or a describe block): started
// before its tests, stopped after them, so that suites do not copy the same beforeAll/afterAll.
import type { Admin, Kafka, Producer } from 'kafkajs';
import { testEnvironment } from '../env/connection.ts';
import type { TestEnvironment } from '../../src/local/environment.ts';
import { useKafkaClients } from './kafka-clients.ts';
import { ReceiverProcess, type ReceiverProcessOptions } from './receiver-process.ts';
import { tempDir } from './scratch-dirs.ts';

/** A receiver's options: its id, the rest defaulting to replica set rs-a and a deep storage of its own. */
export type ReceiverFixtureOptions = Pick<ReceiverProcessOptions, 'id'> &
  Partial<ReceiverProcessOptions>;

export interface ReceiversFixture {
  readonly env: TestEnvironment;
  readonly kafka: Kafka;
  /** Connected for the tests of the block. */
  readonly admin: Admin;
  /** Connected for the tests of the block. */
  readonly producer: Producer;
  /** Started (ready) for the tests of the block, in the order given. */
  readonly receivers: ReceiverProcess[];
  /**
   * A receiver the test starts (and kills, restarts) itself, with the same defaults; stopped
   * after the tests of the block.
   */
  readonly newReceiver: (options: ReceiverFixtureOptions) => ReceiverProcess;
}

export interface ReceiverFixture extends ReceiversFixture {
  /** Started (ready) for the tests of the block. */
  readonly receiver: ReceiverProcess;
}

const started = <T>(what: string, value: T | undefined): T => {
  if (value === undefined) throw new Error(`${what} is used outside the tests of its fixture`);
  return value;
};

/** Receivers started before the tests of the block (none: the tests start their own). */
export function useReceivers(
  clientId: string,
  list: ReceiverFixtureOptions[] = [],
): ReceiversFixture {
  const env = testEnvironment();
  const clients = useKafkaClients(`${clientId}-test`);
  const all: ReceiverProcess[] = [];
  const receivers: ReceiverProcess[] = [];
  const newReceiver = (options: ReceiverFixtureOptions): ReceiverProcess => {
    const receiver = new ReceiverProcess({
      replicaSet: 'rs-a',
      deepStorageDir: tempDir(`deep-${options.id}`),
      ...options,
    });
    all.push(receiver);
    return receiver;
  };
  beforeAll(async () => {
    receivers.push(...list.map(newReceiver));
    await Promise.all(receivers.map((r) => r.start()));
  });
  afterAll(async () => {
    await Promise.all(all.map((r) => r.stop()));
  });
  return {
    env,
    kafka: clients.kafka,
    get admin() {
      return started('admin', clients.admin);
    },
    get producer() {
      return started('producer', clients.producer);
    },
    receivers,
    newReceiver,
  };
}

export function useReceiver(options: ReceiverFixtureOptions): ReceiverFixture {
  const fixture = useReceivers(options.id, [options]);
  return {
    env: fixture.env,
    kafka: fixture.kafka,
    get admin() {
      return fixture.admin;
    },
    get producer() {
      return fixture.producer;
    },
    receivers: fixture.receivers,
    newReceiver: fixture.newReceiver,
    get receiver() {
      return started(`receiver ${options.id}`, fixture.receivers[0]);
    },
  };
}
