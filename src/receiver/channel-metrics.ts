// The Prometheus series of one cube on this receiver. Per partition they carry
// {namespace, cube, topic, partition} (kafka_exporter's `topic` and `partition`), per cube
// {namespace, cube}. It remembers which partitions it published, so that a partition leaving the
// cube's channel and the cube leaving the receiver remove their series rather than freeze them at
// their last value.
import type { LabelValues } from 'prom-client';
import { rejectReasons, type RejectReason } from './event.ts';
import type { ReceiverMetrics } from './metrics.ts';
import { type PartitionState, lagOf } from './partition-state.ts';
import type { SegmentState } from './segments.ts';

/**
 * Who a cube is in metrics. `namespace` is '' for a cube restored from a checkpoint of before
 * namespaces, until an assign names its namespace.
 */
export interface CubeIdentity {
  namespace: string;
  cube: string;
  topic: string;
}

type CubeLabel = 'namespace' | 'cube';
type PartitionLabel = CubeLabel | 'topic' | 'partition';

const segmentStates: SegmentState[] = ['ACTIVE', 'IMMUTABLE', 'HANDED_OFF'];
const commitOutcomes = ['committed', 'covered', 'behind', 'fenced'] as const;

export class ChannelMetrics {
  private readonly metrics: ReceiverMetrics;
  private readonly identity: CubeIdentity;
  private readonly cubeLabels: LabelValues<CubeLabel>;
  /** Partitions whose series are exported now. */
  private readonly published = new Set<number>();

  constructor(metrics: ReceiverMetrics, identity: CubeIdentity) {
    this.metrics = metrics;
    this.identity = identity;
    this.cubeLabels = { namespace: identity.namespace, cube: identity.cube };
    // Counters exist at zero from the start, so that rate() and alerts see a cube that never failed.
    metrics.ingested.inc(this.cubeLabels, 0);
    for (const reason of rejectReasons) metrics.rejected.inc({ ...this.cubeLabels, reason }, 0);
    metrics.handOffFailures.inc(this.cubeLabels, 0);
    metrics.segmentsFenced.inc(this.cubeLabels, 0);
    for (const outcome of commitOutcomes) metrics.commits.inc({ ...this.cubeLabels, outcome }, 0);
    metrics.consumerFailures.inc(this.cubeLabels, 0);
    metrics.consumerUp.set(this.cubeLabels, 1);
  }

  private partitionLabels(partition: number): LabelValues<PartitionLabel> {
    return { ...this.cubeLabels, topic: this.identity.topic, partition: String(partition) };
  }

  ingested(count: number): void {
    this.metrics.ingested.inc(this.cubeLabels, count);
  }

  rejected(reason: RejectReason, count: number): void {
    this.metrics.rejected.inc({ ...this.cubeLabels, reason }, count);
  }

  consumerFailed(): void {
    this.metrics.consumerFailures.inc(this.cubeLabels);
    this.metrics.consumerUp.set(this.cubeLabels, 0);
  }

  consumerRecovered(): void {
    this.metrics.consumerUp.set(this.cubeLabels, 1);
  }

  /** Starts timing a flush; call the result when it is done. */
  flushTimer(): () => void {
    const end = this.metrics.flushSeconds.startTimer(this.cubeLabels);
    return () => void end();
  }

  /** Starts timing a hand-off; call the result when it succeeded. */
  handOffTimer(): () => void {
    const end = this.metrics.handOffSeconds.startTimer(this.cubeLabels);
    return () => void end();
  }

  /** Offsets of a partition Kafka deleted before they were read. */
  offsetsLost(partition: number, count: bigint): void {
    this.published.add(partition);
    this.metrics.offsetsLost.inc(this.partitionLabels(partition), Number(count));
  }

  /** A segment dropped unhanded-off: it held offsets past a stop offset (segment-upkeep.ts). */
  segmentFenced(): void {
    this.metrics.segmentsFenced.inc(this.cubeLabels);
  }

  /** A commit of a window's hand-offs (hand-off-commit.ts) and what came of it. */
  commitOutcome(outcome: (typeof commitOutcomes)[number]): void {
    this.metrics.commits.inc({ ...this.cubeLabels, outcome });
  }

  handOffFailed(): void {
    this.metrics.handOffFailures.inc(this.cubeLabels);
  }

  /**
   * Sets the gauges of every partition the channel holds and of its segments; a released
   * partition (moved away, or given up) loses its series. `newestEventTime` is the event time
   * (epoch ms) of the newest event accepted in a partition, or null before the first.
   */
  publish(
    partitions: Iterable<PartitionState>,
    newestEventTime: (partition: number) => number | null,
    segmentCounts: Record<SegmentState, number>,
  ): void {
    for (const ps of partitions) {
      if (ps.state === 'released') {
        this.removePartition(ps.partition);
        continue;
      }
      const labels = this.partitionLabels(ps.partition);
      this.published.add(ps.partition);
      this.metrics.position.set(labels, Number(ps.position));
      const lag = lagOf(ps);
      if (ps.highWatermark !== null && lag !== null) {
        this.metrics.highWatermark.set(labels, Number(ps.highWatermark));
        this.metrics.lag.set(labels, Number(lag));
      }
      const newest = newestEventTime(ps.partition);
      if (newest !== null) this.metrics.newestEventTime.set(labels, newest / 1000);
    }
    for (const state of segmentStates)
      this.metrics.segments.set({ ...this.cubeLabels, state }, segmentCounts[state]);
  }

  /** Removes the series of one partition. */
  removePartition(partition: number): void {
    if (!this.published.delete(partition)) return;
    const labels = this.partitionLabels(partition);
    for (const series of [
      this.metrics.position,
      this.metrics.highWatermark,
      this.metrics.lag,
      this.metrics.newestEventTime,
      this.metrics.offsetsLost,
    ])
      series.remove(labels);
  }

  /** Removes every series of the cube: it left this receiver. */
  removeAll(): void {
    for (const p of [...this.published]) this.removePartition(p);
    const m = this.metrics;
    for (const metric of [
      m.ingested,
      m.handOffFailures,
      m.segmentsFenced,
      m.consumerFailures,
      m.consumerUp,
      m.flushSeconds,
      m.handOffSeconds,
    ])
      metric.remove(this.cubeLabels);
    for (const reason of rejectReasons) m.rejected.remove({ ...this.cubeLabels, reason });
    for (const outcome of commitOutcomes) m.commits.remove({ ...this.cubeLabels, outcome });
    for (const state of segmentStates) m.segments.remove({ ...this.cubeLabels, state });
  }
}
