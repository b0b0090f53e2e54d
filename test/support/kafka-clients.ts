// A suite's Kafka client of the test environment's broker, with an admin client and a producer
// connected in beforeAll and, in afterAll, disconnected along with the client's fetch session;
// and clients of brokers a test starts (and stops) itself, connected when asked.
import { type Admin, type Kafka, type Producer, logLevel } from 'kafkajs';
import { createKafka } from '../../src/kafka/client.ts';
import { closeFetchSession } from '../../src/kafka/fetch-session.ts';
import { testEnvironment } from '../env/connection.ts';

export interface KafkaClients {
  kafka: Kafka;
  /** Connected from beforeAll on. */
  readonly admin: Admin;
  readonly producer: Producer;
}

/** A client of the test broker, logging nothing. */
export function testKafka(clientId: string): Kafka {
  return createKafka({
    clientId,
    brokers: [testEnvironment().kafka.bootstrap],
    logLevel: logLevel.NOTHING,
  });
}

export function useKafkaClients(clientId: string): KafkaClients {
  const kafka = testKafka(clientId);
  let admin: Admin | undefined;
  let producer: Producer | undefined;
  beforeAll(async () => {
    admin = kafka.admin();
    await admin.connect();
    producer = kafka.producer();
    await producer.connect();
  });
  afterAll(async () => {
    await producer?.disconnect();
    await admin?.disconnect();
    await closeFetchSession(kafka);
  });
  return {
    kafka,
    get admin() {
      return admin!;
    },
    get producer() {
      return producer!;
    },
  };
}

/** A client of a broker and its admin and producer, connected. */
export interface ConnectedClients {
  kafka: Kafka;
  admin: Admin;
  producer: Producer;
}

/**
 * Clients of any broker, a test's own included (one it stops and starts again: after a restart a
 * test connects fresh ones, the first may still be backing off). Every one is disconnected in
 * afterAll.
 */
export function useBrokerClients(): (
  bootstrap: string,
  clientId: string,
) => Promise<ConnectedClients> {
  const connected: ConnectedClients[] = [];
  afterAll(async () => {
    await Promise.all(connected.flatMap((c) => [c.admin.disconnect(), c.producer.disconnect()]));
  });
  return async (bootstrap, clientId) => {
    const kafka = createKafka({ clientId, brokers: [bootstrap], logLevel: logLevel.NOTHING });
    const c = { kafka, admin: kafka.admin(), producer: kafka.producer() };
    connected.push(c);
    await Promise.all([c.admin.connect(), c.producer.connect()]);
    return c;
  };
}
