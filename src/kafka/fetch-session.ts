// One fetch loop per Kafka client (a receiver's source: brokers and credentials) for every cube
// that reads through it. A kafkajs consumer per cube meant a consumer group per cube (joins,
// syncs and heartbeats), connections of its own, and one fetch per cube every fetch wait: with
// 1,000 cubes (bench:scale) half a core of receivers and a fifth of the broker while idle, and the
// joins of new cubes most of what placing them cost the broker. Here one Fetch per leader broker
// asks for every partition any cube wants; each answer is decoded once (columnar-fetch.ts) and
// handed to every cube reading that partition from its own position. Positions stay the cube's:
// the session only moves them forward past what it delivered. No group is joined: the operator
// assigns partitions, so a group's only use is the committed offsets, which are written as a
// consumer outside any group writes them (generation -1).
import { createRequire } from 'node:module';
import kafkajs, { type Admin, type Kafka } from 'kafkajs';
import { injectedFault } from '../observability/fault-injection.ts';
import {
  type FetchedPartition,
  type FetchedTopic,
  installColumnarFetch,
  sessionRackId,
} from './columnar-fetch.ts';
import type { ConsumedRecords, PartitionSink } from './partition-consumer.ts';
import { fetchOrder } from './fetch-order.ts';
import { slicePackedValues } from './record-values.ts';

const require = createRequire(import.meta.url);
const { createErrorFromCode } = require('kafkajs/src/protocol/error.js') as {
  createErrorFromCode: (code: number) => Error;
};
const NotImplemented = kafkajs.KafkaJSNotImplemented as unknown as new (message: string) => Error;

/** What of kafkajs's Cluster the session uses (kafkajs 2.2.4, checked by columnar-fetch.ts). */
interface Cluster {
  connect(): Promise<void>;
  disconnect(): Promise<void>;
  isConnected(): boolean;
  refreshMetadata(): Promise<void>;
  addMultipleTargetTopics(topics: string[]): Promise<void>;
  findLeaderForPartitions(topic: string, partitions: number[]): Record<string, number[]>;
  findBroker(args: { nodeId: string }): Promise<Broker>;
  findGroupCoordinator(args: { groupId: string }): Promise<Broker>;
  /** The topics a refresh asks for (kafkajs replaces the set when an add fails). */
  targetTopics: Set<string>;
  brokerPool: {
    findConnectedBroker(): Promise<Broker>;
    /** The last metadata read (null before the first). */
    metadata?: { brokers?: { nodeId: number }[] } | null;
  };
}
interface Broker {
  fetch(args: {
    replicaId: number;
    isolationLevel: number;
    maxWaitTime: number;
    minBytes: number;
    maxBytes: number;
    topics: {
      topic: string;
      partitions: { partition: number; fetchOffset: string; maxBytes: number }[];
    }[];
    rackId: string;
  }): Promise<{ responses: FetchedTopic[] }>;
  offsetCommit(args: {
    groupId: string;
    groupGenerationId: number;
    memberId: string;
    topics: { topic: string; partitions: { partition: number; offset: string }[] }[];
  }): Promise<unknown>;
  /** Throws the first topic's or partition's error of the answer (kafkajs's parse). */
  metadata(topics: string[]): Promise<unknown>;
}

/** A private member of kafkajs's Kafka, by its symbol's name. */
function privateOf(kafka: Kafka, name: string): unknown {
  const symbol = Object.getOwnPropertySymbols(kafka).find((s) => s.description === name);
  return symbol && (kafka as unknown as Record<symbol, unknown>)[symbol];
}

const createAdmin = require('kafkajs/src/admin/index.js') as (options: {
  logger: unknown;
  retry: unknown;
  cluster: Cluster;
}) => Admin;

/** kafkajs's Kafka makes its clusters with this. */
function createCluster(kafka: Kafka): Cluster {
  const create = privateOf(kafka, 'private:Kafka:createCluster');
  if (typeof create !== 'function') {
    throw new Error('kafkajs is not what src/kafka/fetch-session.ts was written against');
  }
  return (create as (options: object) => Cluster)({
    allowAutoTopicCreation: false,
    // READ_COMMITTED, as the consumers before: a transaction's records once it commits.
    isolationLevel: 1,
    maxInFlightRequests: null,
  });
}

/**
 * How long the broker may hold a fetch that finds nothing new. One fetch (per leader broker) now
 * serves every cube of a receiver, so this is also how long a partition newly assigned or resumed
 * may wait while the others are idle.
 */
export const sessionFetchWaitMs = 500;
/** At most this much per fetch and per partition in it (the consumers' setting before). */
const maxBytes = 1_048_576;
/** Fetch errors of a partition that a metadata refresh cures (a leader moved, a topic growing). */
const refreshCodes = new Set([3, 5, 6, 9, 56, 74, 75, 78]);
/** A partition failing with one of those this many fetches in a row fails its readers. */
const refreshAttempts = 20;
const offsetOutOfRange = 1;
/** With no cube reading and no admin call for this long, the session's connections close. */
const idleCloseMs = 30_000;
/** Tries of a commit whose coordinator moved or is loading. */
const commitAttempts = 6;

/** A cube's partitions in the session. */
export class Subscription {
  readonly topic: string;
  readonly sink: PartitionSink;
  /** The next offset to deliver, by partition. */
  readonly positions = new Map<number, number>();
  readonly paused = new Set<number>();
  /** Partitions whose last delivery has not settled: not fetched for this reader meanwhile. */
  readonly busy = new Set<number>();
  /** Where each partition's log ended at its last fetch (last stable offset), and when. */
  readonly ends: Map<number, { end: bigint; at: number }>;
  closed = false;
  private readonly session: FetchSession;

  constructor(
    session: FetchSession,
    topic: string,
    sink: PartitionSink,
    positions: Map<number, bigint>,
    ends: Map<number, { end: bigint; at: number }>,
  ) {
    this.session = session;
    this.topic = topic;
    this.sink = sink;
    this.ends = ends;
    for (const [p, o] of positions) this.positions.set(p, Number(o));
  }

  pause(partitions: number[]): void {
    for (const p of partitions) this.paused.add(p);
  }

  resume(positions: Map<number, bigint>): void {
    for (const [p, o] of positions) {
      this.paused.delete(p);
      if (this.positions.has(p)) this.positions.set(p, Number(o));
    }
    this.session.wake();
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.session.remove(this);
  }

  /** Commits these positions into `groupId` as a consumer outside the group does. */
  commit(groupId: string, positions: Map<number, bigint>): Promise<void> {
    return this.session.commit(groupId, this.topic, positions);
  }
}

interface Reader {
  subscription: Subscription;
  position: number;
}

export class FetchSession {
  private readonly kafka: Kafka;
  private cluster: Cluster | undefined;
  private connecting: Promise<Cluster> | undefined;
  private readonly subscriptions = new Set<Subscription>();
  /** Subscribes under way: no idle close meanwhile. */
  private subscribing = 0;
  private metadataStale = false;
  private readonly refreshStreak = new Map<string, number>();
  private loop: Promise<void> | undefined;
  private waking: (() => void) | undefined;
  /** A wake with the loop not waiting: its next wait returns at once. */
  private woken = false;
  /** The fetch under way to each broker (by node id): one at a time to each, none waiting on another. */
  private readonly fetching = new Map<string, Promise<void>>();
  private idleTimer: NodeJS.Timeout | undefined;
  private round = 0;
  /** The fetch that last returned records of each partition (`partition:topic`): fetchOrder. */
  private readonly served = new Map<string, number>();
  private fetches = 0;
  private sharedAdmin: { cluster: Cluster; admin: Admin } | undefined;
  private adminFacade: Admin | undefined;
  private lastAdminUse = 0;

  constructor(kafka: Kafka) {
    this.kafka = kafka;
  }

  private async connected(): Promise<Cluster> {
    if (this.cluster?.isConnected()) return this.cluster;
    this.connecting ??= (async () => {
      installColumnarFetch();
      const cluster = this.cluster ?? createCluster(this.kafka);
      this.cluster = cluster;
      await cluster.connect();
      return cluster;
    })().finally(() => {
      this.connecting = undefined;
    });
    return this.connecting;
  }

  /**
   * Adds a reader of `positions` of `topic`. Rejects when the broker cannot be reached or does
   * not know the topic; nothing is added then.
   */
  async subscribe(
    topic: string,
    sink: PartitionSink,
    positions: Map<number, bigint>,
    ends = new Map<number, { end: bigint; at: number }>(),
  ): Promise<Subscription> {
    this.subscribing += 1;
    try {
      const cluster = await this.connected();
      // Added to the topics the cluster's refreshes ask for (kafkajs keeps them).
      if (!cluster.targetTopics.has(topic)) await cluster.addMultipleTargetTopics([topic]);
    } finally {
      this.subscribing -= 1;
    }
    const subscription = new Subscription(this, topic, sink, positions, ends);
    this.subscriptions.add(subscription);
    clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
    this.wake();
    return subscription;
  }

  remove(subscription: Subscription): void {
    this.subscriptions.delete(subscription);
    const { topic } = subscription;
    if (![...this.subscriptions].some((s) => s.topic === topic)) {
      for (const p of subscription.positions.keys()) this.served.delete(`${p}:${topic}`);
    }
    if (this.subscriptions.size > 0) return;
    // No reader left: the connections go after a while (a cube restarting comes back at once).
    clearTimeout(this.idleTimer);
    this.idleTimer = setTimeout(() => this.closeIfIdle(), idleCloseMs);
    this.idleTimer.unref();
  }

  private closeIfIdle(): void {
    if (this.subscriptions.size > 0 || this.subscribing > 0 || this.loop) return;
    const sinceAdmin = Date.now() - this.lastAdminUse;
    if (sinceAdmin < idleCloseMs) {
      this.idleTimer = setTimeout(() => this.closeIfIdle(), idleCloseMs - sinceAdmin);
      this.idleTimer.unref();
      return;
    }
    const cluster = this.cluster;
    this.cluster = undefined;
    this.sharedAdmin = undefined;
    void cluster?.disconnect().catch(() => undefined);
  }

  wake(): void {
    if (!this.loop && this.subscriptions.size > 0) {
      // A throw the loop does not expect fails its readers (they restart), never the process.
      this.loop = this.run()
        .catch((error: unknown) => this.failAll(asError(error)))
        .finally(() => {
          this.loop = undefined;
          // A reader added as the loop ended.
          if (this.subscriptions.size > 0) this.wake();
        });
      return;
    }
    const waking = this.waking;
    this.waking = undefined;
    if (waking) waking();
    else this.woken = true;
  }

  /** Until a wake (a fetch ended, a reader added or resumed), or `ms` at most. */
  private pause(ms: number): Promise<void> {
    if (this.woken) {
      this.woken = false;
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        this.waking = undefined;
        resolve();
      }, ms);
      timer.unref();
      this.waking = () => {
        clearTimeout(timer);
        resolve();
      };
    }).then(() => {
      this.woken = false;
    });
  }

  /**
   * An admin client over the session's connections, shared by its cubes (for their log ends,
   * committed offsets and groups). Each call goes to the session's connections of the moment (they
   * close when no cube has read for a while); connecting and disconnecting are the session's.
   */
  async admin(): Promise<Admin> {
    await this.connected();
    this.adminFacade ??= new Proxy({} as Admin, {
      get: (_, name: string | symbol) => {
        if (name === 'connect' || name === 'disconnect') return () => Promise.resolve();
        if (name === 'then') return undefined; // not a thenable
        return async (...args: unknown[]) => {
          const admin = await this.currentAdmin();
          this.lastAdminUse = Date.now();
          const method = (admin as unknown as Record<string | symbol, unknown>)[name];
          if (typeof method !== 'function') throw new Error(`no admin method ${String(name)}`);
          return (method as (...a: unknown[]) => unknown).apply(admin, args);
        };
      },
    });
    return this.adminFacade;
  }

  private async currentAdmin(): Promise<Admin> {
    const cluster = await this.connected();
    if (this.sharedAdmin?.cluster !== cluster) {
      this.sharedAdmin = {
        cluster,
        admin: createAdmin({
          logger: this.kafka.logger(),
          retry: privateOf(this.kafka, 'private:Kafka:clusterRetry'),
          cluster,
        }),
      };
    }
    return this.sharedAdmin.admin;
  }

  /** Reads the metadata anew (partitions added to a topic). */
  async refreshMetadata(): Promise<void> {
    await (await this.connected()).refreshMetadata();
  }

  /**
   * Commits `positions` into `groupId` as a consumer outside any group does (generation -1). A
   * coordinator that moved or is loading (a broker just started) is looked up again a few times.
   */
  async commit(groupId: string, topic: string, positions: Map<number, bigint>): Promise<void> {
    if (positions.size === 0) return;
    const partitions = [...positions].map(([partition, offset]) => ({
      partition,
      offset: offset.toString(),
    }));
    for (let attempt = 1; ; attempt++) {
      try {
        const cluster = await this.connected();
        const coordinator = await cluster.findGroupCoordinator({ groupId });
        await coordinator.offsetCommit({
          groupId,
          groupGenerationId: -1,
          memberId: '',
          topics: [{ topic, partitions }],
        });
        return;
      } catch (error) {
        const retriable = (error as { retriable?: boolean }).retriable === true;
        if (!retriable || attempt >= commitAttempts) throw error;
        await new Promise((resolve) => setTimeout(resolve, 100 * 2 ** Math.min(attempt, 4)));
      }
    }
  }

  /** Closes the session's connections (its receiver stops; its cubes are closed). */
  async close(): Promise<void> {
    clearTimeout(this.idleTimer);
    for (const subscription of [...this.subscriptions]) subscription.close();
    const cluster = this.cluster;
    this.cluster = undefined;
    this.sharedAdmin = undefined;
    await cluster?.disconnect().catch(() => undefined);
  }

  /**
   * Rounds until no reader is left. Each round sends a fetch to every leader broker of a partition
   * wanted now that has none under way, and waits until one ends (or a reader comes or resumes):
   * a broker that answers slowly, or hangs until the request times out, holds back only the
   * partitions it leads.
   */
  private async run(): Promise<void> {
    while (this.subscriptions.size > 0) {
      // Every broker has a fetch under way: nothing could be sent. Without this, each reader
      // added or resumed while a fetch waits made a round over every reader's partitions: at
      // 1,250 cubes placed on a receiver, a fifth of its CPU.
      if (this.everyBrokerFetching()) {
        await this.pause(sessionFetchWaitMs);
        continue;
      }
      const wanted = this.wanted();
      if (wanted.size === 0) {
        await this.pause(sessionFetchWaitMs);
        continue;
      }
      let cluster: Cluster;
      try {
        cluster = await this.connected();
        if (this.metadataStale) {
          // A partition the broker answered with an error at once: not again in a tight loop.
          await new Promise((resolve) => setTimeout(resolve, 100));
          this.metadataStale = false;
          await this.refresh(cluster);
        }
      } catch (error) {
        this.failAll(asError(error));
        continue;
      }
      // A partition of a broker with a fetch under way waits for it: its answer moves the
      // partition's readers on (a leader moved meanwhile: the position tells the later answer).
      let sent = false;
      for (const [nodeId, partitions] of this.byLeader(cluster, wanted)) {
        if (this.fetching.has(nodeId)) continue;
        sent = true;
        const fetch = this.fetchFrom(cluster, nodeId, partitions)
          .catch((error: unknown) => this.failPartitions(partitions, asError(error)))
          .finally(() => {
            this.fetching.delete(nodeId);
            this.wake();
          });
        this.fetching.set(nodeId, fetch);
      }
      // Readers of a partition at different positions take turns fetch by fetch.
      if (sent) this.round += 1;
      await this.pause(sessionFetchWaitMs);
    }
    // Not over while a fetch is: its answer is delivered, or its readers are failed.
    await Promise.all(this.fetching.values());
  }

  /** Whether each broker of the metadata has a fetch under way (false before any metadata). */
  private everyBrokerFetching(): boolean {
    if (this.fetching.size === 0) return false;
    const brokers = this.cluster?.brokerPool.metadata?.brokers;
    return (
      brokers !== undefined &&
      brokers.length > 0 &&
      brokers.every((b) => this.fetching.has(String(b.nodeId)))
    );
  }

  /**
   * Reads the metadata of every topic read anew. kafkajs refuses the whole answer when one topic
   * or partition in it has an error (a topic deleted, its access revoked, a partition without a
   * leader): then each topic is asked on its own, and the readers of those that fail fail (they
   * restart on their own, and say why) while the others read on. Throws when no topic is to
   * blame (the brokers cannot be reached): that fails every reader.
   */
  private async refresh(cluster: Cluster): Promise<void> {
    try {
      await cluster.refreshMetadata();
      return;
    } catch (error) {
      const broken = new Map<string, Error>();
      const broker = await cluster.brokerPool.findConnectedBroker();
      for (const topic of [...cluster.targetTopics]) {
        try {
          await broker.metadata([topic]);
        } catch (failure) {
          if ((failure as { type?: unknown }).type === undefined) throw failure;
          broken.set(topic, asError(failure));
        }
      }
      if (broken.size === 0) throw error;
      for (const [topic, failure] of broken) {
        cluster.targetTopics.delete(topic);
        const why = new Error(`topic ${topic}: ${failure.message}`, { cause: failure });
        for (const s of [...this.subscriptions]) if (s.topic === topic) this.fail(s, why);
      }
      // The other topics' metadata, at the next round.
      this.metadataStale = true;
    }
  }

  /**
   * Each partition wanted now, by topic, with its readers. Readers of one partition at one
   * position share the fetch; readers at different positions take turns, fetch by fetch, so that
   * a cube catching up does not hold back one at the log end, nor the other way round.
   */
  private wanted(): Map<string, Map<number, Reader[]>> {
    const out = new Map<string, Map<number, Reader[]>>();
    for (const subscription of this.subscriptions) {
      for (const [partition, position] of subscription.positions) {
        if (subscription.paused.has(partition) || subscription.busy.has(partition)) continue;
        if (!subscription.sink.wants(partition)) continue;
        let topic = out.get(subscription.topic);
        if (!topic) out.set(subscription.topic, (topic = new Map<number, Reader[]>()));
        const readers = topic.get(partition) ?? [];
        readers.push({ subscription, position });
        topic.set(partition, readers);
      }
    }
    for (const partitions of out.values()) {
      for (const [partition, readers] of partitions) {
        const at = [...new Set(readers.map((r) => r.position))].sort((a, b) => a - b);
        if (at.length < 2) continue;
        const turn = at[this.round % at.length];
        partitions.set(
          partition,
          readers.filter((r) => r.position === turn),
        );
      }
    }
    return out;
  }

  private byLeader(
    cluster: Cluster,
    wanted: Map<string, Map<number, Reader[]>>,
  ): Map<string, Map<string, Map<number, Reader[]>>> {
    const out = new Map<string, Map<string, Map<number, Reader[]>>>();
    for (const [topic, partitions] of wanted) {
      let leaders: Record<string, number[]>;
      try {
        leaders = cluster.findLeaderForPartitions(topic, [...partitions.keys()]);
      } catch (error) {
        this.metadataStale = true;
        for (const readers of partitions.values()) this.failed(readers, asError(error));
        continue;
      }
      const led = new Set<number>();
      for (const [nodeId, ids] of Object.entries(leaders)) {
        let node = out.get(nodeId);
        if (!node) out.set(nodeId, (node = new Map<string, Map<number, Reader[]>>()));
        const topicPartitions = new Map<number, Reader[]>();
        for (const id of ids) {
          topicPartitions.set(id, partitions.get(id)!);
          led.add(id);
        }
        node.set(topic, topicPartitions);
      }
      // A partition the metadata does not list (added to the topic since): learnt at a refresh.
      for (const [partition, readers] of partitions) {
        if (!led.has(partition)) this.retryLater(topic, partition, readers, 3);
      }
    }
    return out;
  }

  private async fetchFrom(
    cluster: Cluster,
    nodeId: string,
    partitions: Map<string, Map<number, Reader[]>>,
  ): Promise<void> {
    const topics = fetchOrder(
      [...partitions].map(([topic, byPartition]) => ({
        topic,
        partitions: [...byPartition].map(([partition, readers]) => {
          const fetchOffset = Math.min(...readers.map((r) => r.position));
          return { partition, fetchOffset: String(fetchOffset), maxBytes };
        }),
      })),
      (topic, partition) => this.served.get(`${partition}:${topic}`),
    );
    const fetch = ++this.fetches;
    let responses: FetchedTopic[];
    try {
      const broker = await cluster.findBroker({ nodeId });
      ({ responses } = await broker.fetch({
        replicaId: -1,
        isolationLevel: 1,
        maxWaitTime: sessionFetchWaitMs,
        minBytes: 1,
        maxBytes,
        topics,
        rackId: sessionRackId,
      }));
    } catch (error) {
      this.metadataStale = true;
      this.failPartitions(partitions, asError(error));
      return;
    }
    const at = Date.now();
    for (const { topicName, partitions: answered } of responses) {
      const byPartition = partitions.get(topicName);
      if (!byPartition) continue;
      for (const fetched of answered) {
        const readers = byPartition.get(fetched.partition);
        if (!readers) continue;
        if (fetched.decoded instanceof Error || fetched.decoded.firstOffset !== null)
          this.served.set(`${fetched.partition}:${topicName}`, fetch);
        this.answered(topicName, fetched, readers, at);
      }
    }
  }

  private answered(topic: string, fetched: FetchedPartition, readers: Reader[], at: number): void {
    const { partition, errorCode } = fetched;
    if (errorCode === offsetOutOfRange) {
      // Deleted by retention (or the topic recreated): on from the log start, as the consumers
      // before did; the delivery's fetchOffset tells the sink how far it moved.
      this.refreshStreak.delete(`${partition}:${topic}`);
      void this.moveToLogStart(topic, partition, readers);
      return;
    }
    if (errorCode !== 0) {
      if (refreshCodes.has(errorCode)) this.retryLater(topic, partition, readers, errorCode);
      else this.failed(readers, createErrorFromCode(errorCode));
      return;
    }
    this.refreshStreak.delete(`${partition}:${topic}`);
    const end = fetched.lastStableOffset >= 0n ? fetched.lastStableOffset : fetched.highWatermark;
    for (const { subscription } of readers) subscription.ends.set(partition, { end, at });
    const { decoded } = fetched;
    if (decoded instanceof Error) {
      this.failed(readers, new NotImplemented(decoded.message));
      return;
    }
    const { offsets, values, timestamps, firstOffset, lastOffset, oversized } = decoded;
    if (firstOffset === null || lastOffset === null) return; // nothing new
    const shared = readers.filter((r) => r.position <= lastOffset).length > 1;
    for (const reader of readers) {
      const { subscription, position } = reader;
      if (position > lastOffset || subscription.closed) continue;
      if (subscription.positions.get(partition) !== position) continue; // moved meanwhile
      let from = 0;
      while (from < offsets.length && offsets[from]! < position) from++;
      subscription.positions.set(partition, lastOffset + 1);
      const hw = fetched.highWatermark;
      if (from === offsets.length) {
        // Nothing from the position to the set's last offset: what is not there was compacted
        // away or is markers and aborted records, or a batch too large to read, consumed
        // offsets all of it.
        subscription.sink.onFilteredRange(
          partition,
          BigInt(position),
          BigInt(lastOffset),
          hw,
          oversized,
        );
        continue;
      }
      const records: ConsumedRecords = {
        offsets: shared || from > 0 ? offsets.slice(from) : offsets,
        values: shared || from > 0 ? slicePackedValues(values, from, offsets.length) : values,
        timestamps: shared || from > 0 ? timestamps.slice(from) : timestamps,
        fetchOffset: position,
      };
      this.deliver(subscription, partition, records, BigInt(lastOffset), hw);
    }
  }

  private deliver(
    subscription: Subscription,
    partition: number,
    records: ConsumedRecords,
    end: bigint,
    hw: bigint,
  ): void {
    const fault = injectedFault('consumer-fetch');
    if (fault) {
      this.fail(subscription, new NotImplemented(fault.message));
      return;
    }
    subscription.busy.add(partition);
    const lastDelivered = BigInt(records.offsets[records.offsets.length - 1]!);
    let done: void | Promise<void>;
    try {
      done = subscription.sink.onRecords(partition, records, hw);
    } catch (error) {
      subscription.busy.delete(partition);
      this.fail(subscription, asError(error));
      return;
    }
    const settled = (): void => {
      subscription.busy.delete(partition);
      if (subscription.closed) return;
      // A batch ending with a transaction's marker (or aborted records): past them too.
      if (end > lastDelivered) {
        subscription.sink.onFilteredRange(partition, lastDelivered + 1n, end, hw);
      }
      this.wake();
    };
    if (done) {
      done.then(settled, (error: unknown) => {
        subscription.busy.delete(partition);
        this.fail(subscription, asError(error));
      });
    } else settled();
  }

  private async moveToLogStart(topic: string, partition: number, readers: Reader[]): Promise<void> {
    // Not fetched for these readers until their new position is known: each answer out of range
    // would start another admin call, at the pace of a broker that answers at once.
    for (const { subscription } of readers) subscription.busy.add(partition);
    try {
      const admin = await this.currentAdmin();
      const offsets = await admin.fetchTopicOffsets(topic);
      const low = offsets.find((o) => o.partition === partition)?.low;
      if (low === undefined) throw new Error(`partition ${partition} of ${topic} is gone`);
      for (const { subscription, position } of readers) {
        if (subscription.positions.get(partition) === position) {
          subscription.positions.set(partition, Number(low));
        }
      }
    } catch (error) {
      this.failed(readers, asError(error));
    } finally {
      for (const { subscription } of readers) subscription.busy.delete(partition);
      this.wake();
    }
  }

  private retryLater(topic: string, partition: number, readers: Reader[], code: number): void {
    this.metadataStale = true;
    const key = `${partition}:${topic}`;
    const streak = (this.refreshStreak.get(key) ?? 0) + 1;
    this.refreshStreak.set(key, streak);
    if (streak >= refreshAttempts) {
      this.refreshStreak.delete(key);
      this.failed(readers, createErrorFromCode(code));
    }
  }

  private failed(readers: Reader[], error: Error): void {
    for (const { subscription } of readers) this.fail(subscription, error);
  }

  private failPartitions(partitions: Map<string, Map<number, Reader[]>>, error: Error): void {
    for (const byPartition of partitions.values())
      for (const readers of byPartition.values()) this.failed(readers, error);
  }

  private failAll(error: Error): void {
    for (const subscription of [...this.subscriptions]) this.fail(subscription, error);
  }

  /** The reader stops; its owner restarts it from its own positions (PartitionSink.onCrash). */
  private fail(subscription: Subscription, error: Error): void {
    if (subscription.closed) return;
    subscription.close();
    queueMicrotask(() => subscription.sink.onCrash(error));
  }
}

function asError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error));
}

const sessions = new WeakMap<Kafka, FetchSession>();

/** The session of a Kafka client: one per receiver and source. */
export function fetchSessionOf(kafka: Kafka): FetchSession {
  let session = sessions.get(kafka);
  if (!session) sessions.set(kafka, (session = new FetchSession(kafka)));
  return session;
}

/** Closes the session of a Kafka client, if it has one. */
export async function closeFetchSession(kafka: Kafka): Promise<void> {
  const session = sessions.get(kafka);
  sessions.delete(kafka);
  await session?.close();
}
