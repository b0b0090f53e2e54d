// Receiver configuration from flags and environment (flags win), with the defaults a pod needs.
import { hostname } from 'node:os';
import { parseArgs } from 'node:util';
import { replicaSetName } from '../api/cube-assignment.ts';
import { parseDuration } from '../api/duration.ts';
import { ConfigError } from '../config-error.ts';
import { type ServerLimits, defaultServerLimits } from '../http/guarded-server.ts';
import { type DeepStorageLocation, parseDeepStorageUrl } from './deep-storage.ts';
import { defaultMaxTermJump } from './leader-term-bound.ts';

export interface ReceiverConfig {
  id: string;
  replicaSet: string;
  host: string;
  port: number;
  /** A port of its own for /metrics, /healthz, /readyz (the admin port serves them too). */
  metricsPort?: number;
  /** Serve the admin port over HTTPS with this certificate and key (PEM files, re-read). */
  tls?: { certFile: string; keyFile: string };
  dataDir: string;
  /** Where sealed segments are handed off: a directory or an S3-compatible bucket. */
  deepStorage: DeepStorageLocation;
  /** The longest wait between two attempts of a failed hand-off (from 1 s, doubling). */
  handOffRetryMaxMs: number;
  /** The admin API's bearer token (first line), read again while running (TokenFile). */
  adminTokenFile: string;
  adminTokenGraceMs: number;
  /**
   * The read token's file (first line), read again like the admin token's: it may call only what
   * changes nothing (status, cube status, query). Absent: only the admin token is accepted.
   */
  readTokenFile?: string;
  flushIntervalMs: number;
  idleTimeoutMs: number;
  /** How long a handed-off segment stays held, in memory and the checkpoint, after its hand-off. */
  handedOffRetentionMs: number;
  /** How often the Secrets of secured sources are read again (a rotated password). */
  secretRefreshMs: number;
  /** The HTTP server's timeouts and connection cap. */
  serverLimits: ServerLimits;
  /** The most one record batch may decompress to (absent: 64 MiB); a batch past it is skipped. */
  maxDecompressedBytes?: number;
  /**
   * The operator's leader Lease: a leader term above its leaseTransitions is refused. Absent: a
   * term may rise at most `maxLeaderTermJump` above the highest held for the cube.
   */
  leaderLease?: { namespace: string; name: string };
  /** Absent: defaultMaxTermJump. */
  maxLeaderTermJump?: number;
}

export const receiverUsage = `Usage: streamcube receiver [options]

Options (environment variable in brackets):
  --id NAME                receiver id, unique per pod           [STREAMCUBE_RECEIVER_ID, default: hostname]
  --replica-set NAME       replica set this receiver belongs to  [STREAMCUBE_REPLICA_SET, required]
  --host ADDR              address to bind                       [STREAMCUBE_HOST, default: 0.0.0.0]
  --port N                 admin/metrics/query port              [STREAMCUBE_PORT, default: 8080]
  --tls-cert-file FILE     serve the admin port over HTTPS with  [STREAMCUBE_TLS_CERT_FILE, optional]
  --tls-key-file FILE      this certificate and key (PEM; read    [STREAMCUBE_TLS_KEY_FILE]
                           again every 30s); its SAN must hold the
                           name the operator checks
  --metrics-port N         /metrics, /healthz, /readyz on a port [STREAMCUBE_METRICS_PORT, optional]
                           of their own too (Prometheus's, apart
                           from the admin API)
  --data-dir DIR           local segments and checkpoints        [STREAMCUBE_DATA_DIR, required]
  --deep-storage URL       where sealed segments are handed off: [STREAMCUBE_DEEP_STORAGE, or --deep-storage-dir]
                           s3://bucket/prefix or a directory
  --deep-storage-dir DIR   the same, a directory only            [STREAMCUBE_DEEP_STORAGE_DIR]
  --s3-endpoint URL        S3-compatible server (default: AWS)   [STREAMCUBE_S3_ENDPOINT]
  --s3-region NAME         region to sign for                    [STREAMCUBE_S3_REGION, default: AWS_REGION or us-east-1]
  --s3-force-path-style    endpoint/bucket/key URLs, as most     [STREAMCUBE_S3_FORCE_PATH_STYLE=true]
                           S3-compatible servers want
  --hand-off-retry-max DUR longest wait between hand-off retries [STREAMCUBE_HAND_OFF_RETRY_MAX, default: 30s]
  --admin-token-file FILE  bearer token for /v1 (first line),    [STREAMCUBE_ADMIN_TOKEN_FILE, required]
                           read again every 2s: a change applies without a restart
  --admin-token-grace DUR  the replaced token stays valid for    [STREAMCUBE_ADMIN_TOKEN_GRACE, default: 2m]
                           (the read token's too)
  --read-token-file FILE   bearer token for the calls that only  [STREAMCUBE_READ_TOKEN_FILE, optional]
                           read (status, query): the query
                           service's; refused for any change
  --flush-interval DUR     fragment flush + checkpoint period    [STREAMCUBE_FLUSH_INTERVAL, default: 1s]
  --idle-timeout DUR       idle partition counts as past windows [STREAMCUBE_IDLE_TIMEOUT, default: 30s]
  --handed-off-retention DUR  handed-off segments held this long  [STREAMCUBE_HANDED_OFF_RETENTION, default: 1h]
  --secret-refresh DUR     source Secrets (TLS, SASL) read again [STREAMCUBE_SECRET_REFRESH, default: 30s]
  --max-connections N      HTTP connections served at once       [STREAMCUBE_MAX_CONNECTIONS, default: 512]
  --headers-timeout DUR    longest wait for a request's headers  [STREAMCUBE_HEADERS_TIMEOUT, default: 10s]
  --request-timeout DUR    longest wait for a whole request      [STREAMCUBE_REQUEST_TIMEOUT, default: 60s]
  --max-decompressed-mib N what one record batch may decompress  [STREAMCUBE_MAX_DECOMPRESSED_MIB, default: 64]
                           to; a batch past it is skipped (batch_too_large)
  --leader-lease NS/NAME   the operator's leader Lease: a leader  [STREAMCUBE_LEADER_LEASE, optional]
                           term above its leaseTransitions is
                           refused (needs \`get\` on that Lease)
  --max-leader-term-jump N without --leader-lease, how far a call [STREAMCUBE_MAX_LEADER_TERM_JUMP, default: 1000]
                           may raise a cube's leader term above
                           the highest held (a cube's first is free)

S3 credentials: the AWS SDK's default chain — AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, a web
identity token (IRSA: AWS_ROLE_ARN, AWS_WEB_IDENTITY_TOKEN_FILE), a profile, or the instance role.

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
      'metrics-port': { type: 'string' },
      'tls-cert-file': { type: 'string' },
      'tls-key-file': { type: 'string' },
      'data-dir': { type: 'string' },
      'deep-storage': { type: 'string' },
      'deep-storage-dir': { type: 'string' },
      's3-endpoint': { type: 'string' },
      's3-region': { type: 'string' },
      's3-force-path-style': { type: 'boolean' },
      'hand-off-retry-max': { type: 'string' },
      'admin-token-file': { type: 'string' },
      'admin-token-grace': { type: 'string' },
      'read-token-file': { type: 'string' },
      'flush-interval': { type: 'string' },
      'idle-timeout': { type: 'string' },
      'handed-off-retention': { type: 'string' },
      'secret-refresh': { type: 'string' },
      'max-connections': { type: 'string' },
      'headers-timeout': { type: 'string' },
      'request-timeout': { type: 'string' },
      'max-decompressed-mib': { type: 'string' },
      'leader-lease': { type: 'string' },
      'max-leader-term-jump': { type: 'string' },
    },
    strict: true,
  });
  type StringFlag = Exclude<keyof typeof values, 's3-force-path-style'>;
  const pick = (flag: StringFlag, variable: string): string | undefined =>
    values[flag] ?? (env[variable] || undefined);
  const required = (flag: StringFlag, variable: string): string => {
    const v = pick(flag, variable);
    if (v === undefined) throw new ConfigError(`--${flag} (or ${variable}) is required`);
    return v;
  };
  const durationOf = (flag: StringFlag, variable: string, fallback: string, min = 1): number => {
    const text = pick(flag, variable) ?? fallback;
    const ms = parseDuration(text);
    if (ms === undefined || ms < min)
      throw new ConfigError(
        `--${flag} must be a ${min > 0 ? 'positive ' : ''}duration like 1s, got '${text}'`,
      );
    return ms;
  };
  const portOf = (flag: 'port' | 'metrics-port', text: string): number => {
    const n = Number(text);
    if (!/^[0-9]{1,5}$/.test(text) || n > 65535)
      throw new ConfigError(`--${flag} must be 0..65535, got '${text}'`);
    return n;
  };
  const port = portOf('port', pick('port', 'STREAMCUBE_PORT') ?? '8080');
  const metricsPortText = pick('metrics-port', 'STREAMCUBE_METRICS_PORT');
  const metricsPort =
    metricsPortText === undefined ? undefined : portOf('metrics-port', metricsPortText);
  if (metricsPort !== undefined && metricsPort !== 0 && metricsPort === port)
    throw new ConfigError(`--metrics-port must differ from --port (${port})`);
  const maxConnectionsText =
    pick('max-connections', 'STREAMCUBE_MAX_CONNECTIONS') ??
    String(defaultServerLimits.maxConnections);
  const maxConnections = Number(maxConnectionsText);
  if (!Number.isInteger(maxConnections) || maxConnections < 1 || maxConnections > 1_000_000)
    throw new ConfigError(`--max-connections must be 1..1000000, got '${maxConnectionsText}'`);
  const headersTimeoutMs = durationOf('headers-timeout', 'STREAMCUBE_HEADERS_TIMEOUT', '10s');
  const requestTimeoutMs = durationOf('request-timeout', 'STREAMCUBE_REQUEST_TIMEOUT', '60s');
  if (requestTimeoutMs < headersTimeoutMs)
    throw new ConfigError(
      `--request-timeout (${requestTimeoutMs} ms) must be at least --headers-timeout (${headersTimeoutMs} ms): a request's headers are part of it`,
    );
  const decompressedText = pick('max-decompressed-mib', 'STREAMCUBE_MAX_DECOMPRESSED_MIB') ?? '64';
  const decompressedMib = Number(decompressedText);
  if (!Number.isInteger(decompressedMib) || decompressedMib < 1 || decompressedMib > 4096)
    throw new ConfigError(`--max-decompressed-mib must be 1..4096, got '${decompressedText}'`);
  // Both become parts of deep-storage keys and file names.
  const id = pick('id', 'STREAMCUBE_RECEIVER_ID') ?? hostname();
  if (!/^[A-Za-z0-9]([-A-Za-z0-9_.]{0,251}[A-Za-z0-9])?$/.test(id) || id.includes('..'))
    throw new ConfigError(
      `--id must be a pod name (letters, digits, '-', '_', '.'; at most 253), got '${id}'`,
    );
  const replicaSet = required('replica-set', 'STREAMCUBE_REPLICA_SET');
  if (!replicaSetName.safeParse(replicaSet).success)
    throw new ConfigError(
      `--replica-set must be a DNS label (lowercase letters, digits, -), got '${replicaSet}'`,
    );
  const readTokenFile = pick('read-token-file', 'STREAMCUBE_READ_TOKEN_FILE');
  const certFile = pick('tls-cert-file', 'STREAMCUBE_TLS_CERT_FILE');
  const keyFile = pick('tls-key-file', 'STREAMCUBE_TLS_KEY_FILE');
  if ((certFile === undefined) !== (keyFile === undefined))
    throw new ConfigError('--tls-cert-file and --tls-key-file go together: give both or neither');
  const leaseText = pick('leader-lease', 'STREAMCUBE_LEADER_LEASE');
  const [leaseNamespace, leaseName, ...rest] = leaseText?.split('/') ?? [];
  if (
    leaseText !== undefined &&
    (rest.length > 0 ||
      !replicaSetName.safeParse(leaseNamespace).success ||
      !/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/.test(leaseName ?? ''))
  )
    throw new ConfigError(
      `--leader-lease must be <namespace>/<name> of the operator's Lease, got '${leaseText}'`,
    );
  const jumpText =
    pick('max-leader-term-jump', 'STREAMCUBE_MAX_LEADER_TERM_JUMP') ?? String(defaultMaxTermJump);
  const maxLeaderTermJump = Number(jumpText);
  if (!/^[0-9]{1,10}$/.test(jumpText) || maxLeaderTermJump < 1)
    throw new ConfigError(`--max-leader-term-jump must be a whole number ≥ 1, got '${jumpText}'`);
  return {
    id,
    replicaSet,
    host: pick('host', 'STREAMCUBE_HOST') ?? '0.0.0.0',
    port,
    ...(metricsPort !== undefined ? { metricsPort } : {}),
    ...(certFile !== undefined && keyFile !== undefined ? { tls: { certFile, keyFile } } : {}),
    dataDir: required('data-dir', 'STREAMCUBE_DATA_DIR'),
    deepStorage: deepStorageOf(values, env),
    handOffRetryMaxMs: durationOf('hand-off-retry-max', 'STREAMCUBE_HAND_OFF_RETRY_MAX', '30s'),
    adminTokenFile: required('admin-token-file', 'STREAMCUBE_ADMIN_TOKEN_FILE'),
    adminTokenGraceMs: durationOf('admin-token-grace', 'STREAMCUBE_ADMIN_TOKEN_GRACE', '2m', 0),
    ...(readTokenFile !== undefined ? { readTokenFile } : {}),
    flushIntervalMs: durationOf('flush-interval', 'STREAMCUBE_FLUSH_INTERVAL', '1s'),
    idleTimeoutMs: durationOf('idle-timeout', 'STREAMCUBE_IDLE_TIMEOUT', '30s'),
    handedOffRetentionMs: durationOf(
      'handed-off-retention',
      'STREAMCUBE_HANDED_OFF_RETENTION',
      '1h',
    ),
    secretRefreshMs: durationOf('secret-refresh', 'STREAMCUBE_SECRET_REFRESH', '30s'),
    serverLimits: {
      ...defaultServerLimits,
      maxConnections,
      headersTimeoutMs,
      requestTimeoutMs,
    },
    maxDecompressedBytes: decompressedMib * 2 ** 20,
    ...(leaseText !== undefined
      ? { leaderLease: { namespace: leaseNamespace!, name: leaseName! } }
      : {}),
    maxLeaderTermJump,
  };
}

interface DeepStorageFlags {
  'deep-storage'?: string | undefined;
  'deep-storage-dir'?: string | undefined;
  's3-endpoint'?: string | undefined;
  's3-region'?: string | undefined;
  's3-force-path-style'?: boolean | undefined;
}

/** The hand-off target from `--deep-storage` (or `--deep-storage-dir`) and the `--s3-*` flags. */
export function deepStorageOf(
  values: DeepStorageFlags,
  env: NodeJS.ProcessEnv,
): DeepStorageLocation {
  const url = values['deep-storage'] ?? (env.STREAMCUBE_DEEP_STORAGE || undefined);
  const dir = values['deep-storage-dir'] ?? (env.STREAMCUBE_DEEP_STORAGE_DIR || undefined);
  if (url !== undefined && dir !== undefined)
    throw new ConfigError(
      '--deep-storage and --deep-storage-dir (or STREAMCUBE_DEEP_STORAGE and STREAMCUBE_DEEP_STORAGE_DIR) both given: name one target',
    );
  if (url === undefined && dir === undefined)
    throw new ConfigError(
      '--deep-storage (or STREAMCUBE_DEEP_STORAGE, or --deep-storage-dir) is required',
    );
  const location: DeepStorageLocation =
    url !== undefined
      ? parseDeepStorageUrl(url, '--deep-storage')
      : { type: 'filesystem', dir: dir! };
  const endpoint = values['s3-endpoint'] ?? (env.STREAMCUBE_S3_ENDPOINT || undefined);
  const region = values['s3-region'] ?? (env.STREAMCUBE_S3_REGION || undefined);
  const pathStyleText = env.STREAMCUBE_S3_FORCE_PATH_STYLE || undefined;
  if (pathStyleText !== undefined && !['true', 'false'].includes(pathStyleText))
    throw new ConfigError(
      `STREAMCUBE_S3_FORCE_PATH_STYLE must be true or false, got '${pathStyleText}'`,
    );
  const forcePathStyle = values['s3-force-path-style'] ?? pathStyleText === 'true';
  if (location.type === 'filesystem') {
    const s3Flag = [
      ['--s3-endpoint', endpoint],
      ['--s3-region', region],
      ['--s3-force-path-style', values['s3-force-path-style']],
    ].find(([, v]) => v !== undefined);
    if (s3Flag)
      throw new ConfigError(
        `${s3Flag[0]} applies to an s3:// --deep-storage only, but deep storage is the directory ${location.dir}`,
      );
    return location;
  }
  if (endpoint !== undefined) {
    let parsed: URL | undefined;
    try {
      parsed = new URL(endpoint);
    } catch {
      parsed = undefined;
    }
    if (!parsed || !['http:', 'https:'].includes(parsed.protocol))
      throw new ConfigError(`--s3-endpoint must be an http:// or https:// URL, got '${endpoint}'`);
  }
  if (region !== undefined && !/^[a-z0-9-]+$/.test(region))
    throw new ConfigError(`--s3-region must be a region name like eu-west-1, got '${region}'`);
  return {
    ...location,
    ...(endpoint !== undefined ? { endpoint } : {}),
    ...(region !== undefined ? { region } : {}),
    forcePathStyle,
  };
}
