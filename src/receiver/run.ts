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
import { followCertificate, readCertificate } from '../http/tls.ts';
import type { Server as HttpsServer } from 'node:https';

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
    config.tls ? readCertificate(config.tls) : undefined,
  );
  const stopFollowing = config.tls
    ? followCertificate(server as HttpsServer, config.tls, {
        onError: (error) =>
          logger.warn('TLS certificate files unusable; the current certificate stays', { error }),
      })
    : undefined;
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
  stopFollowing?.();
  adminToken.close();
  readToken?.close();
  await receiver.stop();
  logger.info('stopped');
  return 0;
}
