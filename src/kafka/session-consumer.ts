// A cube's consumer on its receiver's fetch session (fetch-session.ts): no consumer group joined,
// no connection or fetch loop of its own. The group still holds the committed offsets (what lag
// exporters read), written as a consumer outside the group writes them; the group's leftovers are
// purged and the group deleted as by the kafkajs consumer it extends.
import type { Admin } from 'kafkajs';
import { fetchSessionOf, type Subscription } from './fetch-session.ts';
import { KafkajsPartitionConsumer } from './partition-consumer.ts';

export class SessionPartitionConsumer extends KafkajsPartitionConsumer {
  private subscription: Subscription | undefined;

  protected override async begin(positions: Map<number, bigint>): Promise<void> {
    const { kafka, topic, sink, groupId } = this.options;
    const session = fetchSessionOf(kafka);
    // First: a broker that cannot be reached fails the start, as a join did; and a later start
    // (a rejoin before, now an exporter's read) finds the positions it starts from.
    await session.commit(groupId, topic, positions);
    const subscription = await session.subscribe(topic, sink, positions, this.fetchedEnds);
    subscription.pause([...this.paused]);
    this.subscription = subscription;
  }

  override pause(partitions: number[]): void {
    for (const p of partitions) this.paused.add(p);
    this.subscription?.pause(partitions);
  }

  override resume(positions: Map<number, bigint>): void {
    for (const p of positions.keys()) this.paused.delete(p);
    this.subscription?.resume(positions);
  }

  override async commit(positions: Map<number, bigint>): Promise<void> {
    if (!this.subscription || this.subscription.closed || positions.size === 0) return;
    await this.subscription.commit(this.options.groupId, positions);
  }

  /** The session's admin client, over its connections: not one connection per cube. */
  protected override async connectAdmin(): Promise<{ admin: Admin; ends: Map<number, bigint> }> {
    const admin = await fetchSessionOf(this.options.kafka).admin();
    try {
      const offsets = await admin.fetchTopicOffsets(this.options.topic);
      return { admin, ends: new Map(offsets.map((o) => [o.partition, BigInt(o.high)])) };
    } catch {
      // Not there yet, or not authorized: the start (or the read) that needs it says so.
      return { admin, ends: new Map() };
    }
  }

  protected override releaseAdmin(): Promise<void> {
    return Promise.resolve(); // the session's: it stays
  }

  protected override renewAdmin(): Promise<void> {
    return fetchSessionOf(this.options.kafka).refreshMetadata();
  }

  protected override async stopConsumer(): Promise<void> {
    const subscription = this.subscription;
    this.subscription = undefined;
    subscription?.close();
    await super.stopConsumer();
  }
}
