// A kubeconfig for receiver processes with no more API rights than the chart's receiver Role
// gives: a ServiceAccount of the suite's namespace, bound to a Role of the given rules, and a
// token of it. The receivers read Secrets, CubeAssignments and the leader Lease through it; the
// operator of the receiver-pool suite runs with the chart's operator rules the same way.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  CoreV1Api,
  KubeConfig,
  RbacAuthorizationV1Api,
  type V1PolicyRule,
} from '@kubernetes/client-node';
import { tempDir } from './scratch-dirs.ts';

/** The rules of the chart's receiver Role: `get` on these objects by name. */
export function receiverRules(o: {
  secrets?: string[];
  cubeAssignments?: string[];
  lease?: string;
}): V1PolicyRule[] {
  return [
    ...(o.secrets?.length
      ? [{ apiGroups: [''], resources: ['secrets'], resourceNames: o.secrets, verbs: ['get'] }]
      : []),
    ...(o.cubeAssignments?.length
      ? [
          {
            apiGroups: ['streamcube.io'],
            resources: ['cubeassignments'],
            resourceNames: o.cubeAssignments,
            verbs: ['get'],
          },
        ]
      : []),
    ...(o.lease
      ? [
          {
            apiGroups: ['coordination.k8s.io'],
            resources: ['leases'],
            resourceNames: [o.lease],
            verbs: ['get'],
          },
        ]
      : []),
  ];
}

/** Writes the kubeconfig of ServiceAccount `receiver` of `namespace`, allowed `rules` there. */
export function receiverKubeconfig(
  kc: KubeConfig,
  namespace: string,
  rules: V1PolicyRule[],
): Promise<string> {
  return serviceAccountKubeconfig(kc, namespace, 'receiver', rules);
}

/**
 * Writes the kubeconfig of a new ServiceAccount `name` of `namespace`, bound to a Role `name` of
 * `rules` there: a process run with it has those rights and no others.
 */
export async function serviceAccountKubeconfig(
  kc: KubeConfig,
  namespace: string,
  name: string,
  rules: V1PolicyRule[],
): Promise<string> {
  const core = kc.makeApiClient(CoreV1Api);
  const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
  await core.createNamespacedServiceAccount({ namespace, body: { metadata: { name } } });
  await rbac.createNamespacedRole({ namespace, body: { metadata: { name }, rules } });
  await rbac.createNamespacedRoleBinding({
    namespace,
    body: {
      metadata: { name },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name },
      subjects: [{ kind: 'ServiceAccount', name, namespace }],
    },
  });
  const request = await core.createNamespacedServiceAccountToken({
    name,
    namespace,
    body: { spec: { audiences: [], expirationSeconds: 3600 } },
  });
  const cluster = kc.getCurrentCluster()!;
  const asAccount = new KubeConfig();
  asAccount.loadFromOptions({
    clusters: [cluster],
    users: [{ name, token: request.status?.token }],
    contexts: [{ name, cluster: cluster.name, user: name }],
    currentContext: name,
  });
  const file = join(tempDir(`${namespace}-${name}-kubeconfig`), 'kubeconfig');
  writeFileSync(file, asAccount.exportConfig());
  return file;
}
