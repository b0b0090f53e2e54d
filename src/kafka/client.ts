// The kafkajs client as streamcube configures it. kafkajs is in maintenance mode, so the rest of
// the code reaches it through this folder only.
import { Kafka, logLevel, type KafkaConfig } from 'kafkajs';
import { registerCodecs } from './codecs.ts';

let warningFilterInstalled = false;

/**
 * kafkajs 2.2.4 schedules a timer with a negative delay on connect (kafkajs #1751); Node 24 warns
 * (TimeoutNegativeWarning) and clamps it to 1 ms, as older Node did silently. Drop that one
 * warning and pass every other to Node's own handlers.
 */
export function filterKafkajsTimeoutWarning(): void {
  if (warningFilterInstalled) return;
  warningFilterInstalled = true;
  const handlers = process.listeners('warning');
  process.removeAllListeners('warning');
  process.on('warning', (warning) => {
    if (warning.name === 'TimeoutNegativeWarning') return;
    for (const handler of handlers) handler(warning);
  });
}

/** A kafkajs client that decodes every codec Kafka producers use (see codecs.ts). */
export function createKafka(config: KafkaConfig): Kafka {
  filterKafkajsTimeoutWarning();
  registerCodecs();
  return new Kafka({ logLevel: logLevel.WARN, ...config });
}
