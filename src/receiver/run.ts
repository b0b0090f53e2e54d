// `streamcube receiver`: start the receiver, serve until SIGTERM/SIGINT, then stop gracefully
// (flush, checkpoint, close consumers).
import { once } from 'node:events';
import { setMaxDecompressedBytes } from '../kafka/codecs.ts';
import { createLogger } from '../observability/logger.ts';
import { TokenFile } from '../protocol/token-file.ts';
import { parseReceiverConfig } from './config.ts';
import { createReceiverMetrics } from './metrics.ts';
import { Receiver } from './receiver.ts';
import { createReceiverServer } from './server.ts';

export async function runReceiver(argv: string[]): Promise<number> {
  const config = parseReceiverConfig(argv);
  if (config.maxDecompressedBytes) setMaxDecompressedBytes(config.maxDecompressedBytes);
  const logger = createLogger('receiver').child({
    receiver: config.id,
    replicaSet: config.replicaSet,
  });
  const adminToken = new TokenFile(config.adminTokenFile, {
    graceMs: config.adminTokenGraceMs,
    onError: (error) =>
      logger.warn('admin token file unusable; the current token stays', { error }),
  });
  const receiver = new Receiver(config, createReceiverMetrics(), logger);
  const server = createReceiverServer(receiver, logger, adminToken.tokens, config.serverLimits);
  server.listen(config.port, config.host);
  await once(server, 'listening');
  const address = server.address();
  logger.info('listening', {
    address:
      typeof address === 'object' && address
        ? `${address.address}:${address.port}`
        : String(address),
  });
  await receiver.start();
  const signal = await Promise.race([once(process, 'SIGTERM'), once(process, 'SIGINT')]);
  logger.info('shutting down', { signal: String(signal) });
  server.close();
  adminToken.close();
  await receiver.stop();
  logger.info('stopped');
  return 0;
}
