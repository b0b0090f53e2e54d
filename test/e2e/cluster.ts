// The cluster the e2e scenario drives, as a user would: kubectl and helm against KUBECONFIG, pod
// readiness, the CubeAssignment's status, the Lease, and the receivers' admin API reached from
// inside their pods (the admin port is not exposed). What differs between clusters comes in
// through the environment:
//   KUBECONFIG                        the cluster
//   STREAMCUBE_E2E_BROKERS            the Kafka bootstrap address as pods reach it
//   STREAMCUBE_E2E_IMAGE              repository:tag of the streamcube image, present on the node
//   STREAMCUBE_E2E_KUBECTL / _HELM    the tools (default: kubectl, helm on PATH)
//   STREAMCUBE_E2E_NAMESPACE          where to install (default: streamcube-e2e)
//   STREAMCUBE_E2E_HELM_ARGS          more `helm install` arguments, split at spaces
//   STREAMCUBE_E2E_PREVIOUS_IMAGE     the previous release's image, present on the node: the
//                                     scenario installs that release and upgrades it to this one
//   STREAMCUBE_E2E_PROMETHEUS_IMAGE   an image with /bin/prometheus and node: the monitoring step
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { waitFor } from '../support/wait.ts';

const run = promisify(execFile);

export const config = {
  kubectl: process.env.STREAMCUBE_E2E_KUBECTL || 'kubectl',
  helm: process.env.STREAMCUBE_E2E_HELM || 'helm',
  namespace: process.env.STREAMCUBE_E2E_NAMESPACE || 'streamcube-e2e',
  brokers: required('STREAMCUBE_E2E_BROKERS'),
  image: required('STREAMCUBE_E2E_IMAGE'),
  helmArgs: (process.env.STREAMCUBE_E2E_HELM_ARGS ?? '').split(' ').filter((a) => a !== ''),
  previousImage: process.env.STREAMCUBE_E2E_PREVIOUS_IMAGE || undefined,
  prometheusImage: process.env.STREAMCUBE_E2E_PROMETHEUS_IMAGE || undefined,
  /** The pool's scale steps (2 -> 3 -> 2 sets); `STREAMCUBE_E2E_POOL_SCALE=0` leaves them out. */
  poolScale: process.env.STREAMCUBE_E2E_POOL_SCALE !== '0',
  release: 'sc',
  cube: 'orders',
};

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set (see the head of test/e2e/cluster.ts)`);
  return value;
}

/** kubectl in the scenario's namespace; `input` goes to its standard input. */
export async function kubectl(args: string[], input?: string): Promise<string> {
  const child = run(config.kubectl, ['-n', config.namespace, ...args], {
    maxBuffer: 64 * 1024 * 1024,
  });
  if (input !== undefined) child.child.stdin?.end(input);
  return (await child).stdout;
}

export async function helm(args: string[]): Promise<string> {
  return (await run(config.helm, ['-n', config.namespace, ...args], { maxBuffer: 16 << 20 }))
    .stdout;
}

/** Polls once a second: a cluster moves in seconds, not milliseconds. */
export function waitUntil<T>(
  what: string,
  probe: () => Promise<T | undefined>,
  timeoutMs = 180_000,
): Promise<T> {
  return waitFor(what, probe, timeoutMs, 1000);
}

export interface PodInfo {
  name: string;
  ready: boolean;
  uid: string;
  phase: string;
  restarts: number;
}

export async function pods(selector: string): Promise<PodInfo[]> {
  const list = JSON.parse(await kubectl(['get', 'pods', '-l', selector, '-o', 'json'])) as {
    items: {
      metadata: { name: string; uid: string; deletionTimestamp?: string };
      status: {
        phase: string;
        conditions?: { type: string; status: string }[];
        containerStatuses?: { restartCount: number }[];
      };
    }[];
  };
  return list.items
    .filter((p) => !p.metadata.deletionTimestamp)
    .map((p) => ({
      name: p.metadata.name,
      uid: p.metadata.uid,
      phase: p.status.phase,
      ready: p.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false,
      restarts: (p.status.containerStatuses ?? []).reduce((a, c) => a + c.restartCount, 0),
    }));
}

export const operatorSelector = `app.kubernetes.io/instance=${config.release},app.kubernetes.io/component=operator`;
export const receiverSelector = `app.kubernetes.io/instance=${config.release},app.kubernetes.io/component=receiver`;

export async function allReady(selector: string, count: number): Promise<PodInfo[] | undefined> {
  const list = await pods(selector);
  return list.length === count && list.every((p) => p.ready) ? list : undefined;
}

let adminToken = '';

/** Reads the admin API's bearer token from the chart's Secret, for receiverApi. */
export async function readAdminToken(): Promise<void> {
  const token = await kubectl([
    'get',
    'secret',
    `${config.release}-admin-token`,
    '-o',
    'jsonpath={.data.token}',
  ]);
  adminToken = Buffer.from(token, 'base64').toString('utf8');
}

/**
 * A call to a receiver's admin API from inside its pod (the admin port is not exposed): over HTTPS
 * trusting the chart's receiver CA and checking the receivers' name, as the operator does, when the
 * pod has the chart's certificate (receivers.tls), else plain HTTP.
 */
export async function receiverApi<T>(
  pod: string,
  method: string,
  path: string,
  body?: unknown,
): Promise<T> {
  const script = `
    const fs = require('node:fs');
    const [path, method, token, body] = process.argv.slice(1);
    const caFile = '/var/run/streamcube-tls/ca.crt';
    const tls = fs.existsSync(caFile);
    const request = require(tls ? 'node:https' : 'node:http').request({
      host: '127.0.0.1', port: 8080, path, method,
      ...(tls ? { ca: fs.readFileSync(caFile), servername: 'streamcube-receiver' } : {}),
      headers: { authorization: 'Bearer ' + token, 'content-type': 'application/json' },
    }, (r) => {
      let text = '';
      r.setEncoding('utf8');
      r.on('data', (c) => (text += c));
      r.on('end', () => process.stdout.write(JSON.stringify({ status: r.statusCode, body: text })));
    });
    request.on('error', (e) => { console.error(e); process.exit(1); });
    request.end(body === '' ? undefined : body);`;
  const out = await kubectl([
    'exec',
    pod,
    '-c',
    'receiver',
    '--',
    'node',
    '-e',
    script,
    path,
    method,
    adminToken,
    body === undefined ? '' : JSON.stringify(body),
  ]);
  const { status, body: text } = JSON.parse(out) as { status: number; body: string };
  if (status === 404) throw new NotHeld(`${pod} ${method} ${path}: 404`);
  if (status >= 300) throw new Error(`${pod} ${method} ${path}: ${status} ${text}`);
  return JSON.parse(text) as T;
}

/** The receiver does not hold the cube (404): nothing of it is there. */
export class NotHeld extends Error {}

export interface CubeStatusView {
  /** Whether the status speaks of the current spec (status.observedGeneration = generation). */
  current: boolean;
  assignment?: Record<string, number[]>;
  reassign?: { phase: string };
  conditions?: { type: string; status: string; reason?: string }[];
}

export async function cubeStatus(): Promise<CubeStatusView> {
  const cube = JSON.parse(await kubectl(['get', 'cubeassignment', config.cube, '-o', 'json'])) as {
    metadata: { generation: number };
    status?: Omit<CubeStatusView, 'current'> & { observedGeneration?: number };
  };
  return { ...cube.status, current: cube.status?.observedGeneration === cube.metadata.generation };
}

/** Ready for the current spec, with no reassign in flight. */
export function isSettled(status: CubeStatusView): boolean {
  return (
    status.current &&
    !status.reassign &&
    (status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false)
  );
}

/** Who leads the operators: the holder of their Lease. */
export async function leaseHolder(): Promise<string> {
  const lease = JSON.parse(
    await kubectl(['get', 'lease', 'streamcube-operator', '-o', 'json']),
  ) as { spec?: { holderIdentity?: string } };
  return lease.spec?.holderIdentity ?? '';
}
