// The ReceiverPool reconciler: applies sets 0 to spec.sets - 1 (StatefulSet, headless Service,
// PDB, owned by the pool), removes the sets past it once no cube uses them, and writes the
// pool's status when it changed. With spec.autoscale, the autoscaler looks at the pool's lag
// at each pass and may change spec.sets (autoscaler.ts). Reads the informer caches, never the
// event that woke it.
import type {
  CustomObjectsApi,
  KubernetesObject,
  V1PodDisruptionBudget,
  V1Service,
  V1StatefulSet,
} from '@kubernetes/client-node';
import type { CubeAssignment } from '../../api/cube-assignment.ts';
import {
  group,
  plural,
  version,
  type ReceiverPool,
  type ReceiverPoolStatus,
} from '../../api/receiver-pool.ts';
import { getCondition } from '../../api/conditions.ts';
import type { Logger } from '../../observability/logger.ts';
import type { EventRecorder } from '../events.ts';
import type { ReconcileResult } from '../runtime/controller.ts';
import { splitObjectKey } from '../runtime/informer.ts';
import { mergePatchChanges } from '../status-changes.ts';
import { mergePatch } from '../../kubernetes/cube-api.ts';
import { AppliedSets, desiredDigest, setFingerprint } from './applied-sets.ts';
import { poolStatus, type ObservedSet, type PoolFindings } from './pool-status.ts';
import { renderSet } from './render.ts';
import { decideScaleIn } from './scale-in.ts';
import { poolOf, setIndexOf, setName, setObjectName } from './set-names.ts';
import type { PoolMetrics } from './metrics.ts';
import type { PoolAutoscaler } from './autoscaler.ts';
import type { SetWorkloads } from './workloads.ts';
import { apiErrorMessage } from './workloads.ts';

export interface PoolReconcilerDeps {
  getPool(namespace: string, name: string): ReceiverPool | undefined;
  /** Cached objects of a namespace labelled with a pool. */
  statefulSets(namespace: string): V1StatefulSet[];
  services(namespace: string): V1Service[];
  budgets(namespace: string): V1PodDisruptionBudget[];
  /** The cubes that may use the receivers of `namespace` (theirs, or every cube with --receiver-namespace). */
  cubesUsing(namespace: string): CubeAssignment[];
  workloads: SetWorkloads;
  statusApi: Pick<CustomObjectsApi, 'patchNamespacedCustomObjectStatus'>;
  events: EventRecorder;
  resyncMs: number;
  metrics?: PoolMetrics;
  /** Absent: spec.autoscale is not acted on. */
  autoscaler?: PoolAutoscaler;
  logger: Logger;
  now?: () => Date;
}

export function createPoolReconciler(
  deps: PoolReconcilerDeps,
): (key: string) => Promise<ReconcileResult> {
  const applied = new AppliedSets();
  const now = deps.now ?? (() => new Date());
  return async (key) => {
    const { namespace = 'default', name } = splitObjectKey(key);
    const pool = deps.getPool(namespace, name);
    // Gone or going: the garbage collector deletes the sets by their owner references.
    if (!pool || pool.metadata.deletionTimestamp) {
      deps.metrics?.forget(namespace, name);
      deps.autoscaler?.forget(namespace, name);
      return {};
    }
    // With spec.autoscale, a spec.sets outside [minSets, maxSets] is never applied: the autoscaler
    // writes it back into the range (SetsClamped) and this pass renders the clamped count already.
    const sets = clampedSets(pool);
    const uid = pool.metadata.uid;
    const owned = <T extends KubernetesObject>(objects: T[]): Map<string, T> =>
      new Map(
        objects
          .filter(
            (o) =>
              poolOf(o.metadata?.labels) === name &&
              (o.metadata?.ownerReferences ?? []).some((r) => r.uid === uid && r.controller),
          )
          .map((o) => [o.metadata?.name ?? '', o]),
      );
    const statefulSets = owned(deps.statefulSets(namespace));
    const services = owned(deps.services(namespace));
    const budgets = owned(deps.budgets(namespace));

    const findings: PoolFindings = { sets: [], held: [], applyFailures: [] };
    const observe = (set: string, index: number, sts: V1StatefulSet | undefined): ObservedSet => ({
      name: set,
      index,
      replicas: sts?.status?.replicas ?? 0,
      readyReplicas: sts?.status?.readyReplicas ?? 0,
    });
    const { setNames } = pool.spec;
    for (let index = 0; index < sets; index++) {
      const set = setName(name, index, setNames);
      const objectName = setObjectName(name, index, setNames);
      const desired = renderSet(pool, index);
      const digest = desiredDigest(desired);
      const live = {
        statefulSet: statefulSets.get(objectName),
        service: services.get(objectName),
        podDisruptionBudget: budgets.get(objectName),
      };
      const at = Date.now();
      const appliedKey = `${namespace}/${objectName}`;
      if (applied.fresh(appliedKey, digest, setFingerprint(live), at, deps.resyncMs)) {
        findings.sets.push(observe(set, index, live.statefulSet));
        continue;
      }
      try {
        const stored = await deps.workloads.apply(desired);
        applied.applied(appliedKey, digest, setFingerprint(stored), at);
        findings.sets.push(observe(set, index, stored.statefulSet));
      } catch (error) {
        applied.forget(appliedKey);
        const message = apiErrorMessage(error);
        deps.logger.warn('cannot apply a set of a receiver pool', {
          pool: key,
          set,
          error: message,
        });
        findings.applyFailures.push({ set, message });
        if (live.statefulSet) findings.sets.push(observe(set, index, live.statefulSet));
      }
    }

    const draining = [...statefulSets.keys()]
      .map((objectName) => ({ objectName, index: setIndexOf(name, objectName, setNames) }))
      .filter((s): s is { objectName: string; index: number } => s.index !== undefined)
      .filter((s) => s.index >= sets)
      .map((s) => ({ ...s, set: setName(name, s.index, setNames) }))
      .sort((a, b) => a.index - b.index);
    const decision = decideScaleIn(
      draining.map((s) => s.set),
      deps.cubesUsing(namespace),
    );
    findings.held = decision.held;
    const removed: { set: string; claimsDeleted: number }[] = [];
    for (const { set, objectName, index } of draining) {
      if (!decision.remove.includes(set)) {
        findings.sets.push(observe(set, index, statefulSets.get(objectName)));
        continue;
      }
      const deleteClaims = pool.spec.storage.retainOnScaleIn === 'Delete';
      try {
        const { claimsDeleted } = await deps.workloads.delete({
          namespace,
          pool: name,
          set,
          objectName,
          deleteClaims,
        });
        applied.forget(`${namespace}/${objectName}`);
        deps.metrics?.removed(namespace, name);
        removed.push({ set, claimsDeleted: claimsDeleted.length });
        deps.logger.info('removed a set of a receiver pool', { pool: key, set, claimsDeleted });
      } catch (error) {
        const message = apiErrorMessage(error);
        findings.applyFailures.push({ set, message: `cannot remove it: ${message}` });
        findings.sets.push(observe(set, index, statefulSets.get(objectName)));
      }
    }

    // One Event for the sets removed together: Events of one reason are one series per pool
    // (events.ts), whose message is the last one recorded.
    if (removed.length > 0)
      deps.events.record(pool, 'Normal', 'SetRemoved', setsRemoved(pool, removed));

    const at = now();
    const status = poolStatus(
      sets === pool.spec.sets ? pool : { ...pool, spec: { ...pool.spec, sets } },
      findings,
      at,
    );
    deps.metrics?.publish(namespace, name, status);
    recordDegradedEvent(deps.events, pool, status);
    // A scale-in still under way: sets past spec.sets remain.
    const scalingIn = findings.sets.some((s) => s.index >= sets);
    const autoscale = await deps.autoscaler?.evaluate(pool, namespace, at, scalingIn);
    const patch = autoscale === undefined ? status : { ...status, autoscale };
    if (mergePatchChanges(pool.status, patch)) {
      await deps.statusApi.patchNamespacedCustomObjectStatus(
        { group, version, namespace, plural, name, body: { status: patch } },
        mergePatch,
      );
    }
    return { requeueAfterMs: deps.resyncMs };
  };
}

/** spec.sets, within spec.autoscale's [minSets, maxSets] when the pool has it. */
export function clampedSets(pool: ReceiverPool): number {
  const a = pool.spec.autoscale;
  if (!a) return pool.spec.sets;
  return Math.min(Math.max(pool.spec.sets, a.minSets), a.maxSets);
}

/** A Warning Event when Degraded turns True or its reason or message changes. */
function recordDegradedEvent(
  events: EventRecorder,
  pool: ReceiverPool,
  status: ReceiverPoolStatus,
): void {
  const next = getCondition(status.conditions, 'Degraded');
  if (next?.status !== 'True') return;
  const previous = getCondition(pool.status?.conditions, 'Degraded');
  if (
    previous?.status === 'True' &&
    previous.reason === next.reason &&
    previous.message === next.message
  )
    return;
  events.record(pool, 'Warning', next.reason, next.message);
}

/** The SetRemoved Event's message for the sets one pass removed. */
export function setsRemoved(
  pool: Pick<ReceiverPool, 'spec'>,
  removed: readonly { set: string; claimsDeleted: number }[],
): string {
  const retain = pool.spec.storage.retainOnScaleIn;
  const claims =
    retain === 'Delete'
      ? `deleted (${removed.reduce((n, r) => n + r.claimsDeleted, 0)})`
      : 'retained';
  const sets = removed.map((r) => r.set);
  return sets.length === 1
    ? `set ${sets[0]} removed: no CubeAssignment uses it; its data claims were ${claims} (spec.storage.retainOnScaleIn: ${retain})`
    : `sets ${sets.join(', ')} removed: no CubeAssignment uses them; their data claims were ${claims} (spec.storage.retainOnScaleIn: ${retain})`;
}
