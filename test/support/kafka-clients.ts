// A suite's Kafka client of the test environment's broker, with an admin client and a producer
// connected in beforeAll and, in afterAll, disconnected along with the client's fetch session.
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
