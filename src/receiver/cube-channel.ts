// One cube on one receiver: its partitions (positions, epochs, pause/drain/stop), its segments,
// checkpoints and hand-offs. Records are applied synchronously (parsing may run on a worker first),
// so a checkpoint always pairs the aggregated data with exactly the positions it came from.
import type { Kafka } from 'kafkajs';
import { type CubeSchema, type KafkaSource, cubeSpecDigest } from '../api/cube.ts';
import type {
  ConsumerStatus,
  CubeStatus,
  DrainResponse,
  PartitionStateName,
  PartitionStatus,
  QueryResponse,
  SegmentStatus,
} from '../protocol/admin-api.ts';
import type { Logger } from '../observability/logger.ts';
import {
  KafkajsPartitionConsumer,
  type ConsumedRecords,
  type PartitionConsumer,
} from '../kafka/partition-consumer.ts';
import { type RejectReason, rejectReasons } from './event.ts';
import { BatchParser, InlineBatchParser, type ParsedBatch } from './batch-parser.ts';
import { type Segment, SegmentManager, combine } from './segments.ts';
import { type OffsetRange, addRange, rangesFromJson, rangesToJson } from './offset-ranges.ts';
import { CubeStore, type CubeCheckpoint } from './cube-store.ts';
import { handOffSegment } from './hand-off.ts';
import type { ReceiverMetrics } from './metrics.ts';
import { faultPoint } from '../observability/fault-injection.ts';
import {
  ConsumerSupervisor,
  type RestartPolicy,
  type SupervisorClock,
} from './consumer-supervisor.ts';

export interface CubeSpec {
  source: KafkaSource;
  schema: CubeSchema;
}

export interface ChannelOptions {
  cube: string;
  spec: CubeSpec;
  replicaSet: string;
  receiverId: string;
  dataDir: string;
  deepStorageDir: string;
  kafka: Kafka;
  metrics: ReceiverMetrics;
  logger: Logger;
  flushIntervalMs: number;
  /**
   * A partition that has received no record for this long (and has nothing left to read) counts
   * as past every window. Silence, not being caught up: a live consumer is caught up most of the time.
   */
  idleTimeoutMs: number;
  /** Factory for the consumer; tests and other clients may replace kafkajs. */
  consumerFactory?: (sink: ChannelSink) => PartitionConsumer;
  /** How a failed consumer is restarted (defaults: 1 s doubling to 30 s, healthy after 10 s). */
  consumerRestart?: Partial<RestartPolicy>;
  /** Time for the consumer's restarts; a manual clock in unit tests. */
  clock?: SupervisorClock;
}

type ChannelSink = ConstructorParameters<typeof KafkajsPartitionConsumer>[0]['sink'];

interface PartitionState {
  partition: number;
  epoch: number;
  state: PartitionStateName;
  position: bigint;
  stopOffset: bigint | null;
  highWatermark: bigint | null;
  /**
   * Wall-clock time of the last record the partition received (a data record, or records the
   * client filtered out such as transaction markers), or of when it last became live: the start
   * of its silence, for idle sealing.
   */
  lastRecordAt: number;
  /**
   * Bumped when a partition that was not live is sent back to `position` (resume, drain): a batch
   * delivered before then may have been dropped while it was paused, so later ones must not apply.
   * A restart keeps it: those batches follow on from each other, and a new epoch is a new state.
   */
  generation: number;
}

/** An error the admin API maps to a status code, with a reason a caller can act on. */
export class ChannelError extends Error {
  readonly status: number;
  readonly field: string | undefined;
  constructor(status: number, message: string, field?: string) {
    super(message);
    this.status = status;
    this.field = field;
  }
}

export interface PartitionStart {
  partition: number;
  position: string;
  epoch: number;
  watermark: number | null;
}

const isLive = (s: PartitionStateName): boolean => s === 'consuming' || s === 'draining';

/**
 * Smaller batches are parsed on the main thread: the round trip to the worker costs more.
 * STREAMCUBE_WORKER_MIN_BATCH overrides it (1 sends every batch to the worker, as a test run does).
 */
const minWorkerBatch = Number(process.env.STREAMCUBE_WORKER_MIN_BATCH) || 64;
/** Batches on the worker beyond which the consumer waits, bounding memory held by them. */
const maxInFlight = 16;

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
  /** Events aggregated since the cube was assigned here; checkpointed, as `rejected` is. */
  private ingested = 0;
  /** Started with the first batch large enough for it: a quiet cube keeps no thread. */
  private batchParser: BatchParser | undefined;
  private inlineParser: InlineBatchParser | undefined;
  private readonly rejected = new Map<RejectReason, number>();
  private readonly handOffErrors = new Map<number, { attempts: number; lastError?: string }>();
  private readonly handOffPaths = new Map<number, string>();
  private readonly segmentFragments = new Map<number, string[]>();
  private fragmentSeq = 0;
  /** Batches (and filtered ranges queued behind them) not applied yet, in delivery order. */
  private inFlight = 0;
  private tail: Promise<void> = Promise.resolve();
  private dirty = false;
  private timer: NodeJS.Timeout | undefined;
  private lastHighWatermarkRefresh = 0;
  private handingOff = false;
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
    this.store = new CubeStore(options.dataDir, options.cube);
    const sink: ChannelSink = {
      onRecords: (p, records, hw) => this.onRecords(p, records, hw),
      onFilteredRange: (p, first, last, hw) => this.onFilteredRange(p, first, last, hw),
      wants: (p) => isLive(this.partitions.get(p)?.state ?? 'released'),
      onCrash: (error) => this.supervisor.crashed(error),
    };
    this.consumer =
      options.consumerFactory?.(sink) ??
      new KafkajsPartitionConsumer({
        kafka: options.kafka,
        topic: options.spec.source.topic,
        groupPrefix: `streamcube.${options.receiverId}.${options.cube}`,
        sink,
      });
    const metricLabels = { cube: options.cube };
    this.supervisor = new ConsumerSupervisor({
      start: () => this.startConsumer(),
      ...(options.consumerRestart ? { policy: options.consumerRestart } : {}),
      ...(options.clock ? { clock: options.clock } : {}),
      onFailure: (error, restartInMs) => {
        options.metrics.consumerFailures.inc(metricLabels);
        options.metrics.consumerUp.set(metricLabels, 0);
        this.log.error('kafka consumer failed; restarting it from the positions held', {
          cube: this.cube,
          error: error.message,
          errorName: error.name,
          restartInMs,
        });
      },
      onRecovered: (downMs) => {
        options.metrics.consumerUp.set(metricLabels, 1);
        this.log.info('kafka consumer recovered', { cube: this.cube, downMs });
      },
    });
    options.metrics.consumerFailures.inc(metricLabels, 0);
    options.metrics.consumerUp.set(metricLabels, 1);
  }

  private get parser(): BatchParser {
    this.batchParser ??= new BatchParser(this.spec.schema);
    return this.batchParser;
  }

  /** Parses a batch here, on the main thread. */
  private parseHere(records: ConsumedRecords): ParsedBatch {
    this.inlineParser ??= new InlineBatchParser(this.spec.schema);
    return this.inlineParser.parse(records.values);
  }

  private get log(): Logger {
    return this.options.logger;
  }

  // ---- lifecycle -------------------------------------------------------------------------

  /** Restores the last checkpoint, if any, and starts consuming. */
  async open(): Promise<void> {
    const checkpoint = this.store.readCheckpoint();
    const removed = this.store.removeUnlistedFragments(checkpoint);
    if (removed > 0)
      this.log.info('removed fragments written after the last checkpoint', { removed });
    if (checkpoint) this.restore(checkpoint);
    // A new cube, or one whose source changed (the same topic through other brokers): the
    // checkpoint names the spec this channel runs, so a restart comes back with it.
    if (!checkpoint || JSON.stringify(checkpoint.source) !== JSON.stringify(this.spec.source))
      this.writeCheckpoint();
    await this.restartConsumer();
    this.timer = setInterval(() => void this.tick(), this.options.flushIntervalMs);
  }

  static readSpec(dataDir: string, cube: string): (CubeSpec & { replicaSet: string }) | undefined {
    const checkpoint = new CubeStore(dataDir, cube).readCheckpoint();
    return (
      checkpoint && {
        source: checkpoint.source,
        schema: checkpoint.schema,
        replicaSet: checkpoint.replicaSet,
      }
    );
  }

  private restore(c: CubeCheckpoint): void {
    for (const p of c.partitions) {
      this.partitions.set(p.partition, {
        partition: p.partition,
        epoch: p.epoch,
        state: p.state,
        position: BigInt(p.position),
        stopOffset: p.stopOffset === null ? null : BigInt(p.stopOffset),
        highWatermark: null,
        lastRecordAt: Date.now(),
        generation: 0,
      });
      const clock = this.segments.clock(p.partition);
      clock.watermark = p.watermark;
      clock.currentWindow = p.currentWindow;
      clock.pending = rangesFromJson(p.pending);
    }
    for (const s of c.segments) {
      const segment = this.segments.restoreSegment({
        windowStart: s.windowStart,
        windowEnd: s.windowEnd,
        state: s.state,
        ranges: new Map(Object.entries(s.ranges).map(([p, r]) => [Number(p), rangesFromJson(r)])),
        epochs: new Map(Object.entries(s.epochs).map(([p, e]) => [Number(p), e])),
        ...(s.handedOffRows === undefined ? {} : { handedOffRows: s.handedOffRows }),
      });
      for (const name of s.fragments)
        this.segments.restoreRows(segment, this.store.readFragment(name));
      this.segmentFragments.set(s.windowStart, [...s.fragments]);
      if (s.handOffPath) this.handOffPaths.set(s.windowStart, s.handOffPath);
    }
    for (const [reason, n] of Object.entries(c.rejected))
      this.rejected.set(reason as RejectReason, n);
    this.ingested = c.ingested ?? 0;
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
    this.flush();
    await this.serially(() => this.consumer.stop());
    await this.batchParser?.close();
  }

  // ---- consumption -----------------------------------------------------------------------

  /**
   * Large batches are parsed on the worker and applied when it answers, in the order they came
   * (one worker, answers in order), so kafkajs fetches the next batches meanwhile; it waits only
   * when too many are outstanding. Applying stays synchronous, so a checkpoint still pairs data
   * with positions: both lag the delivered records until their batch is applied.
   */
  private onRecords(
    partition: number,
    records: ConsumedRecords,
    highWatermark: bigint,
  ): void | Promise<void> {
    this.supervisor.delivered();
    const ps = this.partitions.get(partition);
    if (!ps || !isLive(ps.state)) return;
    const count = records.offsets.length;
    if (count > 0) ps.lastRecordAt = Date.now();
    // Behind a batch still on the worker, even a small one waits its turn.
    if (this.inFlight === 0 && (count < minWorkerBatch || !this.parser.available)) {
      ps.highWatermark = highWatermark;
      this.applyRecords(ps, records.offsets, this.parseHere(records));
      return;
    }
    const generation = ps.generation;
    // Dropped when the partition was paused, released, assigned anew or sought since delivery:
    // it is read again from its position, and applying it could jump over offsets never read.
    const current = (): boolean =>
      this.partitions.get(partition) === ps && ps.generation === generation && isLive(ps.state);
    this.inFlight += 1;
    const applied = this.parser
      .parse(records.values)
      .then(
        (batch) => {
          if (!current()) return;
          ps.highWatermark = highWatermark;
          this.applyRecords(ps, records.offsets, batch);
        },
        (error: unknown) => {
          this.log.warn('batch parser failed; parsing on the main thread', {
            cube: this.cube,
            error: (error as Error).message,
          });
          if (!current()) return;
          ps.highWatermark = highWatermark;
          this.applyRecords(ps, records.offsets, this.parseHere(records));
        },
      )
      .catch((error: unknown) => {
        // Part of the batch may be applied; the consumer reads the rest again from the position
        // rather than let a later batch jump over it.
        this.log.error('applying a batch failed; reading the partition again', {
          cube: this.cube,
          partition,
          error: (error as Error).message,
        });
        if (!current()) return;
        ps.generation += 1;
        this.consumer.resume(new Map([[partition, ps.position]]));
      })
      .finally(() => {
        this.inFlight -= 1;
      });
    this.tail = applied;
    return this.inFlight > maxInFlight ? applied : undefined;
  }

  /** Applies a parsed batch in order: the same positions, skips and rejects on either path. */
  private applyRecords(ps: PartitionState, offsets: Float64Array, batch: ParsedBatch): void {
    const { position, ingested, rejected } = this.segments.ingest(
      ps.partition,
      ps.epoch,
      ps.position,
      ps.stopOffset,
      offsets,
      batch,
    );
    ps.position = position;
    for (let r = 0; r < rejected.length; r++) {
      if (rejected[r]! > 0) this.reject(rejectReasons[r]!, rejected[r]);
    }
    if (ingested > 0) {
      this.ingested += ingested;
      this.options.metrics.ingested.inc({ cube: this.cube }, ingested);
    }
    this.dirty = true;
    this.afterProgress(ps);
  }

  private onFilteredRange(
    partition: number,
    first: bigint,
    last: bigint,
    highWatermark: bigint,
  ): void {
    this.supervisor.delivered();
    if (this.inFlight > 0) {
      // Behind batches still on the worker: the position it must start at is not reached yet.
      this.inFlight += 1;
      this.tail = this.tail
        .then(() => this.onFilteredRangeNow(partition, first, last, highWatermark))
        .catch((error: unknown) => {
          this.log.error('applying a filtered range failed', {
            cube: this.cube,
            partition,
            error: (error as Error).message,
          });
        })
        .finally(() => {
          this.inFlight -= 1;
        });
      return;
    }
    this.onFilteredRangeNow(partition, first, last, highWatermark);
  }

  private onFilteredRangeNow(
    partition: number,
    first: bigint,
    last: bigint,
    highWatermark: bigint,
  ): void {
    const ps = this.partitions.get(partition);
    if (!ps || !isLive(ps.state)) return;
    ps.highWatermark = highWatermark;
    ps.lastRecordAt = Date.now(); // markers and aborted records are records the partition received
    if (first > ps.position || last < ps.position) return;
    let to = last + 1n;
    if (ps.stopOffset !== null && ps.stopOffset < to) to = ps.stopOffset;
    if (to > ps.position) {
      this.segments.skip(partition, ps.epoch, ps.position, to);
      ps.position = to;
      this.dirty = true;
    }
    this.afterProgress(ps);
  }

  private reject(reason: RejectReason, count = 1): void {
    this.rejected.set(reason, (this.rejected.get(reason) ?? 0) + count);
    this.options.metrics.rejected.inc({ cube: this.cube, reason }, count);
  }

  private afterProgress(ps: PartitionState): void {
    if (ps.state === 'draining' && ps.stopOffset !== null && ps.position >= ps.stopOffset) {
      ps.state = 'stopped';
      this.consumer.pause([ps.partition]);
      this.log.info('partition drained to its stop offset', {
        cube: this.cube,
        partition: ps.partition,
        epoch: ps.epoch,
        stopOffset: ps.stopOffset.toString(),
      });
      this.wakeDrainWaiters();
    }
  }

  private wakeDrainWaiters(): void {
    const waiters = this.drainWaiters;
    this.drainWaiters = [];
    for (const w of waiters) w();
  }

  // ---- periodic work: seal, flush, hand off ----------------------------------------------

  private async tick(): Promise<void> {
    if (this.closed) return;
    try {
      await this.refreshHighWatermarks();
      this.sealReadyWindows();
      this.flush();
      this.handOffSealed();
    } catch (error) {
      this.log.error('periodic work failed; retrying on the next tick', {
        cube: this.cube,
        error: (error as Error).message,
      });
    }
  }

  private async refreshHighWatermarks(): Promise<void> {
    if (Date.now() - this.lastHighWatermarkRefresh < 2_000) return;
    this.lastHighWatermarkRefresh = Date.now();
    const hws = await this.consumer.highWatermarks();
    for (const ps of this.partitions.values()) {
      const hw = hws.get(ps.partition);
      if (hw === undefined) continue;
      ps.highWatermark = hw;
      if (isLive(ps.state)) this.afterProgress(ps);
    }
  }

  /**
   * DESIGN §6, "idle means silent": a consuming partition is idle — counts as past every window —
   * once it has received no record for the idle timeout and has nothing left to read (position at
   * the high watermark). Being caught up alone never makes it idle: under a steady trickle a live
   * consumer is caught up nearly all the time, and sealing then would reject the events of the
   * window it is writing to. A paused, draining or stopped partition is never idle: it is only
   * waiting, and its data is still to come. With no high watermark known (broker unreachable),
   * nothing is idle: sealing waits rather than guess.
   */
  private isIdle(partition: number): boolean {
    const ps = this.partitions.get(partition);
    if (!ps) return true;
    return (
      ps.state === 'consuming' &&
      ps.highWatermark !== null &&
      ps.position >= ps.highWatermark &&
      Date.now() - ps.lastRecordAt >= this.options.idleTimeoutMs
    );
  }

  private sealReadyWindows(): void {
    const owned = [...this.partitions.values()]
      .filter((p) => p.state !== 'released')
      .map((p) => p.partition);
    if (owned.length === 0) return;
    for (const segment of this.segments.sealableWindows(owned, (p) => this.isIdle(p))) {
      this.segments.seal(segment);
      this.dirty = true;
      this.log.info('window sealed', {
        cube: this.cube,
        windowStart: new Date(segment.windowStart).toISOString(),
      });
    }
  }

  /** Writes fragments for changed segments and a checkpoint naming them with the positions. */
  flush(): void {
    if (!this.dirty) return;
    const end = this.options.metrics.flushSeconds.startTimer({ cube: this.cube });
    for (const segment of this.segments.segments.values()) {
      if (segment.delta.size === 0) continue;
      this.fragmentSeq += 1;
      const name = `${String(this.fragmentSeq).padStart(10, '0')}-${segment.windowStart}.jsonl`;
      this.store.writeFragment(name, segment.delta.values());
      segment.delta = new Map();
      const list = this.segmentFragments.get(segment.windowStart) ?? [];
      list.push(name);
      this.segmentFragments.set(segment.windowStart, list);
      faultPoint('after-fragment');
    }
    this.writeCheckpoint();
    this.store.removeUnlistedFragments(this.checkpoint());
    this.dirty = false;
    end();
    this.updateGauges();
    void this.consumer
      .commit(
        new Map(
          [...this.partitions.values()]
            .filter((p) => isLive(p.state))
            .map((p) => [p.partition, p.position]),
        ),
      )
      .catch(() => undefined);
  }

  private checkpoint(): CubeCheckpoint {
    return {
      version: 1,
      cube: this.cube,
      replicaSet: this.options.replicaSet,
      source: this.spec.source,
      schema: this.spec.schema,
      partitions: [...this.partitions.values()].map((p) => {
        const clock = this.segments.clock(p.partition);
        return {
          partition: p.partition,
          epoch: p.epoch,
          state: p.state,
          position: p.position.toString(),
          stopOffset: p.stopOffset?.toString() ?? null,
          watermark: clock.watermark,
          currentWindow: clock.currentWindow,
          pending: rangesToJson(clock.pending),
        };
      }),
      segments: [...this.segments.segments.values()].map((s) => ({
        windowStart: s.windowStart,
        windowEnd: s.windowEnd,
        state: s.state,
        fragments: s.state === 'HANDED_OFF' ? [] : (this.segmentFragments.get(s.windowStart) ?? []),
        ranges: Object.fromEntries([...s.ranges].map(([p, r]) => [String(p), rangesToJson(r)])),
        epochs: Object.fromEntries([...s.epochs].map(([p, e]) => [String(p), e])),
        ...(s.handedOffRows === undefined ? {} : { handedOffRows: s.handedOffRows }),
        ...(this.handOffPaths.has(s.windowStart)
          ? { handOffPath: this.handOffPaths.get(s.windowStart) }
          : {}),
      })),
      rejected: Object.fromEntries(this.rejected),
      ingested: this.ingested,
      fragmentSeq: this.fragmentSeq,
    };
  }

  private writeCheckpoint(): void {
    this.store.writeCheckpoint(this.checkpoint());
  }

  private handOffSealed(): void {
    if (this.handingOff) return;
    this.handingOff = true;
    try {
      for (const segment of this.segments.segments.values()) {
        if (segment.state !== 'IMMUTABLE') continue;
        const end = this.options.metrics.handOffSeconds.startTimer({ cube: this.cube });
        try {
          const path = handOffSegment(
            {
              deepStorageDir: this.options.deepStorageDir,
              cube: this.cube,
              replicaSet: this.options.replicaSet,
              receiver: this.options.receiverId,
              schema: this.spec.schema,
            },
            segment,
          );
          faultPoint('after-hand-off');
          segment.handedOffRows = segment.rows.size;
          segment.state = 'HANDED_OFF';
          segment.rows = new Map();
          this.handOffPaths.set(segment.windowStart, path);
          this.handOffErrors.delete(segment.windowStart);
          this.segmentFragments.delete(segment.windowStart);
          this.dirty = true;
          this.flush();
          end();
          this.log.info('segment handed off', {
            cube: this.cube,
            windowStart: segment.windowStart,
            path,
          });
        } catch (error) {
          const e = this.handOffErrors.get(segment.windowStart) ?? { attempts: 0 };
          e.attempts += 1;
          e.lastError = (error as Error).message;
          this.handOffErrors.set(segment.windowStart, e);
          this.options.metrics.handOffFailures.inc({ cube: this.cube });
          this.log.warn('hand-off failed; will retry', {
            cube: this.cube,
            windowStart: segment.windowStart,
            error: e.lastError,
          });
        }
      }
    } finally {
      this.handingOff = false;
    }
  }

  private updateGauges(): void {
    const m = this.options.metrics;
    for (const ps of this.partitions.values()) {
      const labels = { cube: this.cube, partition: String(ps.partition) };
      m.position.set(labels, Number(ps.position));
      if (ps.highWatermark !== null) {
        m.highWatermark.set(labels, Number(ps.highWatermark));
        m.lag.set(
          labels,
          Number(ps.highWatermark > ps.position ? ps.highWatermark - ps.position : 0n),
        );
      }
    }
    const counts = { ACTIVE: 0, IMMUTABLE: 0, HANDED_OFF: 0 };
    for (const s of this.segments.segments.values()) counts[s.state] += 1;
    for (const [state, n] of Object.entries(counts)) m.segments.set({ cube: this.cube, state }, n);
  }

  // ---- admin operations ------------------------------------------------------------------

  private partition(p: number): PartitionState {
    const ps = this.partitions.get(p);
    if (!ps)
      throw new ChannelError(
        404,
        `partition ${p} of cube ${this.cube} is not assigned to this receiver`,
        'partitions',
      );
    return ps;
  }

  /**
   * Takes partitions at the given positions and epochs. The same request twice changes nothing;
   * an epoch older than the one held is refused (409), a newer one restarts the partition.
   */
  async assign(starts: PartitionStart[]): Promise<CubeStatus> {
    for (const s of starts) {
      const ps = this.partitions.get(s.partition);
      if (ps && s.epoch < ps.epoch) {
        throw new ChannelError(
          409,
          `stale epoch for partition ${s.partition} of cube ${this.cube}: request has ${s.epoch}, receiver holds ${ps.epoch}`,
          'partitions',
        );
      }
    }
    let changed = false;
    for (const s of starts) {
      const ps = this.partitions.get(s.partition);
      if (ps && ps.epoch === s.epoch) continue;
      this.partitions.set(s.partition, {
        partition: s.partition,
        epoch: s.epoch,
        state: 'consuming',
        position: BigInt(s.position),
        stopOffset: null,
        highWatermark: null,
        lastRecordAt: Date.now(),
        generation: 0,
      });
      const clock = this.segments.clock(s.partition);
      if (s.watermark !== null && (clock.watermark === null || s.watermark > clock.watermark)) {
        clock.watermark = s.watermark;
      }
      changed = true;
      this.log.info('partition assigned', {
        cube: this.cube,
        partition: s.partition,
        epoch: s.epoch,
        position: s.position,
      });
    }
    if (changed) {
      this.dirty = true;
      this.flush();
      await this.restartConsumer();
    }
    return this.status();
  }

  /** Stops consuming; returns each partition's position (next offset to consume). */
  pause(partitions: number[]): PartitionStatus[] {
    const states = partitions.map((p) => this.partition(p));
    const toPause = states.filter((ps) => isLive(ps.state));
    for (const ps of toPause) ps.state = 'paused';
    if (toPause.length > 0) {
      this.consumer.pause(toPause.map((ps) => ps.partition));
      this.dirty = true;
      // Durable before answering: a restarted receiver must not run past what it reported.
      this.flush();
    }
    return states.map((ps) => this.partitionStatus(ps));
  }

  resume(partitions: number[]): PartitionStatus[] {
    const states = partitions.map((p) => this.partition(p));
    for (const ps of states) {
      if (ps.state === 'released') {
        throw new ChannelError(
          409,
          `partition ${ps.partition} of cube ${this.cube} was released; assign it again`,
          'partitions',
        );
      }
    }
    const toResume = states.filter((ps) => ps.state === 'paused' || ps.state === 'stopped');
    for (const ps of toResume) {
      ps.state = 'consuming';
      ps.stopOffset = null;
      ps.lastRecordAt = Date.now(); // its silence starts now, not while it was paused
    }
    if (toResume.length > 0) {
      for (const ps of toResume) ps.generation += 1;
      this.consumer.resume(new Map(toResume.map((ps) => [ps.partition, ps.position])));
      this.dirty = true;
      this.flush();
    }
    return states.map((ps) => this.partitionStatus(ps));
  }

  /**
   * Consumes each partition up to (not including) its stop offset and stops it there. A partition
   * already at its stop offset is done at once. Resolves when all are stopped or at the deadline.
   */
  async drain(stopOffsets: Record<string, string>, timeoutMs: number): Promise<DrainResponse> {
    const entries = Object.entries(stopOffsets).map(([p, o]) => ({
      ps: this.partition(Number(p)),
      stop: BigInt(o),
    }));
    for (const { ps, stop } of entries) {
      if (ps.state === 'released') {
        throw new ChannelError(
          409,
          `partition ${ps.partition} of cube ${this.cube} was released`,
          'stopOffsets',
        );
      }
      if (ps.position > stop) {
        throw new ChannelError(
          409,
          `partition ${ps.partition} of cube ${this.cube} is at ${ps.position}, past the stop offset ${stop}`,
          `stopOffsets.${ps.partition}`,
        );
      }
      if (ps.stopOffset !== null && ps.stopOffset !== stop && ps.state === 'stopped') {
        throw new ChannelError(
          409,
          `partition ${ps.partition} of cube ${this.cube} already stopped at ${ps.stopOffset}`,
          `stopOffsets.${ps.partition}`,
        );
      }
    }
    const toResume = new Map<number, bigint>();
    for (const { ps, stop } of entries) {
      ps.stopOffset = stop;
      if (ps.position >= stop) {
        if (ps.state !== 'stopped') {
          ps.state = 'stopped';
          this.consumer.pause([ps.partition]);
        }
      } else if (ps.state !== 'draining') {
        const wasLive = isLive(ps.state);
        ps.state = 'draining';
        if (!wasLive) {
          ps.lastRecordAt = Date.now();
          ps.generation += 1;
          toResume.set(ps.partition, ps.position);
        }
      }
    }
    if (toResume.size > 0) this.consumer.resume(toResume);
    this.dirty = true;
    this.flush();
    const deadline = Date.now() + timeoutMs;
    const allStopped = (): boolean => entries.every(({ ps }) => ps.state === 'stopped');
    while (!allStopped() && Date.now() < deadline) {
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, Math.min(250, Math.max(1, deadline - Date.now())));
        this.drainWaiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
    this.flush();
    return { done: allStopped(), partitions: entries.map(({ ps }) => this.partitionStatus(ps)) };
  }

  /** Stops consuming the partitions for good (until assigned again); their data stays. */
  release(partitions: number[]): PartitionStatus[] {
    const states = partitions.map((p) => this.partition(p));
    const toRelease = states.filter((ps) => ps.state !== 'released');
    for (const ps of toRelease) {
      ps.state = 'released';
      this.segments.settlePending(ps.partition, ps.epoch, Date.now());
    }
    if (toRelease.length > 0) {
      this.consumer.pause(toRelease.map((ps) => ps.partition));
      this.dirty = true;
      this.flush();
    }
    return states.map((ps) => this.partitionStatus(ps));
  }

  /** Seals every segment (IMMUTABLE) and hands them off; waits up to `waitMs` for the hand-off. */
  async seal(waitMs: number): Promise<CubeStatus> {
    for (const ps of this.partitions.values())
      this.segments.settlePending(ps.partition, ps.epoch, Date.now());
    for (const s of this.segments.segments.values())
      if (s.state === 'ACTIVE') this.segments.seal(s);
    this.dirty = true;
    this.flush();
    const deadline = Date.now() + waitMs;
    do {
      this.handOffSealed();
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

  /** Removes the cube's local state after close(). */
  removeLocalData(): void {
    this.store.removeAll();
  }

  // ---- reading ---------------------------------------------------------------------------

  private partitionStatus(ps: PartitionState): PartitionStatus {
    const hw = ps.highWatermark;
    const health = this.supervisor.health();
    // A partition meant to be read says `failed` while the consumer is down; its own state is
    // kept, and it goes on as that state once the consumer is back.
    const down =
      health.state === 'failed' && (ps.state === 'consuming' || ps.state === 'draining')
        ? { intendedState: ps.state, error: `${health.error.name}: ${health.error.message}` }
        : undefined;
    return {
      partition: ps.partition,
      state: down ? 'failed' : ps.state,
      ...down,
      epoch: ps.epoch,
      position: ps.position.toString(),
      highWatermark: hw?.toString() ?? null,
      lag: hw === null ? null : (hw > ps.position ? hw - ps.position : 0n).toString(),
      stopOffset: ps.stopOffset?.toString() ?? null,
      watermark: this.segments.clock(ps.partition).watermark,
    };
  }

  private segmentStatus(s: Segment): SegmentStatus {
    const handOff = this.handOffErrors.get(s.windowStart);
    const path = this.handOffPaths.get(s.windowStart);
    return {
      windowStart: s.windowStart,
      windowEnd: s.windowEnd,
      state: s.state,
      rowCount: this.segments.rowCount(s),
      offsetRanges: Object.fromEntries([...s.ranges].map(([p, r]) => [String(p), rangesToJson(r)])),
      epochs: Object.fromEntries([...s.epochs].map(([p, e]) => [String(p), e])),
      ...(handOff || path
        ? {
            handOff: {
              attempts: handOff?.attempts ?? 1,
              ...(path ? { path } : {}),
              ...(handOff?.lastError ? { lastError: handOff.lastError } : {}),
            },
          }
        : {}),
    };
  }

  status(): CubeStatus {
    return {
      cube: this.cube,
      replicaSet: this.options.replicaSet,
      receiver: this.options.receiverId,
      topic: this.spec.source.topic,
      specDigest: this.specDigest,
      partitions: [...this.partitions.values()]
        .sort((a, b) => a.partition - b.partition)
        .map((ps) => this.partitionStatus(ps)),
      segments: [...this.segments.segments.values()]
        .sort((a, b) => a.windowStart - b.windowStart)
        .map((s) => this.segmentStatus(s)),
      ingested: this.ingested,
      rejected: Object.fromEntries(this.rejected),
      consumer: this.consumerStatus(),
    };
  }

  private consumerStatus(): ConsumerStatus {
    const health = this.supervisor.health();
    if (health.state === 'running') return { state: 'running', failures: health.failures };
    return {
      state: 'failed',
      failures: health.failures,
      error: { name: health.error.name, message: health.error.message },
      failedSince: new Date(health.since).toISOString(),
    };
  }

  query(q: {
    from?: number | undefined;
    to?: number | undefined;
    filters: Record<string, string[]>;
    groupBy: string[];
    measures?: string[] | undefined;
  }): QueryResponse {
    const { schema } = this.spec;
    const dimIndex = (name: string, field: string): number => {
      const i = schema.dimensions.indexOf(name);
      if (i < 0) throw new ChannelError(400, `cube ${this.cube} has no dimension '${name}'`, field);
      return i;
    };
    const groupIdx = q.groupBy.map((d, i) => dimIndex(d, `groupBy.${i}`));
    const filters = Object.entries(q.filters).map(([d, values]) => ({
      i: dimIndex(d, `filters.${d}`),
      values: new Set(values),
    }));
    const measureNames = q.measures ?? schema.measures.map((m) => m.name);
    const measureIdx = measureNames.map((name, i) => {
      const idx = schema.measures.findIndex((m) => m.name === name);
      if (idx < 0)
        throw new ChannelError(400, `cube ${this.cube} has no measure '${name}'`, `measures.${i}`);
      return idx;
    });
    const groups = new Map<string, { dims: string[]; values: number[] }>();
    const covered = new Map<number, OffsetRange[]>();
    let segments = 0;
    for (const s of this.segments.segments.values()) {
      if (s.state === 'HANDED_OFF') continue;
      if (q.from !== undefined && s.windowEnd <= q.from) continue;
      if (q.to !== undefined && s.windowStart >= q.to) continue;
      segments += 1;
      for (const [p, ranges] of s.ranges) {
        const acc = covered.get(p) ?? [];
        for (const r of ranges) addRange(acc, r.from, r.to);
        covered.set(p, acc);
      }
      for (const row of s.rows.values()) {
        if (!filters.every((f) => f.values.has(row.dimensions[f.i] ?? ''))) continue;
        const dims = groupIdx.map((i) => row.dimensions[i] ?? '');
        const key = JSON.stringify(dims);
        const g = groups.get(key);
        if (!g) {
          groups.set(key, { dims, values: measureIdx.map((i) => row.values[i] ?? 0) });
        } else {
          measureIdx.forEach((mi, j) => {
            g.values[j] = combine(schema.measures[mi]!.function, g.values[j]!, row.values[mi]!);
          });
        }
      }
    }
    const rows = [...groups.values()]
      .sort((a, b) => (a.dims.join('\u0000') < b.dims.join('\u0000') ? -1 : 1))
      .map((g) => [...g.dims, ...g.values]);
    return {
      columns: [...q.groupBy, ...measureNames],
      rows,
      offsetRanges: Object.fromEntries([...covered].map(([p, r]) => [String(p), rangesToJson(r)])),
      segments,
    };
  }
}
