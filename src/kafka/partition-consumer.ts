// Consumption of chosen partitions of one topic from exact offsets, behind a small interface so
// that another Kafka client could replace kafkajs. The caller owns positions; this layer only
// delivers records and reports how far the log goes.
import kafkajs, { type Admin, type Consumer, type Kafka, type KafkaMessage } from 'kafkajs';
import { injectedFault } from '../observability/fault-injection.ts';
import { columnarRecordsOf, installColumnarFetch, reportingRackId } from './columnar-fetch.ts';
import { failedGroups, groupIdNotFound, nonEmptyGroup } from './consumer-group.ts';
import { readTopicOffsets } from './topic-offsets.ts';
import { exactPartitionAssigner } from './exact-assigner.ts';
import { OffsetRangeError, isExactOffset } from './record-batches.ts';
import { type PackedValues, packValues } from './record-values.ts';

export { OffsetRangeError, isExactOffset };

/**
 * The error kafkajs raises for a batch it cannot decode (a codec it lacks). Its errors are spread
 * into module.exports, which Node's named ESM imports of CommonJS do not see; its type
 * declaration leaves out the message the constructor takes.
 */
const NotImplemented = kafkajs.KafkaJSNotImplemented as unknown as new (message: string) => Error;

/**
 * Records of one fetch of one partition, as columns: no object per record. Offsets are numbers,
 * exact because every one is below 2^53 (a consumer refuses a batch whose offsets are not);
 * positions and stop offsets stay bigint at the edges and convert once per batch.
 */
export interface ConsumedRecords {
  /** Ascending. */
  offsets: Float64Array;
  /** Value i belongs to offsets[i]. */
  values: PackedValues;
  /**
   * The offset the fetch read from: the partition's position, unless the client had to move it
   * because the broker no longer holds that offset (deleted by retention), to the log start.
   * Absent when the client does not say.
   */
  fetchOffset?: number;
}

/** ConsumedRecords from records with bigint offsets (fakes in tests, other clients). */
export function consumedRecords(
  records: readonly { offset: bigint; value: Buffer | null }[],
): ConsumedRecords {
  const offsets = new Float64Array(records.length);
  for (let i = 0; i < records.length; i++) {
    const offset = Number(records[i]!.offset);
    if (!isExactOffset(offset)) throw new OffsetRangeError(records[i]!.offset.toString());
    offsets[i] = offset;
  }
  return { offsets, values: packValues(records.map((r) => r.value)) };
}

/**
 * The kafkajs consumer settings, shared with the bare consumer of bench/receiver.ts so that the
 * benchmark compares like with like.
 */
export const consumerSettings = {
  /**
   * A receiver's group is stable (consumer-group.ts), so a member left behind by a receiver killed
   * with -9 stays in it until its session expires, and the restarted receiver's join waits for
   * that. Measured on Kafka 4.4 with kafkajs 2.2.4 (classic protocol): the join after a kill -9
   * took 26 s with a 30 s session, 5 s with 10 s, 2 s with 6 s (the broker's default
   * group.min.session.timeout.ms). 10 s keeps three heartbeats per session on a loaded machine.
   */
  sessionTimeout: 10_000,
  /**
   * kafkajs heartbeats after a fetch once this long has passed since the last heartbeat: an idle
   * consumer's fetch returns every fetchWaitMs (3 s), so a little less than that is a heartbeat
   * every fetch, about every 3 s (with 3 s, every other fetch: 6 s of a 10 s session).
   */
  heartbeatInterval: 2_500,
  /**
   * kafkajs's wait: how long it asks the broker to hold a fetch that finds nothing new, and how
   * long it sleeps between fetches when every partition is paused. The receiver's consumers
   * replace the first with `fetchWaitMs` (through columnar-fetch.ts) and keep this short for the
   * second: a consumer stopped (a partition assigned or released) waits for the sleep under way.
   */
  maxWaitTimeInMs: 200,
  /**
   * At most this much per fetch (kafkajs's default is 10 MiB; a record batch larger than this
   * still comes whole). Every record of a fetch is decoded into objects before the first is
   * handed over, and they survive into V8's old generation, which grows far past what is live
   * before it is collected. bench:receiver (lz4): peak RSS 760-800 MiB with 10 MiB, about 520 MiB
   * with 1 MiB, at no loss of rate; the bare consumer 680 and 490 MiB.
   */
  maxBytes: 1_048_576,
} as const;

export interface PartitionSink {
  /**
   * Records of one partition in offset order. The next batch of the partition is delivered only
   * once a returned promise settles, so a sink may do part of its work elsewhere and keep order.
   */
  onRecords(
    partition: number,
    records: ConsumedRecords,
    highWatermark: bigint,
  ): void | Promise<void>;
  /**
   * Offsets [first, last] held only records the client filters out (transaction markers, aborted
   * records): no record to hand over, but the partition has moved past them.
   */
  onFilteredRange(partition: number, first: bigint, last: bigint, highWatermark: bigint): void;
  /** Whether records of `partition` are wanted now (not paused, stopped or released). */
  wants(partition: number): boolean;
  /**
   * The running consumer stopped on an error and delivers nothing more until started again.
   * It is not restarted here: the caller restarts it from its own positions and pauses.
   */
  onCrash(error: Error): void;
}

export interface PartitionConsumer {
  /**
   * (Re)starts consumption of exactly these partitions from these positions. Rejects when the
   * consumer cannot start (the broker unreachable, say), also when it crashes while starting.
   */
  start(positions: Map<number, bigint>): Promise<void>;
  pause(partitions: number[]): void;
  /** Resumes partitions at the given positions (seeking there first). */
  resume(positions: Map<number, bigint>): void;
  /**
   * Mirrors the caller's positions as the group's committed offsets: what lag exporters read,
   * and where a rejoin (broker restart, coordinator move) resumes before the caller's seeks.
   */
  commit(positions: Map<number, bigint>): Promise<void>;
  highWatermarks(): Promise<Map<number, bigint>>;
  /** The log ends known without asking the broker (recent fetches); possibly not every one. */
  knownHighWatermarks?(): Map<number, bigint>;
  stop(): Promise<void>;
  /**
   * After stop(): removes the consumer group and its committed offsets from the broker (the cube
   * left this receiver). Rejects when the broker refuses (a member of a killed incarnation still
   * in the group, say) or cannot be reached.
   */
  deleteGroup(): Promise<void>;
}

export interface KafkajsConsumerOptions {
  kafka: Kafka;
  topic: string;
  /** The consumer group, the same for every start (consumerGroupId). */
  groupId: string;
  sink: PartitionSink;
  /** Told when a start removed offsets committed for partitions this consumer no longer reads. */
  onGroupPurged?: (partitions: number[]) => void;
  /** Told when that removal failed; the next start tries again. */
  onGroupPurgeFailed?: (error: Error) => void;
  /** How long the broker may hold a fetch that finds nothing new: fetchWaitMs unless set. */
  fetchWaitMs?: number;
}

/**
 * Columns of kafkajs messages (of an old message set, which kafkajs decodes itself): one number
 * per offset string, no BigInt per record.
 */
function recordsOf(messages: readonly KafkaMessage[], fetchOffset: string): ConsumedRecords {
  const count = messages.length;
  const offsets = new Float64Array(count);
  const values = new Array<Buffer | null>(count);
  for (let i = 0; i < count; i++) {
    const m = messages[i]!;
    offsets[i] = Number(m.offset);
    values[i] = m.value;
  }
  // Ascending: when the last is exact, so is every one before it.
  if (count > 0 && !isExactOffset(offsets[count - 1]!)) {
    throw new OffsetRangeError(messages[count - 1]!.offset);
  }
  return { offsets, values: packValues(values), fetchOffset: Number(fetchOffset) };
}

/**
 * How long the broker may hold a receiver consumer's fetch that finds nothing new (one with data
 * returns at once). Every idle consumer sends one fetch per this period: with 200 ms, 1,000 idle
 * cubes (bench:scale) were 5,000 fetches a second, which took most of two cores between the broker
 * and the receivers; with 1 s, 1,000 a second, still 1.5 of the two cores once all 1,000 were
 * Ready (broker 50 %, the four receivers 90-100 %). A consumer stopped while its fetch is held
 * does not wait for it (columnar-fetch.ts ends it at the stop), so the wait costs a move nothing;
 * a paused partition resumed while the others are idle waits for the fetch under way. 3 s: one
 * fetch per heartbeat (kafkajs heartbeats after a fetch, see heartbeatInterval).
 * bench:idle, 250 consumers of 16 partitions: 23.6 % of a core with 1 s, 14.6 % with 3 s.
 */
export const fetchWaitMs = 3_000;

/**
 * Connects an admin client and has it learn the cluster's brokers. kafkajs's admin connects to a
 * seed broker only, so its first fetchOffsets (the group's offsets, read at a consumer's first
 * start) finds no broker in its pool to ask for the group's coordinator, refreshes the metadata
 * and tries again after its retry backoff. A new cube's start took 329 ms (p50 of 24 starts of a
 * 16-partition consumer, one at a time, on the test broker), 34 ms with a metadata request first.
 *
 * The client learns them from the cube's topic, which it keeps as the topic it refreshes. kafkajs
 * sends an empty topic list as null, which the broker answers with every topic of the cluster:
 * `describeCluster` made two such requests at every consumer start, and `deleteGroups` refreshes
 * the client's topics first. With 1,000 cubes on 100 topics of 16 partitions (bench:scale) that
 * was 2,000 answers of 1,650 partitions each, a quarter of the broker's CPU while the cubes were
 * placed. (`fetchTopicOffsets` is kafkajs's one public way to add a topic to an admin client's.)
 * A topic the broker refuses to describe (not there yet, not authorized) falls back to that.
 */
export async function connectAdmin(admin: Admin, topic: string): Promise<Map<number, bigint>> {
  await admin.connect();
  try {
    const offsets = await admin.fetchTopicOffsets(topic);
    return new Map(offsets.map((o) => [o.partition, BigInt(o.high)]));
  } catch {
    await admin.describeCluster();
    return new Map();
  }
}

/** See highWatermarks. */
const adminRenewIntervalMs = 30_000;

export class KafkajsPartitionConsumer implements PartitionConsumer {
  private consumer: Consumer | undefined;
  /** The consumer once it runs: kafkajs refuses pause, resume and seek before run(). */
  private running: Consumer | undefined;
  /** Partitions paused since the last start, applied when a start under way gets to run. */
  protected readonly paused = new Set<number>();
  private admin: Admin | undefined;
  /** When the admin client was last replaced to read partitions added to the topic. */
  private adminRenewedAt = -Infinity;
  private partitions: number[] = [];
  /** Where each partition's log ended at the running consumer's last fetch of it, and when. */
  protected readonly fetchedEnds = new Map<number, { end: bigint; at: number }>();
  /** Stops the running consumer's fetch reports. */
  private closeReports: (() => void) | undefined;
  /**
   * Whether the group may hold offsets of partitions this consumer no longer reads: at the first
   * start (a release may have come just before a crash), after a start without a partition the
   * one before had, and until a check of the group has succeeded. Otherwise a restart after a
   * crash (the broker away, say) asks the broker nothing more than before.
   */
  private purgePending = true;
  protected readonly options: KafkajsConsumerOptions;

  constructor(options: KafkajsConsumerOptions) {
    this.options = options;
  }

  private async adminClient(): Promise<Admin> {
    if (!this.admin) {
      // Where the logs end, read as the client connects: as current as a fetch's report, so a
      // new cube's first status has its log ends (and lag) before the consumer's first fetch.
      const at = Date.now();
      const { admin, ends } = await this.connectAdmin();
      this.admin = admin;
      for (const [partition, end] of ends) this.fetchedEnds.set(partition, { end, at });
    }
    return this.admin;
  }

  /** A connected admin client for this consumer, and where the topic's logs end. */
  protected async connectAdmin(): Promise<{ admin: Admin; ends: Map<number, bigint> }> {
    const admin = this.options.kafka.admin();
    return { admin, ends: await connectAdmin(admin, this.options.topic) };
  }

  /** Done with an admin client of connectAdmin's. */
  protected releaseAdmin(admin: Admin): Promise<void> {
    return admin.disconnect();
  }

  /** Done with an admin client whose metadata is stale: the next connectAdmin reads anew. */
  protected renewAdmin(admin: Admin): Promise<void> {
    return this.releaseAdmin(admin);
  }

  async start(positions: Map<number, bigint>): Promise<void> {
    this.paused.clear();
    await this.stopConsumer();
    const partitions = [...positions.keys()].sort((a, b) => a - b);
    if (this.partitions.some((p) => !positions.has(p))) this.purgePending = true;
    this.partitions = partitions;
    if (this.purgePending) await this.purgeLeftPartitions(partitions);
    if (partitions.length === 0) return;
    await this.begin(positions);
  }

  /** Starts consuming `positions` (not empty), the group's leftovers purged. */
  protected async begin(positions: Map<number, bigint>): Promise<void> {
    const { kafka, topic, sink, groupId } = this.options;
    // The same group at every start. The positions held by the caller stay the truth: the start
    // seeks to them, and commits only mirror them. A member an earlier incarnation left behind
    // (killed with -9) holds up the join until its session expires (see sessionTimeout); once
    // joined, the exact assigner gives this member its partitions whatever the other holds.
    installColumnarFetch();
    const reports = reportingRackId(
      (t, partition, end) => {
        if (t === topic) this.fetchedEnds.set(partition, { end, at: Date.now() });
      },
      { fetchWaitMs: this.options.fetchWaitMs ?? fetchWaitMs },
    );
    this.closeReports = reports.close;
    const consumer = kafka.consumer({
      groupId,
      partitionAssigners: [exactPartitionAssigner(topic, () => this.partitions)],
      ...consumerSettings,
      // Marks this consumer's fetches for columnar-fetch.ts (not sent to the broker).
      rackId: reports.rackId,
      retry: {
        retries: 10,
        // Never kafkajs's own restart: it rejoins from the committed offsets and forgets which
        // partitions were paused, so a paused partition would run on past the position it
        // reported. The sink's owner restarts a crashed consumer from its own positions instead.
        restartOnFailure: () => Promise.resolve(false),
      },
    });
    this.consumer = consumer;
    // kafkajs reports a failure to join during run() as a crash and resolves run() anyway.
    let crashedWhileStarting: Error | undefined;
    consumer.on(consumer.events.CRASH, (e) => {
      const { error } = e.payload as { error?: Error };
      const crash = error ?? new Error('kafkajs consumer crashed');
      if (this.consumer !== consumer) return; // stopped on purpose, or replaced
      if (this.running === consumer) {
        // kafkajs refuses pause and resume on a crashed consumer; until the next start they
        // are only remembered, and the start applies the caller's pauses anyway.
        this.running = undefined;
        sink.onCrash(crash);
      } else crashedWhileStarting ??= crash;
    });
    consumer.on(consumer.events.END_BATCH_PROCESS, (e) => {
      const p = e.payload as {
        partition: number;
        batchSize: number;
        firstOffset: string | null;
        lastOffset: string;
        highWatermark?: string;
      };
      if (p.batchSize === 0 && p.firstOffset !== null) {
        sink.onFilteredRange(
          p.partition,
          BigInt(p.firstOffset),
          BigInt(p.lastOffset),
          BigInt(p.highWatermark ?? p.lastOffset),
        );
      }
    });
    try {
      await this.runConsumer(consumer, positions, () => crashedWhileStarting);
    } catch (error) {
      // Not left half started: the next start, or stop, would find nothing to stop.
      if (this.consumer === consumer) this.consumer = undefined;
      if (this.running === consumer) this.running = undefined;
      await consumer.disconnect().catch(() => undefined);
      throw error;
    }
  }

  private async runConsumer(
    consumer: Consumer,
    positions: Map<number, bigint>,
    crashed: () => Error | undefined,
  ): Promise<void> {
    const { topic, sink } = this.options;
    await consumer.connect();
    // fromBeginning: should a fetch ever run before the seeks below, it reads from the log start,
    // which the caller's positions filter out as already consumed; it never skips ahead.
    await consumer.subscribe({ topics: [topic], fromBeginning: true });
    await consumer.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      partitionsConsumedConcurrently: Math.min(4, positions.size),
      eachBatch: async (payload) => {
        const { batch } = payload;
        if (!payload.isRunning() || payload.isStale() || !sink.wants(batch.partition)) return;
        const fault = injectedFault('consumer-fetch');
        // Fails as a batch that cannot be decoded fails inside kafkajs: the consumer crashes.
        if (fault) throw new NotImplemented(fault.message);
        // kafkajs's Batch keeps the offset it fetched from; its type declaration leaves it out.
        const { fetchedOffset } = batch as unknown as { fetchedOffset: string };
        const records =
          columnarRecordsOf(batch.messages) ?? recordsOf(batch.messages, fetchedOffset);
        const highWatermark = BigInt(batch.highWatermark);
        const done = sink.onRecords(batch.partition, records, highWatermark);
        if (done) await done;
        const last = batch.messages[batch.messages.length - 1];
        if (last) {
          payload.resolveOffset(last.offset);
          // A fetch that ends with a transaction's marker (or aborted records) hands over the
          // records before it only; kafkajs moves past the marker (resolving the last message
          // resolves the batch's end), and so must the sink, or a partition whose log ends with
          // a marker would never reach the high watermark nor a stop offset past it.
          const end = BigInt(batch.lastOffset());
          const lastDelivered = BigInt(last.offset);
          if (end > lastDelivered) {
            sink.onFilteredRange(batch.partition, lastDelivered + 1n, end, highWatermark);
          }
        }
        await payload.heartbeat();
      },
    });
    const crash = crashed();
    if (crash) throw crash;
    // kafkajs applies pending seeks before each fetch; committing the start positions makes a
    // later rejoin (broker restart, coordinator move) resume from them, not from the log start.
    for (const [partition, offset] of positions) {
      consumer.seek({ topic, partition, offset: offset.toString() });
    }
    if (this.consumer !== consumer) {
      await consumer.disconnect(); // stopped meanwhile: nothing else would stop this one
      return;
    }
    this.running = consumer;
    if (this.paused.size > 0) consumer.pause([{ topic, partitions: [...this.paused] }]);
    await this.commit(positions);
  }

  pause(partitions: number[]): void {
    for (const p of partitions) this.paused.add(p);
    this.running?.pause([{ topic: this.options.topic, partitions }]);
  }

  resume(positions: Map<number, bigint>): void {
    for (const p of positions.keys()) this.paused.delete(p);
    // With no running consumer, a start under way begins the partition at its own position,
    // which is this one: a paused partition does not move.
    const consumer = this.running;
    if (!consumer) return;
    for (const [partition, offset] of positions) {
      consumer.seek({ topic: this.options.topic, partition, offset: offset.toString() });
    }
    consumer.resume([{ topic: this.options.topic, partitions: [...positions.keys()] }]);
  }

  async commit(positions: Map<number, bigint>): Promise<void> {
    const consumer = this.running;
    if (!consumer || positions.size === 0) return;
    await consumer.commitOffsets(
      [...positions].map(([partition, offset]) => ({
        topic: this.options.topic,
        partition,
        offset: offset.toString(),
      })),
    );
  }

  /**
   * With no member of ours in the group (the consumer is stopped), a committed offset of a
   * partition that left this receiver would stay, its lag growing forever in every exporter's
   * eyes. Kafka refuses to delete one partition's offsets of a group subscribed to the topic, and
   * kafkajs has no OffsetDelete: the group goes, and the start that follows commits the positions
   * it starts from into it anew. Nothing is lost: the caller's positions are the truth.
   */
  private async purgeLeftPartitions(partitions: number[]): Promise<void> {
    const keep = new Set(partitions);
    try {
      const admin = await this.adminClient();
      const [committed] = await admin.fetchOffsets({
        groupId: this.options.groupId,
        topics: [this.options.topic],
      });
      const left = (committed?.partitions ?? [])
        .filter((p) => BigInt(p.offset) >= 0n && !keep.has(p.partition))
        .map((p) => p.partition)
        .sort((a, b) => a - b);
      if (left.length > 0) {
        await this.deleteGroupOnceEmpty(admin);
        this.options.onGroupPurged?.(left);
      }
      this.purgePending = false;
    } catch (error) {
      this.options.onGroupPurgeFailed?.(error instanceof Error ? error : new Error(String(error)));
    }
  }

  /**
   * Deletes the group, waiting while a member of a killed incarnation keeps it non-empty: that
   * member goes when its session expires, and this start's join would wait for it anyway.
   */
  private async deleteGroupOnceEmpty(admin: Admin): Promise<void> {
    const deadline = Date.now() + consumerSettings.sessionTimeout + 5_000;
    for (;;) {
      try {
        await admin.deleteGroups([this.options.groupId]);
        return;
      } catch (error) {
        const nonEmpty = failedGroups(error)?.some((g) => g.errorCode === nonEmptyGroup) === true;
        if (!nonEmpty || Date.now() > deadline) throw error;
      }
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }

  async deleteGroup(): Promise<void> {
    // Called after stop(), which let go of this consumer's admin: a client for this call only.
    const { admin } = await this.connectAdmin();
    try {
      await this.deleteGroupOnceEmpty(admin);
    } catch (error) {
      // A group that does not exist (never joined, or deleted already) is deleted.
      if (!failedGroups(error)?.every((g) => g.errorCode === groupIdNotFound)) throw error;
    } finally {
      await this.releaseAdmin(admin);
    }
  }

  knownHighWatermarks(): Map<number, bigint> {
    // A consumer fetches every partition it does not pause at least once per fetch wait: a log
    // end reported within two of them is current enough.
    const now = Date.now();
    const fresh = 2 * (this.options.fetchWaitMs ?? fetchWaitMs);
    const fetched = new Map<number, bigint>();
    for (const p of this.partitions) {
      const seen = this.fetchedEnds.get(p);
      if (seen && now - seen.at < fresh) fetched.set(p, seen.end);
    }
    return fetched;
  }

  async highWatermarks(): Promise<Map<number, bigint>> {
    // The running consumer's fetches say where the logs end: the broker is asked only about
    // partitions not fetched lately (paused, stopped, or before the first fetch). A receiver of
    // hundreds of idle cubes asked it for every cube every two seconds.
    const now = Date.now();
    const fetched = this.knownHighWatermarks();
    if (fetched.size === this.partitions.length) return fetched;
    // Asked every few seconds: a partition that is really gone (a topic recreated smaller) must
    // not cost a new admin connection at each ask, so the client is renewed at most this often.
    const renew =
      now - this.adminRenewedAt >= adminRenewIntervalMs
        ? async () => {
            this.adminRenewedAt = now;
            const stale = this.admin;
            this.admin = undefined;
            if (stale) await this.renewAdmin(stale);
          }
        : undefined;
    const offsets = await readTopicOffsets(
      this.options.topic,
      this.partitions,
      () => this.adminClient(),
      renew,
    );
    return new Map([...[...offsets].map(([p, o]) => [p, o.high] as const), ...fetched]);
  }

  protected async stopConsumer(): Promise<void> {
    const consumer = this.consumer;
    this.consumer = undefined;
    this.running = undefined;
    // kafkajs is told to stop first (its fetch loop ends at the fetch under way), then that fetch
    // is ended: an idle consumer's is held by the broker for up to fetchWaitMs.
    const stopped = consumer?.disconnect();
    this.closeReports?.();
    this.closeReports = undefined;
    // The log ends known stay: each is dated, and is used only while it is fresh (see
    // knownHighWatermarks). A new cube's consumer starts twice in a moment (with no partitions
    // as the cube opens, then with those its first assign gives): the second start keeps what the
    // first one's admin client read.
    if (stopped) await stopped;
  }

  async stop(): Promise<void> {
    await this.stopConsumer();
    const admin = this.admin;
    this.admin = undefined;
    if (admin) await this.releaseAdmin(admin);
  }
}
