// One cube on one receiver: the coordinator of its partitions (partition-state.ts), the ingest
// pipeline, the segments, their checkpoints (checkpoint.ts, cube-store.ts) and hand-offs
// (hand-off-scheduler.ts). Admin requests become partition events; periodic work seals, flushes,
// hands off and purges. What the cube shows of itself is in status-view.ts, its query in query.ts.
import type { Kafka } from 'kafkajs';
import { type CubeSchema, type KafkaSource, cubeSpecDigest } from '../api/cube.ts';
import type {
  CubeStatus,
  DrainResponse,
  PartitionStatus,
  QueryResponse,
} from '../protocol/admin-api.ts';
import type { Logger } from '../observability/logger.ts';
import type { PartitionConsumer, PartitionSink } from '../kafka/partition-consumer.ts';
import { SessionPartitionConsumer } from '../kafka/session-consumer.ts';
import { consumerGroupId } from '../kafka/consumer-group.ts';
import { type CubeKey, defaultCubeNamespace } from '../protocol/cube-paths.ts';
import { ChannelError } from './channel-error.ts';
import {
  type CheckpointHeader,
  type CubeCheckpoint,
  type SegmentCheckpoint,
  checkpointVersion,
  partitionCheckpoint,
  purgedCheckpoint,
  restoredPartition,
  restoredSegment,
  segmentCheckpoint,
} from './checkpoint.ts';
import {
  ConsumerSupervisor,
  type RestartPolicy,
  type SupervisorClock,
} from './consumer-supervisor.ts';
import { CubeStore, readCubeCheckpoint } from './cube-store.ts';
import { cubeDirectory } from './cube-directories.ts';
import type { DeepStorage } from './deep-storage.ts';
import { HandOffScheduler, type HandOffRetryPolicy } from './hand-off-scheduler.ts';
import { IngestPipeline } from './ingest-pipeline.ts';
import { LostOffsets } from './lost-offsets.ts';
import type { ReceiverMetrics } from './metrics.ts';
import { ChannelMetrics } from './channel-metrics.ts';
import {
  type PartitionEffect,
  type PartitionEvent,
  type PartitionState,
  isIdle,
  isLive,
  transition,
} from './partition-state.ts';
import { type CubeQuery, querySegments } from './query.ts';
import { type Row, type Segment, SegmentManager, type SegmentState } from './segments.ts';
import { type RangeJson, rangeMapFromJson, rangesFromJson } from './offset-ranges.ts';
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

/**
 * The longest a partition's next batch waits for hand-offs that are behind: the consumer sends
 * its heartbeats between batches, every 3 s at most, within a session of 10 s
 * (partition-consumer.ts); a stop of the consumer (a partition assigned or released) waits too.
 */
const handOffBackPressureMs = 3_000;

/** A fragment taken from a segment's delta, to be written under its name. */
interface FragmentToWrite {
  name: string;
  rows: Map<string, Row>;
}

/**
 * What one flush writes, taken from memory in one synchronous step: the checkpoint's positions
 * cover exactly the rows of the fragments it names, whatever is ingested while it is written.
 */
interface FlushSnapshot {
  fragments: FragmentToWrite[];
  header: CheckpointHeader;
  records: SegmentCheckpoint[];
  held: number[];
  counts: Record<SegmentState, number>;
  /** The positions of the partitions not released: the group's committed offsets once durable. */
  positions: Map<number, bigint>;
}

/** A partition's state after an event, and what the event asked of the consumer. */
interface Outcome {
  ps: PartitionState;
  effects: PartitionEffect[];
}

export class CubeChannel {
  readonly cube: string;
  readonly spec: CubeSpec;
  readonly segments: SegmentManager;
  /** Of the spec this channel runs, reported in status so the operator sees a rollout land. */
  readonly specDigest: string;
  private readonly options: ChannelOptions;
  private readonly partitions = new Map<number, PartitionState>();
  private readonly store: CubeStore;
  private readonly consumer: PartitionConsumer;
  /** Restarts the consumer after any failure, from the positions and pauses held here. */
  private readonly supervisor: ConsumerSupervisor;
  private readonly ingest: IngestPipeline;
  private readonly handOffs: HandOffScheduler;
  private readonly metrics: ChannelMetrics;
  /** Per segment key, the fragment files holding its rows. */
  private readonly segmentFragments = new Map<number, string[]>();
  /** Offsets Kafka deleted before they were read, per partition. */
  private readonly lost = new LostOffsets();
  private fragmentSeq = 0;
  private dirty = false;
  /** The flushes of this cube, one after the other: each starts when the one before ended. */
  private flushes: Promise<void> = Promise.resolve();
  /** A flush asked for that has not started: who asks for one meanwhile is given this one. */
  private nextFlush: Promise<void> | undefined;
  /**
   * Set when a flush failed after it took the changes: the next one writes every segment's
   * record, and the fragments it took and could not write, again.
   */
  private rewriteAll = false;
  private unwritten: FragmentToWrite[] = [];
  private timer: NodeJS.Timeout | undefined;
  /** The periodic work under way: ticks, and the hand-off passes they started with their flush. */
  private readonly background = new Set<Promise<unknown>>();
  private lastHighWatermarkRefresh = 0;
  private drainWaiters: (() => void)[] = [];
  private closed = false;
  /** Consumer starts and stops, one at a time. */
  private consumerLifecycle: Promise<void> = Promise.resolve();

  constructor(options: ChannelOptions) {
    this.options = options;
    this.cube = options.cube;
    this.spec = options.spec;
    this.segments = new SegmentManager(options.spec.schema);
    this.specDigest = cubeSpecDigest(options.spec);
    this.store = new CubeStore(cubeDirectory(options.dataDir, this.key));
    this.metrics = new ChannelMetrics(options.metrics, {
      namespace: options.namespace ?? '',
      cube: options.cube,
      topic: options.spec.source.topic,
    });
    this.ingest = new IngestPipeline({
      cube: options.cube,
      schema: options.spec.schema,
      partitions: this.partitions,
      segments: this.segments,
      consumer: () => this.consumer,
      metrics: this.metrics,
      logger: options.logger,
      delivered: () => this.supervisor.delivered(),
      onProgress: (ps) => this.afterProgress(ps),
      onOffsetsLost: (ps, from, to) => this.offsetsLost(ps, from, to),
    });
    this.handOffs = new HandOffScheduler({
      storage: options.deepStorage,
      ...(options.handOffRetry ? { retry: options.handOffRetry } : {}),
      target: {
        namespace: options.namespace,
        cube: options.cube,
        replicaSet: options.replicaSet,
        receiver: options.receiverId,
        schema: options.spec.schema,
      },
      segments: this.segments,
      metrics: this.metrics,
      logger: options.logger,
      retentionMs: options.handedOffRetentionMs ?? defaultHandedOffRetentionMs,
      lostBefore: (segment) => this.lost.before(segment.ranges),
      // One checkpoint after a pass, not one per hand-off: a hand-off the checkpoint does not
      // record yet is found done when it is repeated after a crash.
      onHandedOff: (segment) => {
        this.segmentFragments.delete(segment.key);
        this.dirty = true;
      },
    });
    const sink: PartitionSink = {
      onRecords: (p, records, hw) =>
        bothSettled(
          this.ingest.onRecords(p, records, hw),
          // Sealing faster than it hands off, a receiver catching up slows down to its hand-offs.
          this.handOffs.caughtUp(handOffBackPressureMs),
        ),
      onFilteredRange: (p, first, last, hw) => this.ingest.onFilteredRange(p, first, last, hw),
      wants: (p) => isLive(this.partitions.get(p)?.state ?? 'released'),
      onCrash: (error) => this.supervisor.crashed(error),
    };
    this.consumer =
      options.consumerFactory?.(sink) ??
      new SessionPartitionConsumer({
        kafka: options.kafka,
        topic: options.spec.source.topic,
        groupId: this.consumerGroup,
        sink,
        onGroupPurged: (partitions) =>
          this.log.info('consumer group deleted: it held offsets of partitions no longer here', {
            cube: this.cube,
            group: this.consumerGroup,
            partitions: partitions.join(','),
          }),
        onGroupPurgeFailed: (error) =>
          this.log.warn(
            'cannot delete the consumer group of partitions no longer here; the next start retries',
            { cube: this.cube, group: this.consumerGroup, error: error.message },
          ),
      });
    this.supervisor = new ConsumerSupervisor({
      start: () => this.startConsumer(),
      ...(options.consumerRestart ? { policy: options.consumerRestart } : {}),
      ...(options.clock ? { clock: options.clock } : {}),
      onFailure: (error, restartInMs) => {
        this.metrics.consumerFailed();
        this.log.error('kafka consumer failed; restarting it from the positions held', {
          cube: this.cube,
          error: error.message,
          errorName: error.name,
          restartInMs,
        });
      },
      onRecovered: (downMs) => {
        // Silence is counted from when the consumer works again, not across the outage.
        const now = Date.now();
        for (const ps of this.partitions.values()) ps.lastRecordAt = now;
        this.metrics.consumerRecovered();
        this.log.info('kafka consumer recovered', { cube: this.cube, downMs });
      },
    });
  }

  get namespace(): string | undefined {
    return this.options.namespace;
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
    if (checkpoint) this.restore(checkpoint);
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
      this.rewriteAll = true;
      await this.inFlushTurn(() => this.writeSnapshot(this.takeSnapshot()));
    }
    await this.restartConsumer();
    this.timer = setInterval(() => this.inBackground(this.tick()), this.options.flushIntervalMs);
  }

  static readSpec(
    dataDir: string,
    key: CubeKey,
  ): (CubeSpec & { replicaSet: string; namespace?: string }) | undefined {
    const checkpoint = readCubeCheckpoint(cubeDirectory(dataDir, key));
    return (
      checkpoint && {
        source: checkpoint.source,
        schema: checkpoint.schema,
        replicaSet: checkpoint.replicaSet,
        ...(checkpoint.namespace ? { namespace: checkpoint.namespace } : {}),
      }
    );
  }

  private restore(c: CubeCheckpoint): void {
    const now = Date.now();
    for (const p of c.partitions) {
      const { state, clock } = restoredPartition(p, now);
      this.partitions.set(p.partition, state);
      this.segments.restoreClock(p.partition, clock);
      this.countLost(p.partition, 0n);
    }
    this.segments.restorePurgedBelow(c.purgedBelow ?? null);
    this.segments.restorePurgedCoverage(c.purged ? rangeMapFromJson(c.purged) : undefined);
    for (const s of c.segments) {
      const segment = this.segments.restoreSegment(restoredSegment(s, now));
      for (const name of s.fragments)
        this.segments.restoreRows(segment, this.store.readFragment(name));
      this.segmentFragments.set(segment.key, [...s.fragments]);
      if (s.handOffPath) this.handOffs.restorePath(segment.key, s.handOffPath);
    }
    this.ingest.restoreCounters(c.ingested ?? 0, c.rejected);
    this.lost.restore(c.lost);
    this.fragmentSeq = c.fragmentSeq;
    this.log.info('restored from checkpoint', {
      partitions: c.partitions.map((p) => `${p.partition}@${p.position}`).join(','),
      segments: c.segments.length,
    });
  }

  /**
   * One start or stop at a time: two overlapping starts (two assign requests at once) would leave
   * a consumer that nothing stops. Each reads the partitions when it runs, and which of them to
   * pause once it has started, since a pause or resume may come while it starts.
   */
  private serially(step: () => Promise<void>): Promise<void> {
    const next = this.consumerLifecycle.then(step);
    this.consumerLifecycle = next.catch(() => undefined);
    return next;
  }

  /** Starts the consumer anew; a failure is reported in the status and retried, never thrown. */
  private restartConsumer(): Promise<void> {
    return this.supervisor.start();
  }

  /**
   * A fresh consumer from the positions held here, with the partitions that are not live paused
   * again: after a crash too, nothing runs past a position this receiver reported.
   */
  private startConsumer(): Promise<void> {
    return this.serially(async () => {
      if (this.closed) return;
      const assigned = [...this.partitions.values()].filter((p) => p.state !== 'released');
      await this.consumer.start(new Map(assigned.map((p) => [p.partition, p.position])));
      const idle = assigned.filter((p) => !isLive(p.state)).map((p) => p.partition);
      if (idle.length > 0) this.consumer.pause(idle);
    });
  }

  /** Graceful stop: flush and checkpoint, then close the consumer. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.supervisor.stop();
    if (this.timer) clearInterval(this.timer);
    // A hand-off cut short is repeated after the restart; one that finished is checkpointed now.
    await this.handOffs.stop();
    await this.flush();
    await this.serially(() => this.consumer.stop());
    await this.ingest.close();
  }

  // ---- partition events ------------------------------------------------------------------

  /**
   * Applies events to partitions, all or none: every transition is checked before any takes
   * effect. Carries out the effects on the consumer and the segments, except a restart, which
   * the caller awaits.
   */
  private apply(events: [number, PartitionEvent][]): Outcome[] {
    const now = Date.now();
    const transitions = events.map(([p, event]) => {
      const t = transition(this.partitions.get(p), p, event, now);
      if (!t.ok)
        throw new ChannelError(
          t.reason,
          `partition ${p} of cube ${this.cube} ${t.message}`,
          t.field,
        );
      return t;
    });
    const outcomes = transitions.map(({ next, effects }) => {
      const current = this.partitions.get(next.partition);
      // A new epoch is a new object: batches of the old one still on the worker see it and drop.
      if (!current || current.epoch !== next.epoch) this.partitions.set(next.partition, next);
      else if (current !== next) Object.assign(current, next);
      return { ps: this.partitions.get(next.partition)!, effects };
    });
    const having = (effect: PartitionEffect): PartitionState[] =>
      outcomes.filter((o) => o.effects.includes(effect)).map((o) => o.ps);
    for (const ps of having('settlePending'))
      this.segments.settlePending(ps.partition, ps.epoch, now);
    for (const ps of having('fenceExcess')) this.fenceExcess(ps);
    const toPause = having('pauseConsumer');
    if (toPause.length > 0) this.consumer.pause(toPause.map((ps) => ps.partition));
    const toResume = having('resumeConsumer');
    if (toResume.length > 0)
      this.consumer.resume(new Map(toResume.map((ps) => [ps.partition, ps.position])));
    return outcomes;
  }

  /** Whether any outcome changed something: durable before answering, then. */
  private changedAny(outcomes: Outcome[]): boolean {
    return outcomes.some((o) => o.effects.length > 0);
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
    this.wakeDrainWaiters();
  }

  /**
   * The partition ran past the offset its next owner starts from (`stopOffset`), under an epoch
   * that is over: every segment holding any of its offsets from there on is dropped, never handed
   * off, so the excess is never committed twice. The replica's copy of those windows goes with
   * them (its siblings, which the move stopped in time, hold theirs). A handed-off copy no commit
   * record names is dropped too (a fenced replica set's: a fence keeps it so); one committed
   * already cannot be taken back: that is logged as an error.
   */
  private fenceExcess(ps: PartitionState): void {
    const stop = ps.stopOffset;
    if (stop === null) return;
    for (const segment of this.segments.holdingFrom(ps.partition, stop)) {
      // A handed-off copy no commit record names (a fenced replica set's) is never the data.
      if (segment.state === 'HANDED_OFF' && this.handOffs.committed(segment.windowStart)) {
        this.log.error('a handed-off segment holds offsets past a stop offset', {
          cube: this.cube,
          partition: ps.partition,
          epoch: ps.epoch,
          stopOffset: stop.toString(),
          windowStart: new Date(segment.windowStart).toISOString(),
        });
        continue;
      }
      this.segments.discard(segment);
      this.forget(segment);
      this.metrics.segmentFenced();
    }
    this.dirty = true;
    this.log.warn('partition released past its stop offset: segments holding the excess fenced', {
      cube: this.cube,
      partition: ps.partition,
      epoch: ps.epoch,
      stopOffset: stop.toString(),
      position: ps.position.toString(),
    });
  }

  /** Reported, counted and checkpointed; no segment covers them, so none says they were read. */
  private offsetsLost(ps: PartitionState, from: bigint, to: bigint): void {
    const count = this.lost.record(ps.partition, from, to);
    this.countLost(ps.partition, count);
    this.dirty = true;
    this.log.warn('offsets deleted by Kafka before they were read; consuming from the log start', {
      cube: this.cube,
      partition: ps.partition,
      epoch: ps.epoch,
      lostFrom: from.toString(),
      lostTo: to.toString(),
      lost: count.toString(),
    });
  }

  private countLost(partition: number, count: bigint): void {
    this.metrics.offsetsLost(partition, count);
  }

  private wakeDrainWaiters(): void {
    const waiters = this.drainWaiters;
    this.drainWaiters = [];
    for (const w of waiters) w();
  }

  // ---- periodic work: seal, flush, hand off, purge ---------------------------------------

  private async tick(): Promise<void> {
    if (this.closed) return;
    try {
      await this.refreshHighWatermarks();
      if (this.closed) return; // close() flushes
      this.sealReadyWindows();
      this.purgeExpired();
      // A hand-off starts from what a checkpoint holds: a segment sealed here is durably sealed.
      await this.flush();
      if (!this.closed) this.startHandOffs();
    } catch (error) {
      this.log.error('periodic work failed; retrying on the next tick', {
        cube: this.cube,
        error: (error as Error).message,
      });
    }
  }

  /**
   * A hand-off pass in the background: uploads to a slow or unreachable object store must not
   * hold sealing and flushing back. Its result is checkpointed when it ends.
   */
  private startHandOffs(): void {
    this.inBackground(
      this.handOffs
        .handOffSealed()
        .then(() => (this.closed ? undefined : this.flush()))
        .catch((error: unknown) =>
          this.log.error('hand-off pass failed; retrying on the next tick', {
            cube: this.cube,
            error: (error as Error).message,
          }),
        ),
    );
  }

  /** Keeps periodic work that never rejects until it ends, for whenIdle(). */
  private inBackground(work: Promise<unknown>): void {
    const tracked = work.finally(() => this.background.delete(tracked));
    this.background.add(tracked);
  }

  /**
   * Resolves once the periodic work under way has ended, and the work it started: a tick's
   * flush, the hand-off pass after it and the flush that records the pass. Its files are written
   * in real time, also when a test fakes the clock that starts the ticks.
   */
  async whenIdle(): Promise<void> {
    while (this.background.size > 0) await Promise.all(this.background);
  }

  private async refreshHighWatermarks(): Promise<void> {
    if (Date.now() - this.lastHighWatermarkRefresh < 2_000) return;
    this.lastHighWatermarkRefresh = Date.now();
    this.applyHighWatermarks(await this.consumer.highWatermarks());
  }

  private applyHighWatermarks(hws: Map<number, bigint>): void {
    for (const ps of this.partitions.values()) {
      const hw = hws.get(ps.partition);
      if (hw === undefined) continue;
      ps.highWatermark = hw;
      if (isLive(ps.state)) this.afterProgress(ps);
    }
  }

  private sealReadyWindows(): void {
    const owned = [...this.partitions.values()]
      .filter((p) => p.state !== 'released')
      .map((p) => p.partition);
    if (owned.length === 0) return;
    const now = Date.now();
    // A consumer that is down or just restarted delivers nothing: its partitions are not silent.
    const consumerUp = this.supervisor.isUp();
    const idle = (p: number): boolean => {
      const ps = this.partitions.get(p);
      return !ps || (consumerUp && isIdle(ps, now, this.options.idleTimeoutMs));
    };
    for (const segment of this.segments.sealableWindows(owned, idle)) {
      this.segments.seal(segment);
      this.dirty = true;
      this.log.info('window sealed', {
        cube: this.cube,
        windowStart: new Date(segment.windowStart).toISOString(),
      });
    }
  }

  /**
   * Seals every ACTIVE segment holding offsets of partitions just released, so that this
   * replica's data of them is handed off and committed now rather than when their windows close
   * (the windows stay open for the partitions kept: their later events open the next
   * generation). Data of a partition moved away that its old set has not committed is what keeps
   * that set from being failed over; sealed at the release, it is committed within a hand-off.
   */
  private sealReleased(partitions: number[]): boolean {
    let sealed = false;
    for (const segment of [...this.segments.segments.values()]) {
      if (segment.state !== 'ACTIVE') continue;
      if (!partitions.some((p) => (segment.ranges.get(p)?.length ?? 0) > 0)) continue;
      this.segments.seal(segment);
      this.dirty = true;
      sealed = true;
      this.log.info('window sealed at a release', {
        cube: this.cube,
        windowStart: new Date(segment.windowStart).toISOString(),
        partitions,
      });
    }
    return sealed;
  }

  /** Handed-off segments past their retention leave memory and, at the next flush, the disk. */
  private purgeExpired(): void {
    for (const segment of this.handOffs.expired(Date.now())) {
      this.segments.purge(segment);
      this.forget(segment);
      this.dirty = true;
    }
  }

  /** What the channel keeps beside a segment that it no longer holds: hand-off and fragments. */
  private forget(segment: Segment): void {
    this.handOffs.forget(segment.key);
    this.segmentFragments.delete(segment.key);
  }

  /**
   * Writes fragments for changed segments and a checkpoint naming them with the positions: when
   * the promise resolves, everything in memory when flush() was called is durable. What is
   * written is taken from memory in one synchronous step, and written off the event loop (the
   * consumers of every cube go on meanwhile). One flush at a time: asked for while one runs, a
   * flush starts when it ends, and every request made until then shares that one. A flush that
   * fails rejects; the next one writes what it could not.
   */
  flush(): Promise<void> {
    this.nextFlush ??= this.inFlushTurn(() => {
      this.nextFlush = undefined;
      return this.flushNow();
    });
    return this.nextFlush;
  }

  /** Runs `step` after every flush asked for before it has ended. */
  private inFlushTurn(step: () => Promise<void>): Promise<void> {
    const run = this.flushes.then(step);
    this.flushes = run.catch(() => undefined);
    return run;
  }

  private async flushNow(): Promise<void> {
    if (!this.dirty && !this.ingest.dirty && !this.rewriteAll) return;
    const end = this.metrics.flushTimer();
    const snapshot = this.takeSnapshot();
    await this.writeSnapshot(snapshot);
    end();
    this.metrics.publish(
      this.partitions.values(),
      (p) => this.segments.clock(p).watermark,
      snapshot.counts,
    );
    // Every checkpoint's positions become the group's committed offsets, paused and stopped
    // partitions' too: lag exporters then see what this receiver holds, no more, no less.
    void this.consumer.commit(snapshot.positions).catch(() => undefined);
  }

  /**
   * Takes what the next checkpoint holds, in one synchronous step: the segments' deltas as new
   * fragments, the records of the segments changed since the last checkpoint (of every segment
   * after a failed one), and the positions and counters. The changes count as written from here.
   */
  private takeSnapshot(): FlushSnapshot {
    const fragments = this.takeUnwritten();
    for (const segment of this.segments.segments.values()) {
      if (segment.delta.size === 0) continue;
      this.fragmentSeq += 1;
      const name = `${String(this.fragmentSeq).padStart(10, '0')}-${segment.key}.jsonl`;
      fragments.push({ name, rows: this.segments.takeDelta(segment) });
      const list = this.segmentFragments.get(segment.key) ?? [];
      list.push(name);
      this.segmentFragments.set(segment.key, list);
    }
    const all = this.rewriteAll;
    const counts = { ACTIVE: 0, IMMUTABLE: 0, HANDED_OFF: 0 };
    const changed = this.segments.changes();
    const records = [];
    for (const segment of this.segments.segments.values()) {
      counts[segment.state] += 1;
      if (!all && !changed.has(segment.key)) continue;
      records.push(
        segmentCheckpoint(
          segment,
          [...(this.segmentFragments.get(segment.key) ?? [])],
          this.handOffs.pathOf(segment.key),
        ),
      );
    }
    this.segments.clearChanges();
    this.rewriteAll = false;
    this.dirty = false;
    this.ingest.dirty = false;
    return {
      fragments,
      header: this.checkpointHeader(),
      records,
      held: [...this.segments.segments.keys()],
      counts,
      positions: new Map(
        [...this.partitions.values()]
          .filter((p) => p.state !== 'released')
          .map((p) => [p.partition, p.position]),
      ),
    };
  }

  /** Fragments a failed flush took: written again unless their segment has gone since. */
  private takeUnwritten(): FragmentToWrite[] {
    if (this.unwritten.length === 0) return [];
    const named = new Set([...this.segmentFragments.values()].flat());
    const fragments = this.unwritten.filter((f) => named.has(f.name));
    this.unwritten = [];
    return fragments;
  }

  /**
   * Writes a snapshot's fragments, then commits its checkpoint. On failure the next snapshot
   * holds what this one took: its fragments, and every segment's record.
   */
  private async writeSnapshot(snapshot: FlushSnapshot): Promise<void> {
    try {
      await this.store.writeFragments(
        snapshot.fragments.map(({ name, rows }) => ({ name, rows: rows.values() })),
      );
      await this.store.commit(snapshot.header, snapshot.records, snapshot.held);
    } catch (error) {
      this.unwritten = snapshot.fragments;
      this.rewriteAll = true;
      this.dirty = true;
      throw error;
    }
  }

  private checkpointHeader(): CheckpointHeader {
    return {
      cube: this.cube,
      ...(this.options.namespace ? { namespace: this.options.namespace } : {}),
      replicaSet: this.options.replicaSet,
      source: this.spec.source,
      schema: this.spec.schema,
      partitions: [...this.partitions.values()].map((p) =>
        partitionCheckpoint(p, this.segments.clock(p.partition)),
      ),
      rejected: Object.fromEntries(this.ingest.rejected),
      ingested: this.ingest.ingested,
      fragmentSeq: this.fragmentSeq,
      purgedBelow: this.segments.firstUnpurgedWindow,
      ...purgedCheckpoint(this.segments.purgedOffsets),
      lost: this.lost.toJson(),
    };
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
      const ps = this.partitions.get(s.partition)!;
      const elsewhere = rangesFromJson(s.committedElsewhere ?? []).filter(
        (r) => r.to > ps.position,
      );
      if (elsewhere.length > 0) ps.elsewhere = elsewhere;
      else delete ps.elsewhere;
      this.countLost(s.partition, 0n); // the series exists from the start, at zero
      this.log.info('partition assigned', {
        cube: this.cube,
        partition: s.partition,
        epoch: s.epoch,
        position: s.position,
      });
    }
    if (fresh.length > 0) {
      this.dirty = true;
      await this.flush();
      await this.restartConsumer();
      // The log ends the consumer learnt as it started: the answer (and the operator's first
      // status of a new cube) has its lag without waiting for the next periodic refresh.
      const known = this.consumer.knownHighWatermarks?.();
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
    if (this.changedAny(outcomes)) this.dirty = true;
    // Durable before answering: a restarted receiver must not run past what it reported.
    await this.flush();
    return answer;
  }

  async resume(partitions: number[]): Promise<PartitionStatus[]> {
    const outcomes = this.apply(partitions.map((p) => [p, { kind: 'resume' }]));
    const answer = outcomes.map((o) => this.partitionStatus(o.ps));
    if (this.changedAny(outcomes)) this.dirty = true;
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
    this.dirty = true;
    await this.flush();
    const deadline = Date.now() + timeoutMs;
    const allStopped = (): boolean => outcomes.every(({ ps }) => ps.state === 'stopped');
    while (!allStopped() && Date.now() < deadline) {
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, Math.min(250, Math.max(1, deadline - Date.now())));
        this.drainWaiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
    const answer = {
      done: allStopped(),
      partitions: outcomes.map(({ ps }) => this.partitionStatus(ps)),
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
    const changed = this.changedAny(outcomes);
    if (changed) this.dirty = true;
    const sealed = this.sealReleased(
      outcomes.filter((o) => o.effects.length > 0).map((o) => o.ps.partition),
    );
    await this.flush();
    // Handed off now, not at the next tick: the set's failover waits on that commit.
    if (sealed && !this.closed) this.startHandOffs();
    // A consumer without the released partitions: its start drops their committed offsets
    // from the group (a lag no one will ever consume). Not awaited: the new owner starts now.
    if (changed) void this.restartConsumer();
    return answer;
  }

  /** Seals every segment (IMMUTABLE) and hands them off; waits up to `waitMs` for the hand-off. */
  async seal(waitMs: number): Promise<CubeStatus> {
    this.apply([...this.partitions.keys()].map((p) => [p, { kind: 'seal' }]));
    for (const s of this.segments.segments.values())
      if (s.state === 'ACTIVE') this.segments.seal(s);
    this.dirty = true;
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
    return [...this.partitions.values()].some((p) => p.state !== 'released');
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
      this.supervisor.health(),
      this.lost.of(ps.partition),
    );
  }

  status(): CubeStatus {
    const { listed, counts } = segmentsView(this.segments.segments.values());
    return {
      namespace: this.key.namespace,
      cube: this.cube,
      replicaSet: this.options.replicaSet,
      receiver: this.options.receiverId,
      topic: this.spec.source.topic,
      specDigest: this.specDigest,
      partitions: [...this.partitions.values()]
        .sort((a, b) => a.partition - b.partition)
        .map((ps) => this.partitionStatus(ps)),
      segments: listed.map((s) =>
        segmentStatus(
          s,
          this.segments.rowCount(s),
          this.handOffs.report(s.key),
          this.lost.before(s.ranges),
        ),
      ),
      segmentCounts: counts,
      ingested: this.ingest.ingested,
      rejected: Object.fromEntries(this.ingest.rejected),
      consumer: consumerStatus(this.supervisor.health()),
      ...coverageStatus(
        this.segments.coverage((seg, p, r) => this.handOffs.committedRange(seg.windowStart, p, r)),
        new Map(
          [...this.partitions.values()].flatMap((ps) =>
            ps.elsewhere?.length ? [[ps.partition, ps.elsewhere] as const] : [],
          ),
        ),
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

/** What a sink's onRecords returns for two waits: nothing when neither waits, else both. */
function bothSettled(
  a: void | Promise<void>,
  b: Promise<void> | undefined,
): Promise<void> | undefined {
  if (!a) return b;
  if (!b) return a;
  return Promise.all([a, b]).then(() => undefined);
}
