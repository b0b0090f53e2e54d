// `streamcube receiver`: start the receiver, serve until SIGTERM/SIGINT, then stop gracefully
// (flush, checkpoint, close consumers).
import { once } from 'node:events';
import { setMaxDecompressedBytes } from '../kafka/codecs.ts';
import { createLogger } from '../observability/logger.ts';
import { TokenFile } from '../protocol/token-file.ts';
import { parseReceiverConfig } from './config.ts';
import { createReceiverMetrics } from './metrics.ts';
import { Receiver } from './receiver.ts';
import { createReceiverMetricsServer, createReceiverServer } from './server.ts';

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
  const readToken =
    config.readTokenFile === undefined
      ? undefined
      : new TokenFile(config.readTokenFile, {
          graceMs: config.adminTokenGraceMs,
          onError: (error) =>
            logger.warn('read token file unusable; the current token stays', { error }),
        });
  const receiver = new Receiver(config, createReceiverMetrics(), logger);
  const server = createReceiverServer(
    receiver,
    logger,
    { admin: adminToken.tokens, ...(readToken ? { read: readToken.tokens } : {}) },
    config.serverLimits,
  );
  const metricsServer =
    config.metricsPort === undefined
      ? undefined
      : createReceiverMetricsServer(receiver, logger, config.serverLimits);
  for (const [what, s, port] of [
    ['listening', server, config.port],
    ['metrics listening', metricsServer, config.metricsPort],
  ] as const) {
    if (!s) continue;
    s.listen(port, config.host);
    await once(s, 'listening');
    const address = s.address();
    logger.info(what, {
      address:
        typeof address === 'object' && address
          ? `${address.address}:${address.port}`
          : String(address),
    });
  }
  await receiver.start();
  const signal = await Promise.race([once(process, 'SIGTERM'), once(process, 'SIGINT')]);
  logger.info('shutting down', { signal: String(signal) });
  server.close();
  metricsServer?.close();
  adminToken.close();
  readToken?.close();
  await receiver.stop();
  logger.info('stopped');
  return 0;
}
