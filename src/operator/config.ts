// Operator configuration from flags and environment (flags win).
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { dnsSubdomainPattern } from '../api/cube-assignment.ts';
import { parseDuration } from '../api/duration.ts';
import { receiverAccessOf } from '../http/tls.ts';
import { ConfigError } from '../config-error.ts';

export interface OperatorConfig {
  identity: string;
  /** Only this namespace's CubeAssignments and pods, or every namespace when undefined. */
  namespace: string | undefined;
  /**
   * Where the receiver pods are, for every cube: receivers shared by cubes of many namespaces
   * (the Helm chart's, in its release namespace). Undefined: each cube's own namespace.
   */
  receiverNamespace: string | undefined;
  /**
   * A ConfigMap of --receiver-namespace holding a ReceiverPool (`pool.json`) that the leader
   * applies: the Helm chart's pool (pool/chart-pool.ts).
   */
  poolConfigMap: string | undefined;
  /** More label requirements of receiver pods (`key=value,…`): the release's, in the chart. */
  receiverSelector: string | undefined;
  /** Call receivers over HTTPS trusting this CA (PEM); plain HTTP when undefined. */
  receiverCaFile: string | undefined;
  /** The name receivers' certificates must carry (checked whatever pod IP is dialled). */
  receiverServerName: string;
  host: string;
  port: number;
  kubeconfig: string | undefined;
  /** The receivers' admin token (first line), read again while running (TokenFile). */
  receiverTokenFile: string;
  receiverTokenGraceMs: number;
  receiverPort: number;
  leaseNamespace: string;
  leaseName: string;
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
  phaseTimeoutMs: number;
  drainTimeoutMs: number;
  resyncMs: number;
  rejectedEventsWindowMs: number;
  /** How often the leader deletes consumer groups left behind; 0: never. */
  groupSweepMs: number;
  workers: number;
}

export const operatorUsage = `Usage: streamcube operator [options]

Options (environment variable in brackets):
  --kubeconfig FILE            API server credentials      [KUBECONFIG, default: in-cluster]
  --namespace NS               watch only this namespace   [WATCH_NAMESPACE, default: all namespaces]
  --receiver-token-file FILE   receivers' admin token      [STREAMCUBE_RECEIVER_TOKEN_FILE, required]
                               (re-read every 2s: a change applies without a restart)
  --receiver-token-grace DUR   the replaced token is still offered on a 403 for                [2m]
  --receiver-port N            receivers' admin port       [STREAMCUBE_RECEIVER_PORT, default: 8080]
  --receiver-ca-file FILE      call receivers over HTTPS, trusting this CA (PEM; re-read)
                               [STREAMCUBE_RECEIVER_CA_FILE, default: plain HTTP]
  --receiver-server-name NAME  the name receivers' certificates must carry        [streamcube-receiver]
  --receiver-plain-http        call receivers over plain HTTP instead: no --receiver-ca-file
                               (local use only)       [STREAMCUBE_RECEIVER_PLAIN_HTTP=true]
  --receiver-namespace NS      find receiver pods in NS, for the cubes of every namespace
                               [STREAMCUBE_RECEIVER_NAMESPACE, default: each cube's own namespace]
  --receiver-selector K=V,...  only receiver pods with these labels too (the chart: its release's)
                               [STREAMCUBE_RECEIVER_SELECTOR, default: every pod with the set label]
  --pool-configmap NAME        apply the ReceiverPool in ConfigMap NAME (key pool.json) of
                               --receiver-namespace, and again when it changes (the chart's pool)
                               [STREAMCUBE_POOL_CONFIGMAP, default: none]
  --host ADDR / --port N       /healthz /readyz /metrics   [default: 0.0.0.0:8081]
  --identity NAME              leader-election identity    [POD_NAME, default: hostname + random]
  --lease-namespace NS         namespace of the Lease      [POD_NAMESPACE, default: default]
  --lease-name NAME            name of the Lease           [default: streamcube-operator]
  --lease-duration DUR         [default: 15s]   --renew-deadline DUR [10s]   --retry-period DUR [2s]
  --phase-timeout DUR          deadline of a reassign phase before it rolls back or reports  [60s]
  --drain-timeout DUR          how long one drain call waits for the stop offsets             [30s]
  --resync DUR                 status refresh period of a stable cube                          [10s]
  --rejected-events-window DUR how far back spec.rejectedEventsThreshold measures rejections   [5m]
  --group-sweep DUR            how often empty consumer groups of deleted cubes or receivers
                               are deleted from the brokers; 0 turns it off                    [10m]
  --workers N                  cubes reconciled at once                                        [4]

Logging: STREAMCUBE_LOG_LEVEL=error|warn|info|debug (default: info).
`;

/** A namespace is a DNS label: a typo must fail at start, not find no receivers forever. */
function receiverNamespace(text: string | undefined): string | undefined {
  if (text === undefined) return undefined;
  if (!/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(text))
    throw new ConfigError(
      `--receiver-namespace must be a namespace name (a DNS label), got '${text}'`,
    );
  return text;
}

export function parseOperatorConfig(
  argv: string[],
  env: NodeJS.ProcessEnv = process.env,
): OperatorConfig {
  const { values } = parseArgs({
    args: argv,
    options: {
      ...Object.fromEntries(
        [
          'kubeconfig',
          'namespace',
          'receiver-token-file',
          'receiver-token-grace',
          'receiver-port',
          'receiver-namespace',
          'receiver-selector',
          'pool-configmap',
          'receiver-ca-file',
          'receiver-server-name',
          'host',
          'port',
          'identity',
          'lease-namespace',
          'lease-name',
          'lease-duration',
          'renew-deadline',
          'retry-period',
          'phase-timeout',
          'drain-timeout',
          'resync',
          'rejected-events-window',
          'group-sweep',
          'workers',
        ].map((k) => [k, { type: 'string' as const }]),
      ),
      'receiver-plain-http': { type: 'boolean' },
    },
    strict: true,
  });
  const flag = (k: string): string | undefined => {
    const v = (values as Record<string, string | boolean | undefined>)[k];
    return typeof v === 'string' ? v : undefined;
  };
  const duration = (k: string, fallback: string, min = 1): number => {
    const text = flag(k) ?? fallback;
    const ms = parseDuration(text);
    if (ms === undefined || ms < min)
      throw new ConfigError(
        `--${k} must be a ${min > 0 ? 'positive ' : ''}duration like 10s, got '${text}'`,
      );
    return ms;
  };
  const integer = (k: string, text: string, min: number, max: number): number => {
    const n = Number(text);
    if (!Number.isInteger(n) || n < min || n > max)
      throw new ConfigError(`--${k} must be an integer ${min}..${max}, got '${text}'`);
    return n;
  };
  const tokenFile = flag('receiver-token-file') ?? env.STREAMCUBE_RECEIVER_TOKEN_FILE;
  if (!tokenFile)
    throw new ConfigError('--receiver-token-file (or STREAMCUBE_RECEIVER_TOKEN_FILE) is required');
  const poolConfigMap = flag('pool-configmap') ?? (env.STREAMCUBE_POOL_CONFIGMAP || undefined);
  const receiverNs = receiverNamespace(
    flag('receiver-namespace') ?? (env.STREAMCUBE_RECEIVER_NAMESPACE || undefined),
  );
  if (poolConfigMap !== undefined) {
    if (poolConfigMap.length > 253 || !dnsSubdomainPattern.test(poolConfigMap))
      throw new ConfigError(
        `--pool-configmap must be a ConfigMap name (a DNS subdomain), got '${poolConfigMap}'`,
      );
    if (receiverNs === undefined)
      throw new ConfigError(
        "--pool-configmap needs --receiver-namespace: the pool and its ConfigMap are in the receivers' namespace",
      );
  }
  return {
    identity: flag('identity') ?? env.POD_NAME ?? `${hostname()}-${randomBytes(3).toString('hex')}`,
    namespace: flag('namespace') ?? (env.WATCH_NAMESPACE || undefined),
    receiverNamespace: receiverNs,
    poolConfigMap,
    ...receiverAccessOf(values, env),
    host: flag('host') ?? '0.0.0.0',
    port: integer('port', flag('port') ?? '8081', 0, 65535),
    kubeconfig: flag('kubeconfig') ?? (env.KUBECONFIG || undefined),
    receiverTokenFile: tokenFile,
    receiverTokenGraceMs: duration('receiver-token-grace', '2m', 0),
    receiverPort: integer(
      'receiver-port',
      flag('receiver-port') ?? env.STREAMCUBE_RECEIVER_PORT ?? '8080',
      1,
      65535,
    ),
    leaseNamespace: flag('lease-namespace') ?? env.POD_NAMESPACE ?? 'default',
    leaseName: flag('lease-name') ?? 'streamcube-operator',
    leaseDurationMs: duration('lease-duration', '15s'),
    renewDeadlineMs: duration('renew-deadline', '10s'),
    retryPeriodMs: duration('retry-period', '2s'),
    phaseTimeoutMs: duration('phase-timeout', '60s'),
    drainTimeoutMs: duration('drain-timeout', '30s'),
    resyncMs: duration('resync', '10s'),
    rejectedEventsWindowMs: duration('rejected-events-window', '5m'),
    groupSweepMs: duration('group-sweep', '10m', 0),
    workers: integer('workers', flag('workers') ?? '4', 1, 64),
  };
}
