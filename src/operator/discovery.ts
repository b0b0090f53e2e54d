// Receiver discovery: pods labelled with their replica set; a replica set is the set of its
// ready pods. The admin address is the pod IP and the receiver port.
import type { V1Pod } from '@kubernetes/client-node';

export const replicaSetLabel = 'streamcube.io/replica-set';
/**
 * The label selector of receiver pods: every pod with the replica-set label, narrowed by `extra`
 * (`key=value,…`: the chart's release, so that a pod of another release or of anyone able to
 * create pods with that label is never sent the admin token).
 */
export function receiverLabelSelector(extra: string | undefined): string {
  return extra ? `${replicaSetLabel},${extra}` : replicaSetLabel;
}

const labelKey =
  /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const labelValue = /^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$/;

/**
 * `--receiver-selector`: equality requirements `key=value[,key=value…]` (what a release's labels
 * need), checked here so that a typo fails at start instead of finding no receiver forever.
 * Returns the error's text, or undefined when valid.
 */
export function receiverSelectorError(text: string): string | undefined {
  for (const part of text.split(',')) {
    const [key, value, ...rest] = part.split('=');
    if (rest.length > 0 || value === undefined || !labelKey.test(key!) || !labelValue.test(value))
      return `'${part}' is not a label requirement key=value`;
  }
  return undefined;
}

/** Optional pod annotation overriding the operator's default receiver port. */
export const adminPortAnnotation = 'streamcube.io/admin-port';

export interface ReceiverEndpoint {
  /** Pod name: the receiver's identity in logs, events and the journal. */
  name: string;
  replicaSet: string;
  baseUrl: string;
}

export function isPodReady(pod: V1Pod): boolean {
  if (pod.metadata?.deletionTimestamp) return false;
  return (pod.status?.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True');
}

/** The annotation's port when it is one (1-65535, decimal); a typo must not make `http://ip:NaN`. */
function annotatedPort(value: string | undefined): number | undefined {
  if (value === undefined || !/^[0-9]{1,5}$/.test(value.trim())) return undefined;
  const port = Number(value.trim());
  return port >= 1 && port <= 65_535 ? port : undefined;
}

/** Ready receivers grouped by replica set, each list sorted by pod name. */
export function receiversByReplicaSet(
  pods: V1Pod[],
  defaultPort: number,
  scheme: 'http' | 'https' = 'http',
): Map<string, ReceiverEndpoint[]> {
  const out = new Map<string, ReceiverEndpoint[]>();
  for (const pod of pods) {
    const replicaSet = pod.metadata?.labels?.[replicaSetLabel];
    const ip = pod.status?.podIP;
    const name = pod.metadata?.name;
    if (!replicaSet || !ip || !name || !isPodReady(pod)) continue;
    const port = annotatedPort(pod.metadata?.annotations?.[adminPortAnnotation]) ?? defaultPort;
    const host = ip.includes(':') ? `[${ip}]` : ip;
    const list = out.get(replicaSet) ?? [];
    list.push({ name, replicaSet, baseUrl: `${scheme}://${host}:${port}` });
    out.set(replicaSet, list);
  }
  for (const list of out.values()) list.sort((a, b) => (a.name < b.name ? -1 : 1));
  return out;
}

/**
 * Receivers that are not Ready (down, restarting), by replica set, sorted by pod name. Pods being
 * deleted are left out: they are leaving the set, not coming back to it.
 */
export function notReadyByReplicaSet(pods: V1Pod[]): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const pod of pods) {
    const replicaSet = pod.metadata?.labels?.[replicaSetLabel];
    const name = pod.metadata?.name;
    if (!replicaSet || !name || pod.metadata?.deletionTimestamp || isPodReady(pod)) continue;
    out.set(replicaSet, [...(out.get(replicaSet) ?? []), name].sort());
  }
  return out;
}
