// The caches of the pool controller: ReceiverPools, and the StatefulSets, Services and
// PodDisruptionBudgets labelled with a pool (its sets), whose edits and deletions requeue it.
import {
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  PolicyV1Api,
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
  type V1PodDisruptionBudget,
  type V1Service,
  type V1StatefulSet,
} from '@kubernetes/client-node';
import type { Registry } from 'prom-client';
import { group, plural, version, type ReceiverPool } from '../../api/receiver-pool.ts';
import { SupervisedInformer } from '../runtime/informer.ts';
import type { RuntimeLogger } from '../runtime/logger.ts';
import { poolLabel } from './set-names.ts';

export interface PoolInformers {
  pools: SupervisedInformer<ReceiverPool>;
  statefulSets: SupervisedInformer<V1StatefulSet>;
  services: SupervisedInformer<V1Service>;
  budgets: SupervisedInformer<V1PodDisruptionBudget>;
}

/** Informers on the pools of `namespace` (every namespace when undefined) and their sets; not started. */
export function createPoolInformers(o: {
  kubeConfig: KubeConfig;
  namespace: string | undefined;
  registry: Registry;
  logger: RuntimeLogger;
}): PoolInformers {
  const ns = o.namespace;
  const custom = o.kubeConfig.makeApiClient(CustomObjectsApi);
  const apps = o.kubeConfig.makeApiClient(AppsV1Api);
  const core = o.kubeConfig.makeApiClient(CoreV1Api);
  const policy = o.kubeConfig.makeApiClient(PolicyV1Api);
  const labelSelector = poolLabel;
  const informer = <T extends KubernetesObject>(
    name: string,
    path: string,
    list: () => Promise<KubernetesListObject<T>>,
    selector?: string,
  ) =>
    new SupervisedInformer<T>({
      name,
      kubeConfig: o.kubeConfig,
      path,
      list,
      ...(selector ? { labelSelector: selector } : {}),
      registry: o.registry,
      logger: o.logger,
    });
  const within = (api: string, resource: string): string =>
    ns ? `${api}/namespaces/${ns}/${resource}` : `${api}/${resource}`;
  return {
    pools: informer<ReceiverPool>(
      'receiverpools',
      within(`/apis/${group}/${version}`, plural),
      () =>
        (ns
          ? custom.listNamespacedCustomObject({ group, version, namespace: ns, plural })
          : custom.listClusterCustomObject({ group, version, plural })) as Promise<
          KubernetesListObject<ReceiverPool>
        >,
    ),
    statefulSets: informer<V1StatefulSet>(
      'pool-statefulsets',
      within('/apis/apps/v1', 'statefulsets'),
      () =>
        ns
          ? apps.listNamespacedStatefulSet({ namespace: ns, labelSelector })
          : apps.listStatefulSetForAllNamespaces({ labelSelector }),
      labelSelector,
    ),
    services: informer<V1Service>(
      'pool-services',
      within('/api/v1', 'services'),
      () =>
        ns
          ? core.listNamespacedService({ namespace: ns, labelSelector })
          : core.listServiceForAllNamespaces({ labelSelector }),
      labelSelector,
    ),
    budgets: informer<V1PodDisruptionBudget>(
      'pool-poddisruptionbudgets',
      within('/apis/policy/v1', 'poddisruptionbudgets'),
      () =>
        ns
          ? policy.listNamespacedPodDisruptionBudget({ namespace: ns, labelSelector })
          : policy.listPodDisruptionBudgetForAllNamespaces({ labelSelector }),
      labelSelector,
    ),
  };
}

/** The four informers, for starting, syncing and stopping them together. */
export function eachPoolInformer(
  i: PoolInformers,
): Pick<SupervisedInformer<KubernetesObject>, 'start' | 'stop' | 'waitForSync'>[] {
  return [i.pools, i.statefulSets, i.services, i.budgets];
}
