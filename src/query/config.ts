// Query server configuration from flags and environment (flags win).
import { parseArgs } from 'node:util';
import { parseDuration } from '../api/duration.ts';
import { receiverAccessOf } from '../http/tls.ts';
import { ConfigError } from '../config-error.ts';
import type { DeepStorageLocation } from '../receiver/deep-storage.ts';
import { deepStorageOf } from '../receiver/config.ts';

export interface QueryServerConfig {
  host: string;
  port: number;
  kubeconfig: string | undefined;
  /** Only this namespace's CubeAssignments (and receivers), or every namespace when undefined. */
  namespace: string | undefined;
  /** Where the receiver pods are, for every cube; undefined: each cube's own namespace. */
  receiverNamespace: string | undefined;
  /** More label requirements of receiver pods (`key=value,…`): the release's, in the chart. */
  receiverSelector: string | undefined;
  /** Call receivers over HTTPS trusting this CA (PEM); plain HTTP when undefined. */
  receiverCaFile: string | undefined;
  /** The name receivers' certificates must carry (checked whatever pod IP is dialled). */
  receiverServerName: string;
  receiverPort: number;
  /** The receivers' token (first line), re-read while running. */
  receiverTokenFile: string;
  /** The tokens this server's own clients present (first line); the receivers' by default. */
  tokenFile: string;
  tokenGraceMs: number;
  deepStorage: DeepStorageLocation;
  receiverTimeoutMs: number;
  maxRows: number;
  /** The committed view's cache holds at most this many bytes. */
  cacheBytes: number;
  /** A cube's listing of commit records is reused this long; 0: listed for every answer. */
  cacheListingMaxAgeMs: number;
  /** Past its age a listing resumes from the newest windows; every key is listed this often. */
  cacheFullListingMaxAgeMs: number;
}

export const queryServerUsage = `Usage: streamcube query-server [options]

Answers POST /v1/namespaces/<ns>/cubes/<cube>/query over live receivers and committed deep storage.

Options (environment variable in brackets):
  --kubeconfig FILE            API server credentials      [KUBECONFIG, default: in-cluster]
  --namespace NS               only this namespace's cubes [WATCH_NAMESPACE, default: all namespaces]
  --receiver-namespace NS      find receiver pods in NS    [STREAMCUBE_RECEIVER_NAMESPACE, default: each cube's own]
  --receiver-selector K=V,...  only receiver pods with these labels too (the chart: its release's)
                               [STREAMCUBE_RECEIVER_SELECTOR, default: every pod with the set label]
  --receiver-port N            receivers' admin port       [STREAMCUBE_RECEIVER_PORT, default: 8080]
  --receiver-ca-file FILE      call receivers over HTTPS, trusting this CA (PEM; re-read)
                               [STREAMCUBE_RECEIVER_CA_FILE, default: plain HTTP]
  --receiver-server-name NAME  the name receivers' certificates must carry        [streamcube-receiver]
  --receiver-plain-http        call receivers over plain HTTP instead: no --receiver-ca-file
                               (local use only)       [STREAMCUBE_RECEIVER_PLAIN_HTTP=true]
  --receiver-token-file FILE   receivers' read token       [STREAMCUBE_RECEIVER_TOKEN_FILE, required]
  --token-file FILE            bearer token this server accepts (first line; re-read every 2s)
                               [STREAMCUBE_QUERY_TOKEN_FILE, default: the receivers' token file]
  --token-grace DUR            the replaced token stays valid for                               [2m]
  --deep-storage URL           s3://bucket/prefix or a directory  [STREAMCUBE_DEEP_STORAGE, or --deep-storage-dir]
  --deep-storage-dir DIR       the same, a directory only         [STREAMCUBE_DEEP_STORAGE_DIR]
  --s3-endpoint URL  --s3-region NAME  --s3-force-path-style      as the receiver's
  --receiver-timeout DUR       each receiver call's deadline; then a sibling is asked           [5s]
  --max-rows N                 rows an answer may hold (400 past it)                        [10000]
  --cache-bytes N              commit records and hand-off rows kept, in bytes (Ki, Mi, Gi)  [256Mi]
  --cache-listing-max-age DUR  a cube's listing of commit records is reused this long         [5s]
  --cache-full-listing-max-age DUR  past it, a listing resumes from the newest windows;
                               every record is listed again this often (and after a gap)    [10m]
  --host ADDR / --port N       the query API, /healthz /readyz /metrics  [default: 0.0.0.0:8082]

Logging: STREAMCUBE_LOG_LEVEL=error|warn|info|debug (default: info).
`;

const dnsLabel = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

export function parseQueryServerConfig(
  argv: string[],
  env: NodeJS.ProcessEnv = process.env,
): QueryServerConfig {
  const { values } = parseArgs({
    args: argv,
    options: {
      ...Object.fromEntries(
        [
          'kubeconfig',
          'namespace',
          'receiver-namespace',
          'receiver-selector',
          'receiver-ca-file',
          'receiver-server-name',
          'receiver-port',
          'receiver-token-file',
          'token-file',
          'token-grace',
          'deep-storage',
          'deep-storage-dir',
          's3-endpoint',
          's3-region',
          'receiver-timeout',
          'max-rows',
          'cache-bytes',
          'cache-listing-max-age',
          'cache-full-listing-max-age',
          'host',
          'port',
        ].map((k) => [k, { type: 'string' as const }]),
      ),
      's3-force-path-style': { type: 'boolean' },
      'receiver-plain-http': { type: 'boolean' },
    },
    strict: true,
  });
  const flag = (k: string): string | undefined => {
    const v = (values as Record<string, string | boolean | undefined>)[k];
    return typeof v === 'string' ? v : undefined;
  };
  const integer = (k: string, text: string, min: number, max: number): number => {
    const n = Number(text);
    if (!Number.isInteger(n) || n < min || n > max)
      throw new ConfigError(`--${k} must be an integer ${min}..${max}, got '${text}'`);
    return n;
  };
  const duration = (k: string, fallback: string, min: number): number => {
    const text = flag(k) ?? fallback;
    const ms = parseDuration(text);
    if (ms === undefined || ms < min)
      throw new ConfigError(`--${k} must be a duration like 5s, got '${text}'`);
    return ms;
  };
  const bytes = (k: string, text: string): number => {
    const m = /^(\d+)(Ki|Mi|Gi)?$/.exec(text);
    const n = m
      ? Number(m[1]) * { '': 1, Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30 }[m[2] ?? '']!
      : NaN;
    if (!Number.isSafeInteger(n))
      throw new ConfigError(`--${k} must be a byte count like 268435456 or 256Mi, got '${text}'`);
    return n;
  };
  const namespaceFlag = (k: string, text: string | undefined): string | undefined => {
    if (text !== undefined && !dnsLabel.test(text))
      throw new ConfigError(`--${k} must be a namespace name (a DNS label), got '${text}'`);
    return text;
  };
  const receiverTokenFile = flag('receiver-token-file') ?? env.STREAMCUBE_RECEIVER_TOKEN_FILE;
  if (!receiverTokenFile)
    throw new ConfigError('--receiver-token-file (or STREAMCUBE_RECEIVER_TOKEN_FILE) is required');
  return {
    host: flag('host') ?? '0.0.0.0',
    port: integer('port', flag('port') ?? '8082', 0, 65535),
    kubeconfig: flag('kubeconfig') ?? (env.KUBECONFIG || undefined),
    namespace: namespaceFlag('namespace', flag('namespace') ?? (env.WATCH_NAMESPACE || undefined)),
    receiverNamespace: namespaceFlag(
      'receiver-namespace',
      flag('receiver-namespace') ?? (env.STREAMCUBE_RECEIVER_NAMESPACE || undefined),
    ),
    ...receiverAccessOf(values, env),
    receiverPort: integer(
      'receiver-port',
      flag('receiver-port') ?? env.STREAMCUBE_RECEIVER_PORT ?? '8080',
      1,
      65535,
    ),
    receiverTokenFile,
    tokenFile: flag('token-file') ?? (env.STREAMCUBE_QUERY_TOKEN_FILE || receiverTokenFile),
    tokenGraceMs: duration('token-grace', '2m', 0),
    deepStorage: deepStorageOf(
      {
        'deep-storage': flag('deep-storage'),
        'deep-storage-dir': flag('deep-storage-dir'),
        's3-endpoint': flag('s3-endpoint'),
        's3-region': flag('s3-region'),
        's3-force-path-style': values['s3-force-path-style'],
      },
      env,
    ),
    receiverTimeoutMs: duration('receiver-timeout', '5s', 1),
    maxRows: integer('max-rows', flag('max-rows') ?? '10000', 1, 1_000_000),
    cacheBytes: bytes('cache-bytes', flag('cache-bytes') ?? '256Mi'),
    cacheListingMaxAgeMs: duration('cache-listing-max-age', '5s', 0),
    cacheFullListingMaxAgeMs: duration('cache-full-listing-max-age', '10m', 0),
  };
}
