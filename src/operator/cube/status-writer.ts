// Writes a cube's status, finalizers and annotations as merge patches that carry the
// resourceVersion they were computed from (a 409 retries the cube), and records each write as the
// reconciler's own, so that its watch event does not requeue the cube (OwnWrites).
import {
  Observable,
  PatchStrategy,
  setHeaderOptions,
  type CustomObjectsApi,
} from '@kubernetes/client-node';
import {
  group,
  plural,
  version,
  type CubeAssignment,
  type CubeAssignmentStatusPatch,
} from '../../api/cube-assignment.ts';
import { setCondition, type Condition } from '../../api/conditions.ts';
import type { OwnWrites } from '../own-writes.ts';
import { mergePatchChanges } from '../status-changes.ts';

/** The API calls the status writer makes. */
export type CubeObjectsApi = Pick<
  CustomObjectsApi,
  'patchNamespacedCustomObjectStatus' | 'patchNamespacedCustomObject'
>;

/** A condition as a branch decides it; its time and generation are the writer's. */
export type ConditionUpdate = Omit<Condition, 'lastTransitionTime' | 'observedGeneration'>;

/** Options of a merge patch request, aborted by `signal` when there is one. */
function mergePatch(signal?: AbortSignal) {
  if (!signal) return setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
  return setHeaderOptions('Content-Type', PatchStrategy.MergePatch, {
    middleware: [
      {
        pre: (request) => {
          request.setSignal(signal);
          return new Observable(Promise.resolve(request));
        },
        post: (response) => new Observable(Promise.resolve(response)),
      },
    ],
    middlewareMergeStrategy: 'append',
  });
}

export class StatusWriter {
  private readonly api: CubeObjectsApi;
  private readonly ownWrites: OwnWrites<CubeAssignment>;

  constructor(api: CubeObjectsApi, ownWrites: OwnWrites<CubeAssignment>) {
    this.api = api;
    this.ownWrites = ownWrites;
  }

  /** Writes status when the patch changes it; a patch that changes nothing is not sent. */
  async status(
    object: CubeAssignment,
    status: CubeAssignmentStatusPatch,
    signal?: AbortSignal,
  ): Promise<CubeAssignment> {
    if (!mergePatchChanges(object.status, status)) return object;
    const { namespace = 'default', name = '', resourceVersion } = object.metadata ?? {};
    const updated = (await this.api.patchNamespacedCustomObjectStatus(
      { group, version, namespace, plural, name, body: { metadata: { resourceVersion }, status } },
      mergePatch(signal),
    )) as CubeAssignment;
    return keepResolvedSpec(object, this.ownWrites.wrote(object, updated));
  }

  /** Sets annotations of the object, or removes those given as null. */
  annotations(
    object: CubeAssignment,
    annotations: Record<string, string | null>,
    signal: AbortSignal,
  ): Promise<CubeAssignment> {
    return this.metadata(object, { annotations }, signal);
  }

  finalizers(
    object: CubeAssignment,
    finalizers: string[],
    signal: AbortSignal,
  ): Promise<CubeAssignment> {
    return this.metadata(object, { finalizers }, signal);
  }

  private async metadata(
    object: CubeAssignment,
    metadata: { annotations?: Record<string, string | null>; finalizers?: string[] },
    signal: AbortSignal,
  ): Promise<CubeAssignment> {
    const { namespace = 'default', name = '', resourceVersion } = object.metadata ?? {};
    const updated = (await this.api.patchNamespacedCustomObject(
      {
        group,
        version,
        namespace,
        plural,
        name,
        body: { metadata: { resourceVersion, ...metadata } },
      },
      mergePatch(signal),
    )) as CubeAssignment;
    return keepResolvedSpec(object, this.ownWrites.wrote(object, updated));
  }
}

/**
 * The written object with the pass's spec: a cube on a pool keeps its resolved replicaSets
 * (pool-sets.ts) for the rest of the pass. The write carried the resourceVersion it was computed
 * from, so the spec cannot have changed in between.
 */
function keepResolvedSpec(before: CubeAssignment, written: CubeAssignment): CubeAssignment {
  return before.spec.pool === undefined ? written : { ...written, spec: before.spec };
}

/** The object's conditions with `updates` set, each at the object's generation. */
export function conditionsWith(object: CubeAssignment, updates: ConditionUpdate[]): Condition[] {
  let conditions = object.status?.conditions;
  for (const u of updates) {
    conditions = setCondition(
      conditions,
      {
        ...u,
        ...(object.metadata?.generation === undefined
          ? {}
          : { observedGeneration: object.metadata.generation }),
      },
      new Date(),
    );
  }
  return conditions ?? [];
}
