// The ingest pipeline of one cube: records from the consumer, parsed (large batches on a worker
// thread, in delivery order) and applied to the segments in offset order, positions advancing with
// them. Applying is synchronous, so a checkpoint pairs the data with exactly its positions.
import type { CubeSchema } from '../api/cube.ts';
import type {
  ConsumedRecords,
  OversizedBatch,
  PartitionConsumer,
} from '../kafka/partition-consumer.ts';
import type { Logger } from '../observability/logger.ts';
import { BatchParser, InlineBatchParser, type ParsedBatch } from './batch-parser.ts';
import { markOutOfBoundsTimes, maxEventTimeSkewOf } from './event-bounds.ts';
import { type RejectReason, rejectReasons } from './event.ts';
import type { ChannelMetrics } from './channel-metrics.ts';
import { type PartitionState, isLive } from './partition-state.ts';
import type { OffsetRange } from './offset-ranges.ts';
import type { SegmentManager } from './segments.ts';

/**
 * Smaller batches are parsed on the main thread: the round trip to the worker costs more.
 * STREAMCUBE_WORKER_MIN_BATCH overrides it (1 sends every batch to the worker, as a test run does).
 */
const minWorkerBatch = Number(process.env.STREAMCUBE_WORKER_MIN_BATCH) || 64;
/** Batches on the worker beyond which the consumer waits, bounding memory held by them. */
const maxInFlight = 16;
/**
 * Bytes of record values on the worker beyond which the consumer waits: a count alone bounds
 * little when batches are large (a compressed fetch decompresses to several times its size).
 * bench:receiver (lz4): peak RSS about 300 MiB without it; with 8 MiB 230-245 MiB while this
 * thread parsed nothing beside the worker, 249-271 MiB since it does, 239-248 MiB with 4 MiB.
 */
const maxInFlightBytes = 4 * 2 ** 20;
/**
 * Batches on the worker from which the next one is parsed on the main thread instead: with the
 * worker busy, the main thread (otherwise idle between fetches) takes its share of the parsing.
 */
const workerBacklog = 2;

export interface IngestOptions {
  cube: string;
  schema: CubeSchema;
  /** The channel's partitions: read here, and their positions and high watermarks advanced. */
  partitions: ReadonlyMap<number, PartitionState>;
  segments: SegmentManager;
  /** The consumer, to read a partition again from its position after a failed batch. */
  consumer: () => Pick<PartitionConsumer, 'resume'>;
  metrics: ChannelMetrics;
  logger: Logger;
  /** Records were delivered: the consumer works. */
  delivered: () => void;
  /** A partition's position moved: it may have reached its stop offset. */
  onProgress: (ps: PartitionState) => void;
  /**
   * The client read a batch from past the partition's position: Kafka no longer held
   * [from, to) (retention). The position moves on to `to` here; the offsets are not consumed.
   */
  onOffsetsLost: (ps: PartitionState, from: bigint, to: bigint) => void;
}

/** The first of a partition's `elsewhere` ranges that ends past its position, if any. */
function nextElsewhere(ps: PartitionState): OffsetRange | undefined {
  return ps.elsewhere?.find((r) => r.to > ps.position);
}

/**
 * Moves the position past an `elsewhere` range it stands in (not past the stop offset): those
 * offsets are another replica set's, committed. True when it moved.
 */
function passElsewhere(ps: PartitionState): boolean {
  const next = nextElsewhere(ps);
  if (!next || next.from > ps.position) return false;
  if (ps.stopOffset !== null && ps.stopOffset <= ps.position) return false;
  ps.position = ps.stopOffset !== null && ps.stopOffset < next.to ? ps.stopOffset : next.to;
  return true;
}

/** Records moved the position: when, and the first time under this epoch. */
function markConsumed(ps: PartitionState): void {
  const now = Date.now();
  ps.consumedAt = now;
  ps.firstConsumedAt ??= now;
}

export class IngestPipeline {
  /** Records applied since the channel last took this flag for a checkpoint. */
  dirty = false;
  /** Events aggregated since the cube was assigned here; checkpointed, as `rejected` is. */
  ingested = 0;
  readonly rejected = new Map<RejectReason, number>();
  /** Started with the first batch large enough for it: a quiet cube keeps no thread. */
  private batchParser: BatchParser | undefined;
  private inlineParser: InlineBatchParser | undefined;
  /** Batches (and filtered ranges queued behind them) not applied yet, in delivery order. */
  private inFlight = 0;
  /** Bytes of the batches not applied yet. */
  private inFlightBytes = 0;
  /** Batches sent to the worker and not applied yet. */
  private workerBatches = 0;
  private tail: Promise<void> = Promise.resolve();
  private readonly options: IngestOptions;
  private readonly cube: string;
  private readonly spec: { schema: CubeSchema };
  private readonly partitions: ReadonlyMap<number, PartitionState>;
  private readonly segments: SegmentManager;
  private readonly supervisor: { delivered: () => void };
  private readonly maxEventTimeSkewMs: number;

  constructor(options: IngestOptions) {
    this.options = options;
    this.cube = options.cube;
    this.spec = { schema: options.schema };
    this.partitions = options.partitions;
    this.segments = options.segments;
    this.supervisor = { delivered: options.delivered };
    this.maxEventTimeSkewMs = maxEventTimeSkewOf(options.schema);
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

  private get consumer(): Pick<PartitionConsumer, 'resume'> {
    return this.options.consumer();
  }

  /** Whether records were applied since the last call. */
  takeDirty(): boolean {
    const dirty = this.dirty;
    this.dirty = false;
    return dirty;
  }

  /** Counters as a checkpoint recorded them. */
  restoreCounters(ingested: number, rejected: Record<string, number>): void {
    this.ingested = ingested;
    for (const [reason, n] of Object.entries(rejected))
      this.rejected.set(reason as RejectReason, n);
  }

  async close(): Promise<void> {
    await this.batchParser?.close();
  }

  /**
   * Large batches are parsed on the worker and applied when it answers, in the order they came
   * (one worker, answers in order), so kafkajs fetches the next batches meanwhile; it waits only
   * when too many are outstanding. Applying stays synchronous, so a checkpoint still pairs data
   * with positions: both lag the delivered records until their batch is applied.
   */
  onRecords(
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
      this.applyRecords(ps, records, this.parseHere(records));
      return;
    }
    const generation = ps.generation;
    // Dropped when the partition was paused, released, assigned anew or sought since delivery:
    // it is read again from its position, and applying it could jump over offsets never read.
    const current = (): boolean =>
      this.partitions.get(partition) === ps && ps.generation === generation && isLive(ps.state);
    this.inFlight += 1;
    const bytes = records.values.buffer.byteLength;
    this.inFlightBytes += bytes;
    // While the worker is behind, this thread (otherwise idle between fetches) parses the batch
    // itself; either way a batch is applied only after the one delivered before it.
    const onWorker = this.workerBatches < workerBacklog && this.parser.available;
    if (onWorker) this.workerBatches += 1;
    const parsed = onWorker
      ? this.parser.parse(records.values)
      : Promise.resolve(this.parseHere(records));
    const applied = Promise.all([parsed, this.tail])
      .then(
        ([batch]) => {
          if (!current()) return;
          ps.highWatermark = highWatermark;
          this.applyRecords(ps, records, batch);
        },
        (error: unknown) => {
          // The values went to the worker with the batch: the partition is read again from its
          // position, and parsed on this thread from now on (the parser is no longer available).
          this.log.warn('batch parser failed; parsing on the main thread', {
            cube: this.cube,
            error: (error as Error).message,
          });
          if (!current()) return;
          ps.generation += 1;
          this.consumer.resume(new Map([[partition, ps.position]]));
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
        this.inFlightBytes -= bytes;
        if (onWorker) this.workerBatches -= 1;
      });
    this.tail = applied;
    const full = this.inFlight > maxInFlight || this.inFlightBytes > maxInFlightBytes;
    return full ? applied : undefined;
  }

  /** Applies a parsed batch in order: the same positions, skips and rejects on either path. */
  private applyRecords(ps: PartitionState, records: ConsumedRecords, batch: ParsedBatch): void {
    // Before the segments see them: an event out of bounds is a rejected record, not a watermark.
    markOutOfBoundsTimes(batch.columns, records.timestamps, this.maxEventTimeSkewMs);
    this.skipLostOffsets(ps, records.fetchOffset);
    const before = ps.position;
    if (ps.elsewhere?.length) this.applyAroundElsewhere(ps, records, batch);
    else this.applyUpTo(ps, ps.stopOffset, records, batch);
    if (ps.position > before) markConsumed(ps);
    this.dirty = true;
    this.afterProgress(ps);
  }

  /** Applies the batch's records from the position, up to (not including) `stop`. */
  private applyUpTo(
    ps: PartitionState,
    stop: bigint | null,
    records: ConsumedRecords,
    batch: ParsedBatch,
  ): void {
    const { position, ingested, rejected } = this.segments.ingest(
      ps.partition,
      ps.epoch,
      ps.position,
      stop,
      records.offsets,
      batch,
    );
    ps.position = position;
    for (let r = 0; r < rejected.length; r++) {
      if (rejected[r]! > 0) this.reject(rejectReasons[r]!, rejected[r]);
    }
    if (ingested > 0) {
      this.ingested += ingested;
      this.options.metrics.ingested(ingested);
    }
  }

  /**
   * A failover's new owner reads over the offsets the fenced set committed (`elsewhere`): the
   * records before each such range apply as usual, the range itself is passed with no segment
   * taking it. Only such partitions take this path, and only until they are past their ranges.
   */
  private applyAroundElsewhere(
    ps: PartitionState,
    records: ConsumedRecords,
    batch: ParsedBatch,
  ): void {
    const { offsets } = records;
    const last = offsets.length > 0 ? BigInt(offsets[offsets.length - 1]!) : -1n;
    while (ps.position <= last && (ps.stopOffset === null || ps.position < ps.stopOffset)) {
      if (passElsewhere(ps)) continue;
      const next = nextElsewhere(ps);
      if (!next || (ps.stopOffset !== null && next.from >= ps.stopOffset)) {
        this.applyUpTo(ps, ps.stopOffset, records, batch);
        break;
      }
      this.applyUpTo(ps, next.from, records, batch);
      if (ps.position < next.from) {
        if (last < next.from) break;
        // The batch goes on past the range's start: offsets before it without a record (markers,
        // compaction) are consumed ones, as a gap inside a batch is.
        this.segments.skip(ps.partition, ps.epoch, ps.position, next.from);
        ps.position = next.from;
      }
    }
  }

  /**
   * Batches apply in delivery order, each from where the one before ended: a fetch from past the
   * position is the client's jump to the log start after the broker answered that the position
   * is out of range (its offsets deleted). Gaps inside a batch (transaction markers, compaction)
   * are fetched over, not jumped: they stay consumed offsets.
   */
  private skipLostOffsets(ps: PartitionState, fetchOffset: number | undefined): void {
    if (fetchOffset === undefined || fetchOffset <= Number(ps.position)) return;
    let to = BigInt(fetchOffset);
    if (ps.stopOffset !== null && ps.stopOffset < to) to = ps.stopOffset;
    if (to <= ps.position) return;
    const from = ps.position;
    ps.position = to;
    this.dirty = true;
    this.options.onOffsetsLost(ps, from, to);
  }

  onFilteredRange(
    partition: number,
    first: bigint,
    last: bigint,
    highWatermark: bigint,
    oversized?: OversizedBatch,
  ): void {
    this.supervisor.delivered();
    if (this.inFlight > 0) {
      // Behind batches still on the worker: the position it must start at is not reached yet.
      this.inFlight += 1;
      this.tail = this.tail
        .then(() => this.onFilteredRangeNow(partition, first, last, highWatermark, oversized))
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
    this.onFilteredRangeNow(partition, first, last, highWatermark, oversized);
  }

  private onFilteredRangeNow(
    partition: number,
    first: bigint,
    last: bigint,
    highWatermark: bigint,
    oversized: OversizedBatch | undefined,
  ): void {
    const ps = this.partitions.get(partition);
    if (!ps || !isLive(ps.state)) return;
    ps.highWatermark = highWatermark;
    ps.lastRecordAt = Date.now(); // markers and aborted records are records the partition received
    if (first > ps.position || last < ps.position) return;
    passElsewhere(ps);
    let to = last + 1n;
    if (ps.stopOffset !== null && ps.stopOffset < to) to = ps.stopOffset;
    const next = nextElsewhere(ps);
    if (next && next.from < to) to = next.from;
    if (to > ps.position) {
      if (oversized) this.skipOversized(ps, to, oversized);
      else this.segments.skip(partition, ps.epoch, ps.position, to);
      ps.position = to;
      markConsumed(ps);
      this.dirty = true;
    }
    this.afterProgress(ps);
  }

  /**
   * Offsets of a batch too large to read, from the position to `to`, consumed: its records are
   * rejected, all of its header's count when the whole batch is passed here, else as many as
   * offsets are passed (the two agree unless compaction left gaps in it).
   */
  private skipOversized(ps: PartitionState, to: bigint, batch: OversizedBatch): void {
    const from = ps.position > BigInt(batch.baseOffset) ? ps.position : BigInt(batch.baseOffset);
    const records = Math.min(batch.records, Number(to - from));
    this.segments.skip(ps.partition, ps.epoch, ps.position, to, 'batch_too_large', records);
    this.reject('batch_too_large', records);
    this.log.warn('a record batch decompresses past the bound; its records are rejected', {
      cube: this.cube,
      partition: ps.partition,
      baseOffset: batch.baseOffset,
      lastOffset: batch.lastOffset,
      records: batch.records,
    });
  }

  private reject(reason: RejectReason, count = 1): void {
    this.rejected.set(reason, (this.rejected.get(reason) ?? 0) + count);
    this.options.metrics.rejected(reason, count);
  }

  private afterProgress(ps: PartitionState): void {
    this.options.onProgress(ps);
  }
}
