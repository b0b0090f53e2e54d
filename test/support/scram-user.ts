// SCRAM users on the running test broker: created, or their password rotated, with Kafka's own
// admin client (java/ScramUser.java, run against the broker's classpath).
import { resolve } from 'node:path';
import { resolveKafkaClasspath } from '../../src/local/kafka.ts';
import { runCommand } from '../../src/local/processes.ts';
import { testEnvironment } from '../env/connection.ts';
import { tempDir } from './scratch-dirs.ts';

const source = resolve(import.meta.dirname, 'java', 'ScramUser.java');

export async function setScramPassword(
  mechanism: 'SCRAM-SHA-256' | 'SCRAM-SHA-512',
  username: string,
  password: string,
): Promise<void> {
  const env = testEnvironment();
  const classpath = await resolveKafkaClasspath(env.kafka.version);
  // The JVM writes nothing it needs to keep; a scratch working directory keeps the checkout clean.
  await runCommand(
    'java',
    ['-cp', classpath, source, env.kafka.bootstrap, mechanism, username, password],
    { cwd: tempDir('scram') },
  );
}
