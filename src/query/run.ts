// `streamcube query-server`: informers on CubeAssignments and receiver pods (as the operator's),
// deep storage, and the query API; stateless, so any number of them may run.
import { once } from 'node:events';
import { loadKubeConfig } from '../kubernetes/kube-config.ts';
import { createLogger } from '../observability/logger.ts';
import { createProcessRegistry, registerBuildInfo } from '../observability/metrics.ts';
import { createCubeInformers } from '../operator/cube-informers.ts';
import { receiversByReplicaSet } from '../operator/discovery.ts';
import { ReceiverClient } from '../protocol/client.ts';
import { tlsReceiverTransport } from '../http/tls.ts';
import { TokenFile } from '../protocol/token-file.ts';
import { openDeepStorage } from '../receiver/deep-storage.ts';
import { parseQueryServerConfig } from './config.ts';
import { CommittedViewCache } from './committed-cache.ts';
import { createQueryMetrics } from './metrics.ts';
import { createQueryServer } from './server.ts';
import { QueryService } from './service.ts';

export async function runQueryServer(argv: string[]): Promise<number> {
  const config = parseQueryServerConfig(argv);
  const logger = createLogger('query-server');
  const tokenFileOptions = (what: string) => ({
    graceMs: config.tokenGraceMs,
    onError: (error: Error) => logger.warn(`${what} unusable; the current token stays`, { error }),
  });
  const receiverToken = new TokenFile(
    config.receiverTokenFile,
    tokenFileOptions('receiver token file'),
  );
  const ownToken =
    config.tokenFile === config.receiverTokenFile
      ? receiverToken
      : new TokenFile(config.tokenFile, tokenFileOptions('token file'));
  const kc = loadKubeConfig(config.kubeconfig);
  const registry = createProcessRegistry();
  registerBuildInfo(registry, 'query-server');
  const metrics = createQueryMetrics(registry);

  const { cubes, pods } = createCubeInformers({
    kubeConfig: kc,
    namespace: config.namespace,
    receiverNamespace: config.receiverNamespace,
    receiverSelector: config.receiverSelector,
    registry,
    logger,
  });
  cubes.start();
  pods.start();

  const storage = await openDeepStorage(config.deepStorage);
  const clients = new Map<string, ReceiverClient>();
  const transport = config.receiverCaFile
    ? tlsReceiverTransport(config.receiverCaFile, config.receiverServerName)
    : undefined;
  for (const kind of ['full', 'resumed']) metrics.listings.inc({ kind }, 0);
  for (const kind of ['listing', 'record', 'rows', 'rollup'])
    for (const result of ['hit', 'miss']) metrics.cacheLookups.inc({ kind, result }, 0);
  const cache = new CommittedViewCache({
    maxBytes: config.cacheBytes,
    listMaxAgeMs: config.cacheListingMaxAgeMs,
    fullListMaxAgeMs: config.cacheFullListingMaxAgeMs,
    onListing: (kind) => metrics.listings.inc({ kind }),
    onLookup: (kind, hit) => metrics.cacheLookups.inc({ kind, result: hit ? 'hit' : 'miss' }),
    onBytes: (bytes) => metrics.cacheBytes.set(bytes),
  });
  const service = new QueryService({
    receiverTimeoutMs: config.receiverTimeoutMs,
    maxRows: config.maxRows,
    cache,
    sources: {
      cube: (namespace, name) => cubes.get(name, namespace),
      receivers: (namespace, set) =>
        receiversByReplicaSet(
          pods.list(config.receiverNamespace ?? namespace),
          config.receiverPort,
          transport?.scheme ?? 'http',
        ).get(set) ?? [],
      query: (receiver, namespace, cube, request, signal) => {
        let client = clients.get(receiver.baseUrl);
        if (!client) {
          client = new ReceiverClient(
            receiver.baseUrl,
            receiverToken.tokens,
            config.receiverTimeoutMs,
            transport ? { fetch: transport.fetch } : undefined,
          );
          clients.set(receiver.baseUrl, client);
        }
        return client.inNamespace(namespace).query(cube, request, signal);
      },
      storage,
    },
    observe: (o) => {
      metrics.seconds.observe({ kind: 'cube' }, o.seconds);
      metrics.pieces.inc({ source: 'committed' }, o.piecesCommitted);
      metrics.pieces.inc({ source: 'live' }, o.piecesLive);
      for (const call of o.receiverCalls) metrics.receiverCalls.inc({ outcome: call.outcome });
      for (const reason of o.incomplete) metrics.incomplete.inc({ reason });
    },
  });
  const server = createQueryServer({
    service,
    tokens: ownToken.tokens,
    registry,
    metrics,
    logger,
    ready: () => cubes.hasSynced() && pods.hasSynced(),
  });
  server.listen(config.port, config.host);
  await once(server, 'listening');
  const address = server.address();
  logger.info('query server started', {
    address:
      typeof address === 'object' && address
        ? `${address.address}:${address.port}`
        : String(address),
    deepStorage: storage.locationOf(''),
  });
  const signal = await Promise.race([once(process, 'SIGTERM'), once(process, 'SIGINT')]);
  logger.info('shutting down', { signal: String(signal) });
  server.close();
  receiverToken.close();
  transport?.close();
  ownToken.close();
  storage.close();
  await Promise.all([cubes.stop(), pods.stop()]);
  return 0;
}
