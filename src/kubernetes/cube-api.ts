// A small typed client for CubeAssignment objects, over client-node's CustomObjectsApi: what the
// local stack, the tests and the kubectl plugin read and write of a cube.
import {
  CustomObjectsApi,
  PatchStrategy,
  setHeaderOptions,
  type KubeConfig,
} from '@kubernetes/client-node';
import {
  group,
  plural,
  version,
  type CubeAssignment,
  type CubeAssignmentSpecInput,
} from '../api/cube-assignment.ts';

export const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

export function cubeApi(kc: KubeConfig) {
  const custom = kc.makeApiClient(CustomObjectsApi);
  return {
    create: (namespace: string, name: string, spec: CubeAssignmentSpecInput) =>
      custom.createNamespacedCustomObject({
        group,
        version,
        namespace,
        plural,
        body: {
          apiVersion: `${group}/${version}`,
          kind: 'CubeAssignment',
          metadata: { name },
          spec,
        },
      }) as Promise<CubeAssignment>,
    get: (namespace: string, name: string) =>
      custom.getNamespacedCustomObject({
        group,
        version,
        namespace,
        plural,
        name,
      }) as Promise<CubeAssignment>,
    patchSpec: (
      namespace: string,
      name: string,
      spec: Partial<CubeAssignmentSpecInput> | Record<string, unknown>,
    ) =>
      custom.patchNamespacedCustomObject(
        { group, version, namespace, plural, name, body: { spec } },
        mergePatch,
      ) as Promise<CubeAssignment>,
    /**
     * Sets (or, with null, removes) annotations. With `resourceVersion`, the patch applies only
     * to that version of the object: the API server answers 409 when it changed since.
     */
    annotate: (
      namespace: string,
      name: string,
      annotations: Record<string, string | null>,
      resourceVersion?: string,
    ) =>
      custom.patchNamespacedCustomObject(
        {
          group,
          version,
          namespace,
          plural,
          name,
          body: {
            metadata: {
              annotations,
              ...(resourceVersion === undefined ? {} : { resourceVersion }),
            },
          },
        },
        mergePatch,
      ) as Promise<CubeAssignment>,
    delete: (namespace: string, name: string) =>
      custom.deleteNamespacedCustomObject({ group, version, namespace, plural, name }),
  };
}

export type CubeApi = ReturnType<typeof cubeApi>;
