// The record batches a partition's log holds on the test broker's disk, as Kafka's own
// DumpLogSegments tool reads them: so a test can show its data really is compressed with a
// codec, or really holds transaction markers, rather than trust the producer's settings.
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { testEnvironment } from '../env/connection.ts';
import { type KafkaBroker, resolveKafkaClasspath } from '../env/kafka.ts';
import { runCommand } from '../env/processes.ts';

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

const batchLine =
  /^baseOffset: (\d+) lastOffset: (\d+) count: (\d+) .*isTransactional: (true|false) isControl: (true|false) .*compresscodec: (\w+)/;

/** The batches of one partition, on the test environment's broker unless another is given. */
export async function logBatches(
  topic: string,
  partition: number,
  broker: Pick<KafkaBroker, 'dataDir' | 'version'> = testEnvironment().kafka,
): Promise<LogBatch[]> {
  const dir = join(broker.dataDir, `${topic}-${partition}`);
  const files = readdirSync(dir)
    .filter((f) => f.endsWith('.log'))
    .sort()
    .map((f) => join(dir, f));
  const classpath = await resolveKafkaClasspath(broker.version);
  const output = await runCommand('java', [
    '-cp',
    classpath,
    'kafka.tools.DumpLogSegments',
    '--files',
    files.join(','),
  ]);
  return output.split('\n').flatMap((line) => {
    const m = batchLine.exec(line);
    if (!m) return [];
    return [
      {
        baseOffset: BigInt(m[1]!),
        lastOffset: BigInt(m[2]!),
        count: Number(m[3]),
        transactional: m[4] === 'true',
        control: m[5] === 'true',
        codec: m[6]!.toLowerCase(),
      },
    ];
  });
}
