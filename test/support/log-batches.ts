// The record batches a partition's log holds on the test broker's disk, read from its segment
// files: so a test can show its data really is compressed with a codec, or really holds
// transaction markers, rather than trust the producer's settings. Kafka's DumpLogSegments tool
// would do, but it left the broker's classpath in Kafka 4; the batch header is small to read.
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { codecNames } from '../../src/kafka/codecs.ts';
import { testEnvironment } from '../env/connection.ts';
import type { KafkaBroker } from '../../src/local/kafka.ts';

export interface LogBatch {
  baseOffset: bigint;
  lastOffset: bigint;
  count: number;
  /** none, gzip, snappy, lz4 or zstd. */
  codec: string;
  transactional: boolean;
  /** A batch of control records: a transaction's commit or abort marker. */
  control: boolean;
}

/**
 * The batches of one partition, on the test environment's broker unless another is given. Reads
 * message format v2 (every Kafka since 0.11 writes it): baseOffset, batchLength, leader epoch,
 * magic, crc, attributes (codec in bits 0-2, transactional bit 4, control bit 5), last offset
 * delta, …, record count at byte 57.
 */
export function logBatches(
  topic: string,
  partition: number,
  broker: Pick<KafkaBroker, 'dataDir'> = testEnvironment().kafka,
): Promise<LogBatch[]> {
  const dir = join(broker.dataDir, `${topic}-${partition}`);
  const batches: LogBatch[] = [];
  for (const file of readdirSync(dir)
    .filter((f) => f.endsWith('.log'))
    .sort()) {
    const log = readFileSync(join(dir, file));
    for (let at = 0; at + 61 <= log.length;) {
      const baseOffset = log.readBigInt64BE(at);
      const size = 12 + log.readInt32BE(at + 8);
      if (at + size > log.length) break; // being written
      if (log[at + 16] !== 2) throw new Error(`${file}: batch at byte ${at} is not format v2`);
      const attributes = log.readInt16BE(at + 21);
      batches.push({
        baseOffset,
        lastOffset: baseOffset + BigInt(log.readInt32BE(at + 23)),
        count: log.readInt32BE(at + 57),
        codec: codecNames[attributes & 0x07] ?? `codec ${attributes & 0x07}`,
        transactional: (attributes & 0x10) !== 0,
        control: (attributes & 0x20) !== 0,
      });
      at += size;
    }
  }
  return Promise.resolve(batches);
}
