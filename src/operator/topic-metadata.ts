// What the operator asks Kafka: the topics' partitions and the offsets new partitions start from.
// One admin client per broker list, shared by every cube on those brokers; the metadata of all
// topics of a cluster is read once per period for every cube reading it, not once per cube.
import type { Admin, Kafka } from 'kafkajs';
import { createKafka } from '../kafka/client.ts';
import { SharedReads } from './shared-reads.ts';

export type StartingOffsets = 'earliest' | 'latest';

export interface TopicSource {
  brokers: string[];
  topic: string;
  startingOffsets: StartingOffsets;
}

/**
 * Where each partition without a previous owner starts. `startingOffsets` applies to the
 * partitions the topic had when the cube was first assigned (it holds no epoch yet); a partition
 * added to the topic later starts from its log start whatever the spec says, as Kafka consumers
 * treat partitions created after they started: its first events were written before any receiver
 * could read them, and `latest` would skip them (KYLIN-4683).
 */
export function startingOffsetRules(
  spec: StartingOffsets,
  fresh: number[],
  epochs: Record<string, number> | undefined,
): Map<number, StartingOffsets> {
  const cubeStarted = Object.keys(epochs ?? {}).length > 0;
  return new Map(
    fresh.map((p) => [p, cubeStarted && epochs?.[String(p)] === undefined ? 'earliest' : spec]),
  );
}

/** A topic missing from the last answer is asked for again at most this often (just created?). */
const missingTopicRecheckMs = 1_000;

export class TopicMetadata {
  private readonly admins = new Map<string, Promise<Admin>>();
  private readonly clientId: string;
  /** By broker list: topic → its partition numbers, sorted. */
  private readonly topics: SharedReads<Map<string, number[]>>;

  /** `maxAgeMs`: how long the partitions of a topic are reused (the resync period). */
  constructor(clientId: string, maxAgeMs: number) {
    this.clientId = clientId;
    this.topics = new SharedReads({
      fetch: (brokers) => this.allTopics(brokers.split(',')),
      maxAgeMs,
    });
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

  private async allTopics(brokers: string[]): Promise<Map<string, number[]>> {
    const admin = await this.admin(brokers);
    // No topics named: every topic of the cluster.
    const metadata = await admin.fetchTopicMetadata();
    return new Map(
      metadata.topics.map((t) => [
        t.name,
        t.partitions.map((p) => p.partitionId).sort((a, b) => a - b),
      ]),
    );
  }

  /** The topic's partition numbers, or undefined when the topic does not exist. */
  async partitions(source: TopicSource): Promise<number[] | undefined> {
    const key = source.brokers.join(',');
    const known = (await this.topics.get(key)).get(source.topic);
    if (known) return known;
    return (await this.topics.get(key, undefined, missingTopicRecheckMs)).get(source.topic);
  }

  /**
   * Where partitions without a previous owner start: the log start (earliest) or its end (latest),
   * each by its own rule (see `startingOffsetRules`).
   */
  async startingOffsets(
    source: Pick<TopicSource, 'brokers' | 'topic'>,
    rules: Map<number, StartingOffsets>,
  ): Promise<Map<number, bigint>> {
    let offsets = await this.topicOffsets(source);
    if ([...rules.keys()].some((p) => !offsets.has(p))) {
      // kafkajs's admin keeps the metadata of a topic for five minutes, so partitions added to it
      // since are missing from its answer; a fresh client reads them.
      await this.dropAdmin(source.brokers);
      offsets = await this.topicOffsets(source);
    }
    const starts = new Map<number, bigint>();
    for (const [p, rule] of rules) {
      const o = offsets.get(p);
      if (o) starts.set(p, rule === 'earliest' ? o.low : o.high);
    }
    return starts;
  }

  private async topicOffsets(
    source: Pick<TopicSource, 'brokers' | 'topic'>,
  ): Promise<Map<number, { low: bigint; high: bigint }>> {
    const admin = await this.admin(source.brokers);
    const offsets = await admin.fetchTopicOffsets(source.topic);
    return new Map(offsets.map((o) => [o.partition, { low: BigInt(o.low), high: BigInt(o.high) }]));
  }

  private async dropAdmin(brokers: string[]): Promise<void> {
    const key = brokers.join(',');
    const admin = this.admins.get(key);
    this.admins.delete(key);
    await (await admin?.catch(() => undefined))?.disconnect();
  }

  async close(): Promise<void> {
    const admins = [...this.admins.values()];
    this.admins.clear();
    for (const a of admins) await (await a.catch(() => undefined))?.disconnect();
  }
}
