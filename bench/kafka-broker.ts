// The Kafka broker a bench runs against: the env:up environment's when it runs, or one of the
// bench's own in a temporary directory, stopped and removed by `stop`.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { findRunningEnvironment } from '../src/local/environment.ts';
import { type KafkaBroker, startKafka } from '../src/local/kafka.ts';
import { stopService } from '../src/local/processes.ts';
import { settings } from '../src/local/settings.ts';

export async function benchBroker(
  say: (text: string) => void,
): Promise<{ broker: KafkaBroker; brokers: string; stop: () => Promise<void> }> {
  const running = findRunningEnvironment(settings.stateDir);
  if (running) {
    say(`using the running environment's Kafka broker at ${running.kafka.bootstrap}`);
    return { broker: running.kafka, brokers: running.kafka.bootstrap, stop: async () => {} };
  }
  // Only Kafka is needed; a broker of our own in a directory of our own, stopped at the end.
  const dir = mkdtempSync(join(tmpdir(), 'streamcube-bench-kafka-'));
  const broker = await startKafka(dir);
  say(`started a Kafka broker at ${broker.bootstrap}`);
  return {
    broker,
    brokers: broker.bootstrap,
    stop: async () => {
      await stopService(broker.pid);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
