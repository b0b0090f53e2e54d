// A PartitionSink for the consumer suites: every offset delivered, per partition, and each
// partition's next position; it can be told to want nothing for a while, or to fail once.
import type { ConsumedRecords, PartitionSink } from '../../src/kafka/partition-consumer.ts';

export class RecordingSink implements PartitionSink {
  readonly offsets = new Map<number, number[]>();
  readonly positions = new Map<number, bigint>();
  crash: Error | undefined;
  /** The next records throw instead of being taken. */
  failNext = false;
  /** Whether records are wanted now (PartitionSink.wants). */
  wanting = true;
  onRecords(partition: number, records: ConsumedRecords): void {
    if (this.failNext) {
      this.failNext = false;
      throw new Error('this sink failed');
    }
    const seen = this.offsets.get(partition) ?? [];
    seen.push(...records.offsets);
    this.offsets.set(partition, seen);
    const last = records.offsets[records.offsets.length - 1];
    if (last !== undefined) this.positions.set(partition, BigInt(last) + 1n);
  }
  onFilteredRange(partition: number, _first: bigint, last: bigint): void {
    this.positions.set(partition, last + 1n);
  }
  wants(): boolean {
    return this.wanting;
  }
  onCrash(error: Error): void {
    this.crash = error;
  }
  /** The offsets delivered of `partition`. */
  seen(partition: number): number[] {
    return this.offsets.get(partition) ?? [];
  }
  /** The next position of `partition`. */
  at(partition: number): bigint {
    return this.positions.get(partition) ?? 0n;
  }
}
