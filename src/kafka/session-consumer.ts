// A cube's consumer on its receiver's fetch session (fetch-session.ts): no consumer group joined,
// no connection or fetch loop of its own. The group (one per cube and receiver, consumer-group.ts)
// still holds the committed offsets, what lag exporters read, written as a consumer outside any
// group writes them.
import type { Admin, Kafka } from 'kafkajs';
import { failedGroups, groupIdNotFound, nonEmptyGroup } from './consumer-group.ts';
import { type Subscription, fetchSessionOf, sessionFetchWaitMs } from './fetch-session.ts';
import type { PartitionConsumer, PartitionSink } from './partition-consumer.ts';
import { readTopicOffsets } from './topic-offsets.ts';

export interface SessionConsumerOptions {
  /** The receiver's client for the cube's source: its fetch session is shared by its cubes. */
  kafka: Kafka;
  topic: string;
  /** The consumer group, the same for every start (consumerGroupId). */
  groupId: string;
  sink: PartitionSink;
  /** Told when a start removed offsets committed for partitions this consumer no longer reads. */
  onGroupPurged?: (partitions: number[]) => void;
  /** Told when that removal failed; the next start tries again. */
  onGroupPurgeFailed?: (error: Error) => void;
}

/**
 * The partitions' log ends are read again through a fresh view of the topic at most this often
 * when some are missing (see highWatermarks).
 */
const metadataRenewIntervalMs = 30_000;
/**
 * How long a group deletion waits while the group has a member: one left by a receiver of an
 * earlier release (which joined groups) goes when its session expires (10 s then).
 */
const memberGoneWithinMs = 15_000;

export class SessionPartitionConsumer implements PartitionConsumer {
  private readonly options: SessionConsumerOptions;
  private subscription: Subscription | undefined;
  /** Partitions paused since the last start: a start applies them. */
  private readonly paused = new Set<number>();
  private partitions: number[] = [];
  /** Where each partition's log ended at the session's last fetch of it (or a read), and when. */
  private readonly fetchedEnds = new Map<number, { end: bigint; at: number }>();
  /** Whether the log ends were read once (at the first start): a new cube's first status has them. */
  private endsRead = false;
  private metadataRenewedAt = -Infinity;
  /**
   * Whether the group may hold offsets of partitions this consumer no longer reads: at the first
   * start (a release may have come just before a crash), after a start without a partition the
   * one before had, and until a check of the group has succeeded. Otherwise a restart after a
   * crash (the broker away, say) asks the broker nothing more than before.
   */
  private purgePending = true;

  constructor(options: SessionConsumerOptions) {
    this.options = options;
  }

  private get session() {
    return fetchSessionOf(this.options.kafka);
  }

  /**
   * The session's admin client (over its connections: not one per cube). The first time, it
   * reads where the topic's logs end, as current as a fetch's report: a new cube's first status
   * has its log ends (and lag) before the session's first fetch of it.
   */
  private async admin(): Promise<Admin> {
    const admin = await this.session.admin();
    if (!this.endsRead) {
      this.endsRead = true;
      const at = Date.now();
      try {
        for (const o of await admin.fetchTopicOffsets(this.options.topic))
          this.fetchedEnds.set(o.partition, { end: BigInt(o.high), at });
      } catch {
        // Not there yet, or not authorized: the start (or the read) that needs it says so.
      }
    }
    return admin;
  }

  async start(positions: Map<number, bigint>): Promise<void> {
    this.paused.clear();
    this.unsubscribe();
    const partitions = [...positions.keys()].sort((a, b) => a - b);
    if (this.partitions.some((p) => !positions.has(p))) this.purgePending = true;
    this.partitions = partitions;
    if (this.purgePending) await this.purgeLeftPartitions(partitions);
    if (partitions.length === 0) return;
    const { topic, sink, groupId } = this.options;
    // First: a broker that cannot be reached fails the start; and an exporter reads the
    // positions this start reads from. The caller's positions stay the truth.
    await this.session.commit(groupId, topic, positions).catch((error: unknown) => {
      // A group with members of its own (a kafkajs consumer of a release before the fetch
      // session, until its session times out): their commits, not ours; the broker answered.
      if (!groupHasMembers(error)) throw error;
    });
    const subscription = await this.session.subscribe(topic, sink, positions, this.fetchedEnds);
    subscription.pause([...this.paused]);
    this.subscription = subscription;
  }

  pause(partitions: number[]): void {
    for (const p of partitions) this.paused.add(p);
    this.subscription?.pause(partitions);
  }

  resume(positions: Map<number, bigint>): void {
    for (const p of positions.keys()) this.paused.delete(p);
    // With no subscription, the next start begins the partition at its own position, which is
    // this one: a paused partition does not move.
    this.subscription?.resume(positions);
  }

  async commit(positions: Map<number, bigint>): Promise<void> {
    if (!this.subscription || this.subscription.closed || positions.size === 0) return;
    await this.session.commit(this.options.groupId, this.options.topic, positions);
  }

  /**
   * With no reader of ours, a committed offset of a partition that left this receiver would stay,
   * its lag growing forever in every exporter's eyes. kafkajs has no OffsetDelete: the group goes,
   * and the start that follows commits the positions it starts from into it anew. Nothing is
   * lost: the caller's positions are the truth.
   */
  private async purgeLeftPartitions(partitions: number[]): Promise<void> {
    const keep = new Set(partitions);
    try {
      const admin = await this.admin();
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

  /** Deletes the group, waiting a while for a member of an earlier release to go. */
  private async deleteGroupOnceEmpty(admin: Admin): Promise<void> {
    const deadline = Date.now() + memberGoneWithinMs;
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
    try {
      await this.deleteGroupOnceEmpty(await this.session.admin());
    } catch (error) {
      // A group that does not exist (never committed to, or deleted already) is deleted.
      if (!failedGroups(error)?.every((g) => g.errorCode === groupIdNotFound)) throw error;
    }
  }

  knownHighWatermarks(): Map<number, bigint> {
    // The session fetches every partition it is not told to hold back at least once per fetch
    // wait: a log end reported within a few of them is current enough.
    const now = Date.now();
    const fresh = 4 * sessionFetchWaitMs;
    const fetched = new Map<number, bigint>();
    for (const p of this.partitions) {
      const seen = this.fetchedEnds.get(p);
      if (seen && now - seen.at < fresh) fetched.set(p, seen.end);
    }
    return fetched;
  }

  async highWatermarks(): Promise<Map<number, bigint>> {
    // The session's fetches say where the logs end: the broker is asked only about partitions
    // not fetched lately (paused, stopped, or before the first fetch). A receiver of hundreds of
    // idle cubes asked it for every cube every two seconds.
    const now = Date.now();
    const fetched = this.knownHighWatermarks();
    if (fetched.size === this.partitions.length) return fetched;
    // kafkajs keeps a topic's metadata for five minutes: partitions added since are missing
    // until it is read again, which a partition really gone (a topic recreated smaller) must not
    // cost at every ask.
    const renew =
      now - this.metadataRenewedAt >= metadataRenewIntervalMs
        ? async () => {
            this.metadataRenewedAt = now;
            await this.session.refreshMetadata();
          }
        : undefined;
    const offsets = await readTopicOffsets(
      this.options.topic,
      this.partitions,
      () => this.admin(),
      renew,
    );
    return new Map([...[...offsets].map(([p, o]) => [p, o.high] as const), ...fetched]);
  }

  private unsubscribe(): void {
    const subscription = this.subscription;
    this.subscription = undefined;
    subscription?.close();
  }

  stop(): Promise<void> {
    this.unsubscribe();
    return Promise.resolve();
  }
}

/** Errors of a commit from outside a group into a group that has members. */
const memberErrors = new Set(['UNKNOWN_MEMBER_ID', 'ILLEGAL_GENERATION', 'REBALANCE_IN_PROGRESS']);

function groupHasMembers(error: unknown): boolean {
  return memberErrors.has(String((error as { type?: unknown }).type));
}
