// The pool's edge to the API server for its sets: server-side apply of a set's objects under the
// operator's field manager (forced, so an edit of a field the operator sets is taken back), and
// the deletion of a set once it may go.
import {
  ApiException,
  PatchStrategy,
  setHeaderOptions,
  type AppsV1Api,
  type CoreV1Api,
  type PolicyV1Api,
} from '@kubernetes/client-node';
import type { SetObjects } from './render.ts';
import { poolLabel, replicaSetLabel } from './set-names.ts';

/** The field manager of every object the operator applies (managedFields names it). */
export const fieldManager = 'streamcube-operator';

/** The request option of a server-side apply (Content-Type application/apply-patch+yaml). */
export const serverSideApply = setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply);

export type WorkloadApis = {
  apps: Pick<AppsV1Api, 'patchNamespacedStatefulSet' | 'deleteNamespacedStatefulSet'>;
  core: Pick<
    CoreV1Api,
    | 'patchNamespacedService'
    | 'deleteNamespacedService'
    | 'listNamespacedPersistentVolumeClaim'
    | 'deleteNamespacedPersistentVolumeClaim'
  >;
  policy: Pick<
    PolicyV1Api,
    'patchNamespacedPodDisruptionBudget' | 'deleteNamespacedPodDisruptionBudget'
  >;
};

export class SetWorkloads {
  private readonly apis: WorkloadApis;

  constructor(apis: WorkloadApis) {
    this.apis = apis;
  }

  /** Applies the set's Service, PDB and StatefulSet; returns them as stored. */
  async apply(objects: SetObjects): Promise<SetObjects> {
    const { service, podDisruptionBudget, statefulSet } = objects;
    const target = (o: { metadata?: { name?: string; namespace?: string } }) => ({
      name: o.metadata?.name ?? '',
      namespace: o.metadata?.namespace ?? 'default',
      fieldManager,
      force: true,
    });
    return {
      service: await this.apis.core.patchNamespacedService(
        { ...target(service), body: service },
        serverSideApply,
      ),
      podDisruptionBudget: await this.apis.policy.patchNamespacedPodDisruptionBudget(
        { ...target(podDisruptionBudget), body: podDisruptionBudget },
        serverSideApply,
      ),
      statefulSet: await this.apis.apps.patchNamespacedStatefulSet(
        { ...target(statefulSet), body: statefulSet },
        serverSideApply,
      ),
    };
  }

  /**
   * Deletes set `set` of pool `pool` (its objects called `objectName`, `set` unless the pool's
   * setNames renamed it): its PDB, Service, then (with `deleteClaims`) its data claims, and its
   * StatefulSet last, so that a pass that fails half-way still finds the set by its StatefulSet
   * and finishes. Objects already gone are skipped.
   */
  async delete(o: {
    namespace: string;
    pool: string;
    set: string;
    objectName?: string;
    deleteClaims: boolean;
  }): Promise<{ claimsDeleted: string[] }> {
    const { namespace, set } = o;
    const name = o.objectName ?? set;
    await ignoreNotFound(this.apis.policy.deleteNamespacedPodDisruptionBudget({ name, namespace }));
    await ignoreNotFound(this.apis.core.deleteNamespacedService({ name, namespace }));
    const claimsDeleted: string[] = [];
    if (o.deleteClaims) {
      // The StatefulSet controller labels each claim with its selector's labels.
      const claims = await this.apis.core.listNamespacedPersistentVolumeClaim({
        namespace,
        labelSelector: `${poolLabel}=${o.pool},${replicaSetLabel}=${set}`,
      });
      for (const claim of claims.items) {
        const claimName = claim.metadata?.name ?? '';
        await ignoreNotFound(
          this.apis.core.deleteNamespacedPersistentVolumeClaim({ name: claimName, namespace }),
        );
        claimsDeleted.push(claimName);
      }
    }
    await ignoreNotFound(this.apis.apps.deleteNamespacedStatefulSet({ name, namespace }));
    return { claimsDeleted };
  }
}

async function ignoreNotFound(call: Promise<unknown>): Promise<void> {
  try {
    await call;
  } catch (error) {
    if (!(error instanceof ApiException && error.code === 404)) throw error;
  }
}

/** The API server's own reason for refusing a write, for a condition: its Status message. */
export function apiErrorMessage(error: unknown): string {
  if (error instanceof ApiException) {
    const body: unknown = error.body;
    try {
      const parsed = (typeof body === 'string' ? JSON.parse(body) : body) as { message?: string };
      if (parsed?.message) return parsed.message;
    } catch {
      // not a Status: the exception's own text below
    }
    return `HTTP ${error.code}`;
  }
  return error instanceof Error ? error.message : String(error);
}
