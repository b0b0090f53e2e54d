// The kafkajs client as streamcube configures it. kafkajs is in maintenance mode, so the rest of
// the code reaches it through this folder only.
import { Kafka, logLevel, type KafkaConfig } from 'kafkajs';
import { registerCodecs } from './codecs.ts';
import { installIdleRequestQueues } from './request-queue.ts';

/** A kafkajs client that decodes every codec Kafka producers use (see codecs.ts). */
export function createKafka(config: KafkaConfig): Kafka {
  installIdleRequestQueues();
  registerCodecs();
  return new Kafka({ logLevel: logLevel.WARN, ...config });
}
