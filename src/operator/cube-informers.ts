// The two caches every reader of cubes keeps (the operator, the query server): CubeAssignments,
// and the receiver pods (labelled with their replica set) that serve them.
import {
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  type KubernetesListObject,
  type V1Pod,
} from '@kubernetes/client-node';
import type { Registry } from 'prom-client';
import { group, plural, version, type CubeAssignment } from '../api/cube-assignment.ts';
import { receiverLabelSelector } from './discovery.ts';
import { SupervisedInformer } from './runtime/informer.ts';
import type { RuntimeLogger } from './runtime/logger.ts';

export interface CubeInformers {
  cubes: SupervisedInformer<CubeAssignment>;
  pods: SupervisedInformer<V1Pod>;
}

/**
 * Informers on the CubeAssignments of `namespace` (every namespace when undefined) and on the
 * receiver pods of `receiverNamespace` (else of `namespace`); not started.
 */
export function createCubeInformers(o: {
  kubeConfig: KubeConfig;
  namespace: string | undefined;
  receiverNamespace: string | undefined;
  /** More label requirements receiver pods must meet (`key=value,…`), besides the set's label. */
  receiverSelector?: string | undefined;
  registry: Registry;
  logger: RuntimeLogger;
}): CubeInformers {
  const custom = o.kubeConfig.makeApiClient(CustomObjectsApi);
  const core = o.kubeConfig.makeApiClient(CoreV1Api);
  const ns = o.namespace;
  const cubes = new SupervisedInformer<CubeAssignment>({
    name: 'cubeassignments',
    kubeConfig: o.kubeConfig,
    path: ns
      ? `/apis/${group}/${version}/namespaces/${ns}/${plural}`
      : `/apis/${group}/${version}/${plural}`,
    list: () =>
      (ns
        ? custom.listNamespacedCustomObject({ group, version, namespace: ns, plural })
        : custom.listClusterCustomObject({ group, version, plural })) as Promise<
        KubernetesListObject<CubeAssignment>
      >,
    registry: o.registry,
    logger: o.logger,
  });
  // Receivers are in the configured namespace when there is one, else beside their cubes.
  const podNs = o.receiverNamespace ?? ns;
  const labelSelector = receiverLabelSelector(o.receiverSelector);
  const pods = new SupervisedInformer<V1Pod>({
    name: 'receiver-pods',
    kubeConfig: o.kubeConfig,
    path: podNs ? `/api/v1/namespaces/${podNs}/pods` : '/api/v1/pods',
    list: () =>
      podNs
        ? core.listNamespacedPod({ namespace: podNs, labelSelector })
        : core.listPodForAllNamespaces({ labelSelector }),
    labelSelector,
    registry: o.registry,
    logger: o.logger,
  });
  return { cubes, pods };
}
