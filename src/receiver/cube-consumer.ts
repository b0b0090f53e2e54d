// One cube's Kafka consumer on this receiver, wired to its channel: records go to the ingest
// pipeline, a crash to the supervisor that starts a fresh consumer from the positions held here.
import type { Kafka } from 'kafkajs';
import type { PartitionConsumer, PartitionSink } from '../kafka/partition-consumer.ts';
import { SessionPartitionConsumer } from '../kafka/session-consumer.ts';
import type { Logger } from '../observability/logger.ts';
import type { ChannelMetrics } from './channel-metrics.ts';
import {
  type ConsumerHealth,
  ConsumerSupervisor,
  type RestartPolicy,
  type SupervisorClock,
} from './consumer-supervisor.ts';
import type { HandOffScheduler } from './hand-off-scheduler.ts';
import type { IngestPipeline } from './ingest-pipeline.ts';
import { isLive } from './partition-state.ts';
import type { PartitionTable } from './partition-table.ts';

/**
 * The longest a partition's next batch waits for hand-offs that are behind: the consumer sends
 * its heartbeats between batches, every 3 s at most, within a session of 10 s
 * (partition-consumer.ts); a stop of the consumer (a partition assigned or released) waits too.
 */
const handOffBackPressureMs = 3_000;

/** What a sink's onRecords returns for two waits: nothing when neither waits, else both. */
export function bothSettled(
  a: void | Promise<void>,
  b: Promise<void> | undefined,
): Promise<void> | undefined {
  if (!a) return b;
  if (!b) return a;
  return Promise.all([a, b]).then(() => undefined);
}

export interface CubeConsumerOptions {
  cube: string;
  topic: string;
  /** The consumer group, the same at every start. */
  group: string;
  kafka: Kafka;
  logger: Logger;
  partitions: PartitionTable;
  ingest: Pick<IngestPipeline, 'onRecords' | 'onFilteredRange'>;
  handOffs: Pick<HandOffScheduler, 'caughtUp'>;
  metrics: Pick<ChannelMetrics, 'consumerFailed' | 'consumerRecovered'>;
  /** Factory for the consumer; tests and other clients may replace kafkajs. */
  consumerFactory?: (sink: PartitionSink) => PartitionConsumer;
  consumerRestart?: Partial<RestartPolicy>;
  clock?: SupervisorClock;
}

export class CubeConsumer {
  private readonly options: CubeConsumerOptions;
  private readonly consumer: PartitionConsumer;
  /** Restarts the consumer after any failure, from the positions and pauses held here. */
  private readonly supervisor: ConsumerSupervisor;
  /** Consumer starts and stops, one at a time. */
  private lifecycle: Promise<void> = Promise.resolve();
  private closed = false;

  constructor(options: CubeConsumerOptions) {
    this.options = options;
    const { cube, group, partitions, ingest, handOffs } = options;
    const sink: PartitionSink = {
      onRecords: (p, records, hw) =>
        bothSettled(
          ingest.onRecords(p, records, hw),
          // Sealing faster than it hands off, a receiver catching up slows down to its hand-offs.
          handOffs.caughtUp(handOffBackPressureMs),
        ),
      onFilteredRange: (p, first, last, hw, oversized) =>
        ingest.onFilteredRange(p, first, last, hw, oversized),
      wants: (p) => partitions.wants(p),
      onCrash: (error) => this.supervisor.crashed(error),
    };
    this.consumer =
      options.consumerFactory?.(sink) ??
      new SessionPartitionConsumer({
        kafka: options.kafka,
        topic: options.topic,
        groupId: group,
        sink,
        onGroupPurged: (purged) =>
          this.log.info('consumer group deleted: it held offsets of partitions no longer here', {
            cube,
            group,
            partitions: purged.join(','),
          }),
        onGroupPurgeFailed: (error) =>
          this.log.warn(
            'cannot delete the consumer group of partitions no longer here; the next start retries',
            { cube, group, error: error.message },
          ),
      });
    this.supervisor = new ConsumerSupervisor({
      start: () => this.startFresh(),
      ...(options.consumerRestart ? { policy: options.consumerRestart } : {}),
      ...(options.clock ? { clock: options.clock } : {}),
      onFailure: (error, restartInMs) => {
        options.metrics.consumerFailed();
        this.log.error('kafka consumer failed; restarting it from the positions held', {
          cube,
          error: error.message,
          errorName: error.name,
          restartInMs,
        });
      },
      onRecovered: (downMs) => {
        // Silence is counted from when the consumer works again, not across the outage.
        const now = Date.now();
        for (const ps of partitions.values()) ps.lastRecordAt = now;
        options.metrics.consumerRecovered();
        this.log.info('kafka consumer recovered', { cube, downMs });
      },
    });
  }

  private get log(): Logger {
    return this.options.logger;
  }

  /** Starts the consumer anew; a failure is reported in the status and retried, never thrown. */
  restart(): Promise<void> {
    return this.supervisor.start();
  }

  /** No more starts or restarts: the channel is closing. */
  stopRestarts(): void {
    this.closed = true;
    this.supervisor.stop();
  }

  /** Stops the consumer, after any start under way. */
  stop(): Promise<void> {
    return this.serially(() => this.consumer.stop());
  }

  pause(partitions: number[]): void {
    this.consumer.pause(partitions);
  }

  resume(positions: Map<number, bigint>): void {
    this.consumer.resume(positions);
  }

  commit(positions: Map<number, bigint>): Promise<void> {
    return this.consumer.commit(positions);
  }

  highWatermarks(): Promise<Map<number, bigint>> {
    return this.consumer.highWatermarks();
  }

  /** The log ends the consumer learnt without asking the broker, if it knows any. */
  knownHighWatermarks(): Map<number, bigint> | undefined {
    return this.consumer.knownHighWatermarks?.();
  }

  deleteGroup(): Promise<void> {
    return this.consumer.deleteGroup();
  }

  /** Records were delivered: a restarted consumer has shown that it works. */
  delivered(): void {
    this.supervisor.delivered();
  }

  health(): ConsumerHealth {
    return this.supervisor.health();
  }

  isUp(): boolean {
    return this.supervisor.isUp();
  }

  /**
   * One start or stop at a time: two overlapping starts (two assign requests at once) would leave
   * a consumer that nothing stops. Each reads the partitions when it runs, and which of them to
   * pause once it has started, since a pause or resume may come while it starts.
   */
  private serially(step: () => Promise<void>): Promise<void> {
    const next = this.lifecycle.then(step);
    this.lifecycle = next.catch(() => undefined);
    return next;
  }

  /**
   * A fresh consumer from the positions held here, with the partitions that are not live paused
   * again: after a crash too, nothing runs past a position this receiver reported.
   */
  private startFresh(): Promise<void> {
    return this.serially(async () => {
      if (this.closed) return;
      const assigned = this.options.partitions.assigned();
      await this.consumer.start(new Map(assigned.map((p) => [p.partition, p.position])));
      const idle = assigned.filter((p) => !isLive(p.state)).map((p) => p.partition);
      if (idle.length > 0) this.consumer.pause(idle);
    });
  }
}
