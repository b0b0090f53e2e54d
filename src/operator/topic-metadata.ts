// What the operator asks Kafka: the topics' partitions and the offsets new partitions start from.
// One admin client per broker list, shared by every cube on those brokers; the metadata of all
// topics of a cluster is read once per period for every cube reading it, not once per cube.
import type { Admin, Kafka } from 'kafkajs';
import { createKafka } from '../kafka/client.ts';
import {
  type SecretReader,
  type SourceSecurity,
  classifySourceError,
  connectionKey,
  kafkaSecurityOptions,
  redact,
  secretValues,
  securityKey,
} from '../kafka/source-security.ts';
import { readTopicOffsets } from '../kafka/topic-offsets.ts';
import { SharedReads } from './shared-reads.ts';

export type StartingOffsets = 'earliest' | 'latest';

export interface TopicSource extends SourceSecurity {
  brokers: string[];
  topic: string;
  startingOffsets: StartingOffsets;
}

/** How the operator connects to a source: brokers, and the Secrets of the cube's namespace. */
type Connection = Pick<TopicSource, 'brokers' | 'tls' | 'sasl'> & { namespace?: string };

const keyOf = (c: Connection): string => connectionKey(c, c.namespace ?? 'default');

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

  private readonly connections = new Map<string, Connection>();
  private readonly readSecret: SecretReader | undefined;

  /**
   * `maxAgeMs`: how long the partitions of a topic are reused (the resync period). `readSecret`
   * reads the Secrets that sources with TLS or SASL name.
   */
  constructor(clientId: string, maxAgeMs: number, readSecret?: SecretReader) {
    this.clientId = clientId;
    this.readSecret = readSecret;
    this.topics = new SharedReads({
      fetch: (key) => this.allTopics(this.connections.get(key)!),
      maxAgeMs,
    });
  }

  private admin(connection: Connection): Promise<Admin> {
    const key = keyOf(connection);
    let admin = this.admins.get(key);
    if (!admin) {
      admin = this.connectAdmin(connection);
      admin.catch(() => this.admins.delete(key));
      this.admins.set(key, admin);
    }
    return admin;
  }

  private async connectAdmin(connection: Connection): Promise<Admin> {
    const namespace = connection.namespace ?? 'default';
    const security = securityKey(connection)
      ? await kafkaSecurityOptions(connection, namespace, this.secretReaderOrThrow())
      : {};
    const kafka: Kafka = createKafka({
      clientId: this.clientId,
      brokers: connection.brokers,
      retry: { retries: 2 },
      ...security,
    });
    const client = kafka.admin();
    try {
      await client.connect();
    } catch (error) {
      // kafkajs never puts a password in its messages; a key or password that does is cut out.
      if (error instanceof Error) error.message = redact(error.message, secretValues(security));
      throw error;
    }
    return client;
  }

  private secretReaderOrThrow(): SecretReader {
    if (!this.readSecret)
      throw new Error('this operator reads no Secrets: TLS and SASL unavailable');
    return this.readSecret;
  }

  /**
   * What `reading` gives. A client the broker refused (credentials or certificate) is dropped, so
   * that the next read connects afresh with what the Secrets hold then: a rotated password
   * reaches the operator without a restart.
   */
  private async dropRefused<T>(connection: Connection, reading: Promise<T>): Promise<T> {
    try {
      return await reading;
    } catch (error) {
      if (classifySourceError(error)) await this.dropAdmin(connection);
      throw error;
    }
  }

  private async allTopics(connection: Connection): Promise<Map<string, number[]>> {
    // No topics named: every topic of the cluster.
    const admin = await this.admin(connection);
    const metadata = await this.dropRefused(connection, admin.fetchTopicMetadata());
    return new Map(
      metadata.topics.map((t) => [
        t.name,
        t.partitions.map((p) => p.partitionId).sort((a, b) => a - b),
      ]),
    );
  }

  /** The admin client of a source's cluster, shared with the metadata reads. */
  adminOf(
    source: Pick<TopicSource, 'brokers' | 'tls' | 'sasl'>,
    namespace?: string,
  ): Promise<Admin> {
    return this.admin({ ...source, ...(namespace ? { namespace } : {}) });
  }

  /** The topic's partition numbers, or undefined when the topic does not exist. */
  async partitions(source: TopicSource, namespace?: string): Promise<number[] | undefined> {
    const connection = { ...source, ...(namespace ? { namespace } : {}) };
    const key = keyOf(connection);
    this.connections.set(key, connection);
    const known = (await this.topics.get(key)).get(source.topic);
    if (known) return known;
    return (await this.topics.get(key, undefined, missingTopicRecheckMs)).get(source.topic);
  }

  /**
   * Where partitions without a previous owner start: the log start (earliest) or its end (latest),
   * each by its own rule (see `startingOffsetRules`).
   */
  async startingOffsets(
    source: Pick<TopicSource, 'brokers' | 'topic' | 'tls' | 'sasl'>,
    rules: Map<number, StartingOffsets>,
    namespace?: string,
  ): Promise<Map<number, bigint>> {
    const connection = { ...source, ...(namespace ? { namespace } : {}) };
    // kafkajs's admin may not know partitions added to the topic lately: a fresh one reads them.
    const offsets = await this.dropRefused(
      connection,
      readTopicOffsets(
        source.topic,
        rules.keys(),
        () => this.admin(connection),
        () => this.dropAdmin(connection),
      ),
    );
    const starts = new Map<number, bigint>();
    for (const [p, rule] of rules) {
      const o = offsets.get(p);
      if (o) starts.set(p, rule === 'earliest' ? o.low : o.high);
    }
    return starts;
  }

  /**
   * What an offset reset is checked against: every partition's log start and high watermark and,
   * with `timestamp`, the offset of its first record at or after it (-1: none).
   */
  async resetOffsets(
    source: Pick<TopicSource, 'brokers' | 'topic' | 'tls' | 'sasl'>,
    namespace?: string,
    timestamp?: number,
  ): Promise<{
    offsets: Map<number, { low: bigint; high: bigint }>;
    atTimestamp?: Map<number, bigint>;
  }> {
    const connection = { ...source, ...(namespace ? { namespace } : {}) };
    const admin = () => this.admin(connection);
    const offsets = await this.dropRefused(connection, readTopicOffsets(source.topic, [], admin));
    if (timestamp === undefined) return { offsets };
    const at = await this.dropRefused(
      connection,
      admin().then((a) => a.fetchTopicOffsetsByTimestamp(source.topic, timestamp)),
    );
    return {
      offsets,
      atTimestamp: new Map(at.map((o) => [o.partition, BigInt(o.offset)])),
    };
  }

  private async dropAdmin(connection: Connection): Promise<void> {
    const key = keyOf(connection);
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
