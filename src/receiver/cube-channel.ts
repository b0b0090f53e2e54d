// One cube on one receiver: the wiring of its partitions (partition-table.ts), consumer
// (cube-consumer.ts), ingest pipeline, segments and their upkeep (segment-upkeep.ts), checkpoints
// (checkpoint-writer.ts) and hand-offs (hand-off-scheduler.ts), opened, ticked (channel-ticker.ts)
// and closed together. Admin requests become partition events; the status is in status-view.ts.
import type { Kafka } from 'kafkajs';
import { type CubeSchema, type KafkaSource, cubeSpecDigest } from '../api/cube.ts';
import {
  countStates,
  summarySegments,
  type CubeStatus,
  type CubeSummary,
  type DrainResponse,
  type PartitionStatus,
  type QueryResponse,
} from '../protocol/admin-api.ts';
import type { Logger } from '../observability/logger.ts';
import type { PartitionConsumer, PartitionSink } from '../kafka/partition-consumer.ts';
import { consumerGroupId } from '../kafka/consumer-group.ts';
import { type CubeKey, defaultCubeNamespace } from '../protocol/cube-paths.ts';
import { ChannelTicker } from './channel-ticker.ts';
import { checkpointVersion } from './checkpoint.ts';
import { CheckpointWriter, type CheckpointWriterOptions } from './checkpoint-writer.ts';
import type { RestartPolicy, SupervisorClock } from './consumer-supervisor.ts';
import { CubeConsumer } from './cube-consumer.ts';
import { CubeStore, readCubeCheckpoint } from './cube-store.ts';
import { cubeDirectory } from './cube-directories.ts';
import type { DeepStorage } from './deep-storage.ts';
import type { HandOffTarget } from './hand-off.ts';
import { HandOffScheduler, type HandOffRetryPolicy } from './hand-off-scheduler.ts';
import { IngestPipeline } from './ingest-pipeline.ts';
import { LostOffsets } from './lost-offsets.ts';
import type { ReceiverMetrics } from './metrics.ts';
import { ChannelMetrics } from './channel-metrics.ts';
import { type PartitionEvent, type PartitionState, isLive } from './partition-state.ts';
import {
  type Outcome,
  PartitionTable,
  allStopped,
  changedAny,
  withEffect,
} from './partition-table.ts';
import { type CubeQuery, querySegments } from './query.ts';
import { SegmentManager } from './segments.ts';
import { SegmentUpkeep } from './segment-upkeep.ts';
import { type RangeJson, rangesFromJson } from './offset-ranges.ts';
import {
  consumerStatus,
  coverageStatus,
  partitionStatus,
  segmentStatus,
  segmentsView,
} from './status-view.ts';

export interface CubeSpec {
  source: KafkaSource;
  schema: CubeSchema;
}

export interface ChannelOptions {
  cube: string;
  /**
   * The CubeAssignment's namespace; undefined for a cube restored from a checkpoint written
   * before receivers knew it, until an assign names it. It is kept under `default` then (its
   * directory, its consumer group, its key on the receiver), and its metrics carry an empty
   * `namespace` label.
   */
  namespace?: string;
  /** The CubeAssignment's metadata.uid; undefined while not known (adoptCubeUid). */
  cubeUid?: string | undefined;
  spec: CubeSpec;
  replicaSet: string;
  receiverId: string;
  dataDir: string;
  /** Where sealed segments go; shared by every channel of the receiver, closed by it. */
  deepStorage: DeepStorage;
  /** Backoff between hand-off attempts of a segment (default 1 s doubling to 30 s). */
  handOffRetry?: HandOffRetryPolicy;
  kafka: Kafka;
  metrics: ReceiverMetrics;
  logger: Logger;
  flushIntervalMs: number;
  /**
   * A partition that has received no record for this long (and has nothing left to read) counts
   * as past every window. Silence, not being caught up: a live consumer is caught up most of the time.
   */
  idleTimeoutMs: number;
  /** How long a handed-off segment stays held after its hand-off (default 1 h). */
  handedOffRetentionMs?: number;
  /** Factory for the consumer; tests and other clients may replace kafkajs. */
  consumerFactory?: (sink: PartitionSink) => PartitionConsumer;
  /** How a failed consumer is restarted (defaults: 1 s doubling to 30 s, healthy after 10 s). */
  consumerRestart?: Partial<RestartPolicy>;
  /** Time for the consumer's restarts; a manual clock in unit tests. */
  clock?: SupervisorClock;
}

export interface PartitionStart {
  partition: number;
  position: string;
  epoch: number;
  watermark: number | null;
  /** Ranges a fenced replica set committed, to read over (admin-api partitionStart). */
  committedElsewhere?: RangeJson[] | undefined;
}

export const defaultHandedOffRetentionMs = 3_600_000;

export class CubeChannel {
  readonly cube: string;
  readonly spec: CubeSpec;
  readonly segments: SegmentManager;
  /** Of the spec this channel runs, reported in status so the operator sees a rollout land. */
  readonly specDigest: string;
  private readonly options: ChannelOptions;
  /** Where hand-offs go and whose they are; its cubeUid is set when an assign names it. */
  private readonly target: HandOffTarget;
  /** What the checkpoint's header names; its cubeUid is the target's. */
  private readonly identity: CheckpointWriterOptions['identity'];
  private readonly partitions: PartitionTable;
  private readonly store: CubeStore;
  private readonly consumer: CubeConsumer;
  private readonly ingest: IngestPipeline;
  private readonly handOffs: HandOffScheduler;
  private readonly checkpoints: CheckpointWriter;
  private readonly upkeep: SegmentUpkeep;
  private readonly ticker: ChannelTicker;
  private readonly metrics: ChannelMetrics;
  /** Offsets Kafka deleted before they were read, per partition. */
  private readonly lost = new LostOffsets();
  private closed = false;

  constructor(options: ChannelOptions) {
    this.options = options;
    this.cube = options.cube;
    this.spec = options.spec;
    this.segments = new SegmentManager(options.spec.schema);
    this.specDigest = cubeSpecDigest(options.spec);
    this.partitions = new PartitionTable(options.cube);
    this.store = new CubeStore(cubeDirectory(options.dataDir, this.key));
    this.metrics = new ChannelMetrics(options.metrics, {
      namespace: options.namespace ?? '',
      cube: options.cube,
      topic: options.spec.source.topic,
    });
    this.ingest = new IngestPipeline({
      cube: options.cube,
      schema: options.spec.schema,
      partitions: this.partitions.view,
      segments: this.segments,
      consumer: () => this.consumer,
      metrics: this.metrics,
      logger: options.logger,
      delivered: () => this.consumer.delivered(),
      onProgress: (ps) => this.afterProgress(ps),
      onOffsetsLost: (ps, from, to) => this.offsetsLost(ps, from, to),
    });
    this.target = {
      namespace: options.namespace,
      cube: options.cube,
      cubeUid: options.cubeUid,
      replicaSet: options.replicaSet,
      receiver: options.receiverId,
      schema: options.spec.schema,
    };
    const target = this.target;
    this.identity = {
      cube: options.cube,
      namespace: options.namespace,
      get cubeUid() {
        return target.cubeUid;
      },
      replicaSet: options.replicaSet,
      source: options.spec.source,
      schema: options.spec.schema,
    };
    this.handOffs = new HandOffScheduler({
      storage: options.deepStorage,
      ...(options.handOffRetry ? { retry: options.handOffRetry } : {}),
      target: this.target,
      segments: this.segments,
      metrics: this.metrics,
      logger: options.logger,
      retentionMs: options.handedOffRetentionMs ?? defaultHandedOffRetentionMs,
      lostBefore: (segment) => this.lost.before(segment.ranges),
      // One checkpoint after a pass, not one per hand-off: a hand-off the checkpoint does not
      // record yet is found done when it is repeated after a crash.
      onHandedOff: (segment) => {
        this.checkpoints.forget(segment.key);
        this.checkpoints.markChanged();
      },
    });
    this.checkpoints = new CheckpointWriter({
      identity: this.identity,
      store: this.store,
      partitions: this.partitions,
      segments: this.segments,
      ingest: this.ingest,
      lost: this.lost,
      handOffs: this.handOffs,
      metrics: this.metrics,
      logger: options.logger,
      commitPositions: (positions) => this.consumer.commit(positions),
    });
    this.consumer = new CubeConsumer({
      cube: options.cube,
      topic: options.spec.source.topic,
      group: this.consumerGroup,
      kafka: options.kafka,
      logger: options.logger,
      partitions: this.partitions,
      ingest: this.ingest,
      handOffs: this.handOffs,
      metrics: this.metrics,
      consumerFactory: options.consumerFactory,
      consumerRestart: options.consumerRestart,
      clock: options.clock,
    });
    this.upkeep = new SegmentUpkeep({
      cube: options.cube,
      segments: this.segments,
      partitions: this.partitions,
      handOffs: this.handOffs,
      checkpoints: this.checkpoints,
      metrics: this.metrics,
      logger: options.logger,
      idleTimeoutMs: options.idleTimeoutMs,
      consumerUp: () => this.consumer.isUp(),
    });
    this.ticker = new ChannelTicker({
      cube: options.cube,
      intervalMs: options.flushIntervalMs,
      logger: options.logger,
      consumer: this.consumer,
      onHighWatermarks: (hws) => this.applyHighWatermarks(hws),
      upkeep: this.upkeep,
      checkpoints: this.checkpoints,
      handOffs: this.handOffs,
    });
  }

  get namespace(): string | undefined {
    return this.options.namespace;
  }

  /** The CubeAssignment's metadata.uid, when an assign (or the checkpoint) named it. */
  get cubeUid(): string | undefined {
    return this.target.cubeUid;
  }

  /**
   * Takes the uid an assign names, while the cube holds no segment: from then on written into its
   * hand-offs and commit records, and into its checkpoint (a restart keeps it). A cube that holds
   * segments keeps what it had (none, restored from a checkpoint of before uids; or another one):
   * a hand-off's directory is named with the uid (handOffKey), and every commit of a window lists
   * the directories of the segments it holds, named again from the uid of the moment, so a uid
   * taken between a hand-off and its window's commit would list a directory nobody wrote (the
   * real-node e2e's upgrade, 2026-12-05). Its records are then judged as those of before uids.
   */
  adoptCubeUid(cubeUid: string): void {
    if (this.target.cubeUid === cubeUid) return;
    if (this.segments.segments.size > 0) {
      this.log.info(
        'an assign names a uid this cube did not hold; it holds segments, and keeps writing as before until it is opened anew',
        { held: this.target.cubeUid ?? null, cubeUid },
      );
      return;
    }
    this.target.cubeUid = cubeUid;
    this.checkpoints.markChanged();
  }

  /** Where the receiver keeps this cube: a cube whose namespace is not known yet, in `default`. */
  get key(): CubeKey {
    return { namespace: this.options.namespace ?? defaultCubeNamespace, name: this.options.cube };
  }

  /** The Kafka consumer group of this cube on this receiver, the same at every start. */
  get consumerGroup(): string {
    return consumerGroupId(
      this.options.namespace ?? defaultCubeNamespace,
      this.cube,
      this.options.receiverId,
    );
  }

  private get log(): Logger {
    return this.options.logger;
  }

  // ---- lifecycle -------------------------------------------------------------------------

  /** Restores the last checkpoint, if any, and starts consuming. */
  async open(): Promise<void> {
    const checkpoint = this.store.readCheckpoint();
    const removed = this.store.removeUnlisted(checkpoint);
    if (removed > 0)
      this.log.info('removed fragments written after the last checkpoint', { removed });
    if (checkpoint) this.checkpoints.restore(checkpoint);
    // A new cube, or one whose source changed (the same topic through other brokers) or whose
    // namespace was just adopted: the checkpoint names the spec and namespace this channel runs,
    // so a restart comes back with them. One of an older version is written anew, every segment
    // with it.
    if (
      !checkpoint ||
      checkpoint.version !== checkpointVersion ||
      JSON.stringify(checkpoint.source) !== JSON.stringify(this.spec.source) ||
      checkpoint.namespace !== this.options.namespace
    ) {
      await this.checkpoints.writeAll();
    }
    await this.consumer.restart();
    this.ticker.start();
  }

  static readSpec(
    dataDir: string,
    key: CubeKey,
  ): (CubeSpec & { replicaSet: string; namespace?: string; cubeUid?: string }) | undefined {
    const checkpoint = readCubeCheckpoint(cubeDirectory(dataDir, key));
    return (
      checkpoint && {
        source: checkpoint.source,
        schema: checkpoint.schema,
        replicaSet: checkpoint.replicaSet,
        ...(checkpoint.namespace ? { namespace: checkpoint.namespace } : {}),
        ...(checkpoint.cubeUid ? { cubeUid: checkpoint.cubeUid } : {}),
      }
    );
  }

  /** Graceful stop: flush and checkpoint, then close the consumer. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.consumer.stopRestarts();
    this.ticker.stop();
    // A hand-off cut short is repeated after the restart; one that finished is checkpointed now.
    await this.handOffs.stop();
    await this.flush();
    await this.consumer.stop();
    await this.ingest.close();
  }

  /** Every change in memory when called is durable once it resolves (checkpoint-writer.ts). */
  flush(): Promise<void> {
    return this.checkpoints.flush();
  }

  /** Resolves once the periodic work under way, and the work it started, has ended. */
  whenIdle(): Promise<void> {
    return this.ticker.whenIdle();
  }

  // ---- partition events ------------------------------------------------------------------

  /**
   * Applies events to partitions, all or none, and carries out their effects on the consumer and
   * the segments, except a restart, which the caller awaits.
   */
  private apply(events: [number, PartitionEvent][]): Outcome[] {
    const now = Date.now();
    const outcomes = this.partitions.apply(events, now);
    for (const ps of withEffect(outcomes, 'settlePending'))
      this.segments.settlePending(ps.partition, ps.epoch, now);
    for (const ps of withEffect(outcomes, 'fenceExcess')) this.upkeep.fenceExcess(ps);
    const toPause = withEffect(outcomes, 'pauseConsumer');
    if (toPause.length > 0) this.consumer.pause(toPause.map((ps) => ps.partition));
    const toResume = withEffect(outcomes, 'resumeConsumer');
    if (toResume.length > 0)
      this.consumer.resume(new Map(toResume.map((ps) => [ps.partition, ps.position])));
    return outcomes;
  }

  private afterProgress(ps: PartitionState): void {
    if (ps.state !== 'draining') return; // the one state progress moves on
    const [outcome] = this.apply([[ps.partition, { kind: 'progress' }]]);
    if (!outcome?.effects.includes('pauseConsumer')) return;
    this.log.info('partition drained to its stop offset', {
      cube: this.cube,
      partition: ps.partition,
      epoch: ps.epoch,
      stopOffset: ps.stopOffset?.toString(),
    });
    this.partitions.drained();
  }

  private applyHighWatermarks(hws: Map<number, bigint>): void {
    for (const ps of this.partitions.values()) {
      const hw = hws.get(ps.partition);
      if (hw === undefined) continue;
      ps.highWatermark = hw;
      if (isLive(ps.state)) this.afterProgress(ps);
    }
  }

  /** Reported, counted and checkpointed; no segment covers them, so none says they were read. */
  private offsetsLost(ps: PartitionState, from: bigint, to: bigint): void {
    const count = this.lost.record(ps.partition, from, to);
    this.metrics.offsetsLost(ps.partition, count);
    this.checkpoints.markChanged();
    this.log.warn('offsets deleted by Kafka before they were read; consuming from the log start', {
      cube: this.cube,
      partition: ps.partition,
      epoch: ps.epoch,
      lostFrom: from.toString(),
      lostTo: to.toString(),
      lost: count.toString(),
    });
  }

  // ---- admin operations ------------------------------------------------------------------

  /**
   * Takes partitions at the given positions and epochs. The same request twice changes nothing;
   * an epoch older than the one held is refused (Conflict), a newer one restarts the partition.
   */
  async assign(starts: PartitionStart[]): Promise<CubeStatus> {
    const outcomes = this.apply(
      starts.map((s) => [
        s.partition,
        { kind: 'assign', epoch: s.epoch, position: BigInt(s.position) },
      ]),
    );
    const fresh = starts.filter((_, i) => outcomes[i]!.effects.includes('restartConsumer'));
    for (const s of fresh) {
      this.segments.raiseWatermark(s.partition, s.watermark);
      this.partitions.readOver(s.partition, rangesFromJson(s.committedElsewhere ?? []));
      this.metrics.offsetsLost(s.partition, 0n); // the series exists from the start, at zero
      this.log.info('partition assigned', {
        cube: this.cube,
        partition: s.partition,
        epoch: s.epoch,
        position: s.position,
      });
    }
    if (fresh.length > 0) {
      this.checkpoints.markChanged();
      await this.flush();
      await this.consumer.restart();
      // The log ends the consumer learnt as it started: the answer (and the operator's first
      // status of a new cube) has its lag without waiting for the next periodic refresh.
      const known = this.consumer.knownHighWatermarks();
      if (known) this.applyHighWatermarks(known);
    }
    return this.status();
  }

  /**
   * Stops consuming; returns each partition's position (next offset to consume). The answer is
   * the partitions as the request left them, given once a checkpoint holds them (the admin
   * requests below answer the same way). A request that changes nothing flushes too: the same
   * request a moment before may still be writing what it changed.
   */
  async pause(partitions: number[]): Promise<PartitionStatus[]> {
    const outcomes = this.apply(partitions.map((p) => [p, { kind: 'pause' }]));
    const answer = outcomes.map((o) => this.partitionStatus(o.ps));
    if (changedAny(outcomes)) this.checkpoints.markChanged();
    // Durable before answering: a restarted receiver must not run past what it reported.
    await this.flush();
    return answer;
  }

  async resume(partitions: number[]): Promise<PartitionStatus[]> {
    const outcomes = this.apply(partitions.map((p) => [p, { kind: 'resume' }]));
    const answer = outcomes.map((o) => this.partitionStatus(o.ps));
    if (changedAny(outcomes)) this.checkpoints.markChanged();
    await this.flush();
    return answer;
  }

  /**
   * Consumes each partition up to (not including) its stop offset and stops it there. A partition
   * already at its stop offset is done at once. Resolves when all are stopped or at the deadline.
   */
  async drain(stopOffsets: Record<string, string>, timeoutMs: number): Promise<DrainResponse> {
    const outcomes = this.apply(
      Object.entries(stopOffsets).map(([p, o]) => [
        Number(p),
        { kind: 'drain', stopOffset: BigInt(o) },
      ]),
    );
    this.checkpoints.markChanged();
    await this.flush();
    const draining = outcomes.map((o) => o.ps);
    await this.partitions.untilStopped(draining, Date.now() + timeoutMs);
    const answer = {
      done: allStopped(draining),
      partitions: draining.map((ps) => this.partitionStatus(ps)),
    };
    await this.flush();
    return answer;
  }

  /**
   * Stops consuming the partitions for good (until assigned again); their data stays. With stop
   * offsets (the offsets their next owners start from), a partition short of its stop offset is
   * refused, and one past it has the segments holding the excess fenced.
   */
  async release(
    partitions: number[],
    stopOffsets: Record<string, string> = {},
  ): Promise<PartitionStatus[]> {
    const outcomes = this.apply(
      partitions.map((p) => {
        const stop = stopOffsets[String(p)];
        return [
          p,
          { kind: 'release', ...(stop === undefined ? {} : { stopOffset: BigInt(stop) }) },
        ];
      }),
    );
    const answer = outcomes.map((o) => this.partitionStatus(o.ps));
    const changed = changedAny(outcomes);
    if (changed) this.checkpoints.markChanged();
    const sealed = this.upkeep.sealReleased(
      outcomes.filter((o) => o.effects.length > 0).map((o) => o.ps.partition),
    );
    await this.flush();
    // Handed off now, not at the next tick: the set's failover waits on that commit.
    if (sealed) this.ticker.startHandOffs();
    // A consumer without the released partitions: its start drops their committed offsets
    // from the group (a lag no one will ever consume). Not awaited: the new owner starts now.
    if (changed) void this.consumer.restart();
    return answer;
  }

  /** Seals every segment (IMMUTABLE) and hands them off; waits up to `waitMs` for the hand-off. */
  async seal(waitMs: number): Promise<CubeStatus> {
    this.apply(this.partitions.numbers().map((p) => [p, { kind: 'seal' }]));
    this.upkeep.sealAll();
    this.checkpoints.markChanged();
    await this.flush();
    const deadline = Date.now() + waitMs;
    do {
      await untilDeadline(this.handOffs.handOffSealed(), deadline);
      await this.flush();
      if (this.allHandedOff() || Date.now() >= deadline) break;
      await new Promise((r) => setTimeout(r, 100));
    } while (Date.now() < deadline);
    return this.status();
  }

  allHandedOff(): boolean {
    return [...this.segments.segments.values()].every((s) => s.state === 'HANDED_OFF');
  }

  hasLivePartitions(): boolean {
    return this.partitions.hasAssigned();
  }

  /** Removes the cube's local state and its metric series after close(). */
  removeLocalData(): void {
    this.store.removeAll();
    this.metrics.removeAll();
  }

  /** Removes the cube's series after close(): a channel of another namespace replaces it. */
  removeMetrics(): void {
    this.metrics.removeAll();
  }

  /** Removes the cube's consumer group from the broker after close(): the cube left here. */
  async deleteConsumerGroup(): Promise<void> {
    await this.consumer.deleteGroup();
    this.log.info('consumer group deleted', { cube: this.cube, group: this.consumerGroup });
  }

  // ---- reading ---------------------------------------------------------------------------

  private partitionStatus(ps: PartitionState): PartitionStatus {
    return partitionStatus(
      ps,
      this.segments.clock(ps.partition).watermark,
      this.consumer.health(),
      this.lost.of(ps.partition),
    );
  }

  status(): CubeStatus {
    const { listed, counts } = segmentsView(this.segments.segments.values());
    return {
      ...this.statusBase(),
      segments: listed.map((s) =>
        segmentStatus(
          s,
          this.segments.rowCount(s),
          this.handOffs.report(s.key),
          this.lost.before(s.ranges),
        ),
      ),
      segmentCounts: counts,
    };
  }

  /** The status with its segments counted, not listed: what the operator reads. */
  summary(): CubeSummary {
    const counts = countStates(this.segments.segments.values());
    return { ...this.statusBase(), segments: summarySegments(counts) };
  }

  private statusBase(): Omit<CubeStatus, 'segments' | 'segmentCounts'> {
    return {
      namespace: this.key.namespace,
      cube: this.cube,
      replicaSet: this.options.replicaSet,
      receiver: this.options.receiverId,
      topic: this.spec.source.topic,
      specDigest: this.specDigest,
      partitions: this.partitions.sorted().map((ps) => this.partitionStatus(ps)),
      ingested: this.ingest.ingested,
      rejected: Object.fromEntries(this.ingest.rejected),
      consumer: consumerStatus(this.consumer.health()),
      ...coverageStatus(
        this.segments.coverage((seg, p, r) => this.handOffs.committedRange(seg.windowStart, p, r)),
        this.partitions.elsewhere(),
      ),
    };
  }

  query(q: CubeQuery): QueryResponse {
    return querySegments(
      this.cube,
      this.spec.schema,
      this.segments.segments.values(),
      q,
      this.segments.partitions,
      (segment) => this.lost.before(segment.ranges),
    );
  }
}

/** Waits for `work` or until `deadline` (epoch ms), whichever comes first; `work` goes on. */
async function untilDeadline(work: Promise<void>, deadline: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    work,
    new Promise<void>((resolve) => {
      timer = setTimeout(resolve, Math.max(0, deadline - Date.now()));
    }),
  ]);
  clearTimeout(timer);
}
