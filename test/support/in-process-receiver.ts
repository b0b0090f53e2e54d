// A Receiver and its admin server in the test's own process, on loopback, over a data directory of
// its own: for unit tests of the admin API that fake what the receiver reads from the API server.
// Started before the tests of the block, stopped after them.
import { once } from 'node:events';
import { rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { defaultServerLimits } from '../../src/http/guarded-server.ts';
import { createLogger } from '../../src/observability/logger.ts';
import type { ReceiverConfig } from '../../src/receiver/config.ts';
import { createReceiverMetrics } from '../../src/receiver/metrics.ts';
import { Receiver, type ReceiverApiReads } from '../../src/receiver/receiver.ts';
import { createReceiverServer } from '../../src/receiver/server.ts';
import { tempDir } from './scratch-dirs.ts';

export interface InProcessReceiver {
  readonly receiver: Receiver;
  readonly baseUrl: string;
  readonly dataDir: string;
}

/** Receiver rs-a-0 of rs-a taking `token` as its admin token; `config` replaces defaults. */
export function useInProcessReceiver(options: {
  token: string;
  config?: Partial<ReceiverConfig>;
  apiReads?: ReceiverApiReads;
}): InProcessReceiver {
  let receiver: Receiver | undefined;
  let server: ReturnType<typeof createReceiverServer> | undefined;
  let baseUrl = '';
  let dataDir = '';
  beforeAll(async () => {
    dataDir = tempDir('receiver');
    const logger = createLogger('receiver', 'error');
    receiver = new Receiver(
      {
        id: 'rs-a-0',
        replicaSet: 'rs-a',
        host: '127.0.0.1',
        port: 0,
        dataDir,
        deepStorage: { type: 'filesystem', dir: join(dataDir, 'deep') },
        handOffRetryMaxMs: 30_000,
        adminTokenFile: '',
        adminTokenGraceMs: 0,
        flushIntervalMs: 1_000,
        idleTimeoutMs: 30_000,
        handedOffRetentionMs: 60_000,
        secretRefreshMs: 30_000,
        serverLimits: defaultServerLimits,
        ...options.config,
      },
      createReceiverMetrics(),
      logger,
      options.apiReads,
    );
    await receiver.start();
    server = createReceiverServer(receiver, logger, { admin: () => [options.token] });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server?.closeAllConnections();
    server?.close();
    await receiver?.stop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });
  const started = <T>(value: T | undefined): T => {
    if (value === undefined || value === '') throw new Error('used outside the tests of its block');
    return value;
  };
  return {
    get receiver() {
      return started(receiver);
    },
    get baseUrl() {
      return started(baseUrl);
    },
    get dataDir() {
      return started(dataDir);
    },
  };
}
