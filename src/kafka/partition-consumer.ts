// Consumption of chosen partitions of one topic from exact offsets, behind a small interface so
// that another Kafka client could replace kafkajs (session-consumer.ts is the receivers'). The
// caller owns positions; this layer only delivers records and reports how far the log goes.
import { type OversizedBatch, OffsetRangeError, isExactOffset } from './record-batches.ts';
import { type PackedValues, packValues } from './record-values.ts';

export { type OversizedBatch, OffsetRangeError, isExactOffset };

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
   * The Kafka timestamp bounding record i's event time: its batch's maxTimestamp, −1 when the
   * batch has none. Absent when the client does not say (fakes in tests): no bound from Kafka then.
   */
  timestamps?: Float64Array;
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
   * records) or cannot read (`oversized`, a batch whose records decompress past the bound, which
   * [first, last] is part of): no record to hand over, but the partition has moved past them.
   */
  onFilteredRange(
    partition: number,
    first: bigint,
    last: bigint,
    highWatermark: bigint,
    oversized?: OversizedBatch,
  ): void;
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
