// Receiver configuration from flags and environment (flags win), with the defaults a pod needs.
import { hostname } from 'node:os';
import { parseArgs } from 'node:util';
import { parseDuration } from '../api/duration.ts';
import { ConfigError } from '../config-error.ts';

export interface ReceiverConfig {
  id: string;
  replicaSet: string;
  host: string;
  port: number;
  dataDir: string;
  deepStorageDir: string;
  /** The admin API's bearer token (first line), read again while running (TokenFile). */
  adminTokenFile: string;
  adminTokenGraceMs: number;
  flushIntervalMs: number;
  idleTimeoutMs: number;
  /** How long a handed-off segment stays held, in memory and the checkpoint, after its hand-off. */
  handedOffRetentionMs: number;
  /** How often the Secrets of secured sources are read again (a rotated password). */
  secretRefreshMs: number;
}

export const receiverUsage = `Usage: streamcube receiver [options]

Options (environment variable in brackets):
  --id NAME                receiver id, unique per pod           [STREAMCUBE_RECEIVER_ID, default: hostname]
  --replica-set NAME       replica set this receiver belongs to  [STREAMCUBE_REPLICA_SET, required]
  --host ADDR              address to bind                       [STREAMCUBE_HOST, default: 0.0.0.0]
  --port N                 admin/metrics/query port              [STREAMCUBE_PORT, default: 8080]
  --data-dir DIR           local segments and checkpoints        [STREAMCUBE_DATA_DIR, required]
  --deep-storage-dir DIR   where sealed segments are handed off  [STREAMCUBE_DEEP_STORAGE_DIR, required]
  --admin-token-file FILE  bearer token for /v1 (first line),    [STREAMCUBE_ADMIN_TOKEN_FILE, required]
                           read again every 2s: a change applies without a restart
  --admin-token-grace DUR  the replaced token stays valid for    [STREAMCUBE_ADMIN_TOKEN_GRACE, default: 2m]
  --flush-interval DUR     fragment flush + checkpoint period    [STREAMCUBE_FLUSH_INTERVAL, default: 1s]
  --idle-timeout DUR       idle partition counts as past windows [STREAMCUBE_IDLE_TIMEOUT, default: 30s]
  --handed-off-retention DUR  handed-off segments held this long  [STREAMCUBE_HANDED_OFF_RETENTION, default: 1h]
  --secret-refresh DUR     source Secrets (TLS, SASL) read again [STREAMCUBE_SECRET_REFRESH, default: 30s]

Logging: STREAMCUBE_LOG_LEVEL=error|warn|info|debug (default: info).
`;

export function parseReceiverConfig(
  argv: string[],
  env: NodeJS.ProcessEnv = process.env,
): ReceiverConfig {
  const { values } = parseArgs({
    args: argv,
    options: {
      id: { type: 'string' },
      'replica-set': { type: 'string' },
      host: { type: 'string' },
      port: { type: 'string' },
      'data-dir': { type: 'string' },
      'deep-storage-dir': { type: 'string' },
      'admin-token-file': { type: 'string' },
      'admin-token-grace': { type: 'string' },
      'flush-interval': { type: 'string' },
      'idle-timeout': { type: 'string' },
      'handed-off-retention': { type: 'string' },
      'secret-refresh': { type: 'string' },
    },
    strict: true,
  });
  const pick = (flag: keyof typeof values, variable: string): string | undefined =>
    values[flag] ?? (env[variable] || undefined);
  const required = (flag: keyof typeof values, variable: string): string => {
    const v = pick(flag, variable);
    if (v === undefined) throw new ConfigError(`--${flag} (or ${variable}) is required`);
    return v;
  };
  const durationOf = (
    flag: keyof typeof values,
    variable: string,
    fallback: string,
    min = 1,
  ): number => {
    const text = pick(flag, variable) ?? fallback;
    const ms = parseDuration(text);
    if (ms === undefined || ms < min)
      throw new ConfigError(
        `--${flag} must be a ${min > 0 ? 'positive ' : ''}duration like 1s, got '${text}'`,
      );
    return ms;
  };
  const portText = pick('port', 'STREAMCUBE_PORT') ?? '8080';
  const port = Number(portText);
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new ConfigError(`--port must be 0..65535, got '${portText}'`);
  return {
    id: pick('id', 'STREAMCUBE_RECEIVER_ID') ?? hostname(),
    replicaSet: required('replica-set', 'STREAMCUBE_REPLICA_SET'),
    host: pick('host', 'STREAMCUBE_HOST') ?? '0.0.0.0',
    port,
    dataDir: required('data-dir', 'STREAMCUBE_DATA_DIR'),
    deepStorageDir: required('deep-storage-dir', 'STREAMCUBE_DEEP_STORAGE_DIR'),
    adminTokenFile: required('admin-token-file', 'STREAMCUBE_ADMIN_TOKEN_FILE'),
    adminTokenGraceMs: durationOf('admin-token-grace', 'STREAMCUBE_ADMIN_TOKEN_GRACE', '2m', 0),
    flushIntervalMs: durationOf('flush-interval', 'STREAMCUBE_FLUSH_INTERVAL', '1s'),
    idleTimeoutMs: durationOf('idle-timeout', 'STREAMCUBE_IDLE_TIMEOUT', '30s'),
    handedOffRetentionMs: durationOf(
      'handed-off-retention',
      'STREAMCUBE_HANDED_OFF_RETENTION',
      '1h',
    ),
    secretRefreshMs: durationOf('secret-refresh', 'STREAMCUBE_SECRET_REFRESH', '30s'),
  };
}
