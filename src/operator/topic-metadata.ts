// What the operator asks Kafka: the topic's partitions and the offsets new partitions start from.
// One admin client per broker list, shared by every cube on those brokers.
import type { Admin, Kafka } from 'kafkajs';
import { createKafka } from '../kafka/client.ts';

export interface TopicSource {
  brokers: string[];
  topic: string;
  startingOffsets: 'earliest' | 'latest';
}

export class TopicMetadata {
  private readonly admins = new Map<string, Promise<Admin>>();
  private readonly clientId: string;

  constructor(clientId: string) {
    this.clientId = clientId;
  }

  private admin(brokers: string[]): Promise<Admin> {
    const key = brokers.join(',');
    let admin = this.admins.get(key);
    if (!admin) {
      const kafka: Kafka = createKafka({ clientId: this.clientId, brokers, retry: { retries: 2 } });
      const client = kafka.admin();
      admin = client.connect().then(() => client);
      admin.catch(() => this.admins.delete(key));
      this.admins.set(key, admin);
    }
    return admin;
  }

  /** The topic's partition numbers, or undefined when the topic does not exist. */
  async partitions(source: TopicSource): Promise<number[] | undefined> {
    const admin = await this.admin(source.brokers);
    const topics = await admin.listTopics();
    if (!topics.includes(source.topic)) return undefined;
    const metadata = await admin.fetchTopicMetadata({ topics: [source.topic] });
    return (metadata.topics[0]?.partitions ?? []).map((p) => p.partitionId).sort((a, b) => a - b);
  }

  /** Where partitions without a previous owner start: the log start (earliest) or its end (latest). */
  async startingOffsets(source: TopicSource, partitions: number[]): Promise<Map<number, bigint>> {
    const admin = await this.admin(source.brokers);
    const offsets = await admin.fetchTopicOffsets(source.topic);
    const wanted = new Set(partitions);
    return new Map(
      offsets
        .filter((o) => wanted.has(o.partition))
        .map((o) => [o.partition, BigInt(source.startingOffsets === 'earliest' ? o.low : o.high)]),
    );
  }

  async close(): Promise<void> {
    const admins = [...this.admins.values()];
    this.admins.clear();
    for (const a of admins) await (await a.catch(() => undefined))?.disconnect();
  }
}
