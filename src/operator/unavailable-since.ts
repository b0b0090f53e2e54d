// Since when a replica set has had no ready receiver pod: what a failover's wait
// (spec.failoverAfter) counts from. Kept in status.unavailableSince, so that a leader started
// while a set is away waits out the rest of the time, not the whole of it again.
import type { V1Pod } from '@kubernetes/client-node';
import { isPodReady, replicaSetLabel } from './discovery.ts';

/**
 * Per replica set, the latest time one of its pods stopped being Ready (the Ready condition's
 * lastTransitionTime of pods that are not Ready, to the second). Pods being deleted, and pods
 * without that time, are left out.
 */
export function notReadySince(pods: readonly V1Pod[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const pod of pods) {
    const rs = pod.metadata?.labels?.[replicaSetLabel];
    if (!rs || pod.metadata?.deletionTimestamp || isPodReady(pod)) continue;
    const ready = (pod.status?.conditions ?? []).find((c) => c.type === 'Ready');
    const at = ready?.lastTransitionTime ? new Date(ready.lastTransitionTime).getTime() : NaN;
    if (Number.isFinite(at)) out.set(rs, Math.max(out.get(rs) ?? -Infinity, at));
  }
  return out;
}

/**
 * Since when a set without a ready pod has been so: the earliest of what this process saw and
 * what status recorded (a leader before it), but never before one of its pods last stopped being
 * Ready. That floor keeps a recorded time from outliving the outage it was written for: a set
 * that came back and left again unseen has pods that stopped being Ready since.
 */
export function unavailableSince(
  seen: number,
  recorded: string | undefined,
  podsNotReadySince: number | undefined,
): number {
  const fromStatus = recorded === undefined ? NaN : Date.parse(recorded);
  const earliest = Number.isFinite(fromStatus) ? Math.min(seen, fromStatus) : seen;
  return podsNotReadySince === undefined ? earliest : Math.max(earliest, podsNotReadySince);
}

/**
 * The merge patch of status.unavailableSince: a set away now (`away`, epoch ms by set) is written
 * with its time, a set recorded that is back or no longer the cube's is deleted. Undefined when
 * nothing changes.
 */
export function unavailableSincePatch(
  previous: Readonly<Record<string, string>> | undefined,
  away: ReadonlyMap<string, number>,
): Record<string, string | null> | undefined {
  const patch: Record<string, string | null> = {};
  for (const [rs, at] of away) {
    const iso = new Date(at).toISOString();
    if (previous?.[rs] === undefined || Date.parse(previous[rs]) !== at) patch[rs] = iso;
  }
  for (const rs of Object.keys(previous ?? {})) if (!away.has(rs)) patch[rs] = null;
  return Object.keys(patch).length > 0 ? patch : undefined;
}
