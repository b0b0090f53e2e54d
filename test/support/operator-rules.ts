// The operator's API rights as the chart grants them (templates/rbac.yaml): the helm-chart suite
// checks that the chart renders exactly these, and the receiver-pool suite runs an operator with
// no others, so a right the operator needs and the chart lacks fails a test.
/** A V1PolicyRule with its lists present, as the chart writes them. */
export interface PolicyRule {
  apiGroups: string[];
  resources: string[];
  resourceNames?: string[];
  verbs: string[];
}

const write = ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete'];

/**
 * Role `<release>-operator-pools`: ReceiverPools and their sets, in the release namespace, and the
 * ConfigMap `poolConfigMap` (`<release>-receiver-pool`) the chart renders its pool into.
 */
export const operatorPoolRules = (poolConfigMap: string): PolicyRule[] => [
  // The chart's pool is applied by the operator (server-side: create and patch).
  {
    apiGroups: ['streamcube.io'],
    resources: ['receiverpools'],
    verbs: ['get', 'list', 'watch', 'create', 'patch'],
  },
  { apiGroups: [''], resources: ['configmaps'], resourceNames: [poolConfigMap], verbs: ['get'] },
  {
    apiGroups: ['streamcube.io'],
    resources: ['receiverpools/status'],
    verbs: ['get', 'update', 'patch'],
  },
  // The autoscaler writes spec.sets through the scale subresource.
  {
    apiGroups: ['streamcube.io'],
    resources: ['receiverpools/scale'],
    verbs: ['get', 'update', 'patch'],
  },
  { apiGroups: ['apps'], resources: ['statefulsets'], verbs: write },
  { apiGroups: [''], resources: ['services'], verbs: write },
  { apiGroups: ['policy'], resources: ['poddisruptionbudgets'], verbs: write },
  { apiGroups: [''], resources: ['persistentvolumeclaims'], verbs: ['list', 'delete'] },
  { apiGroups: [''], resources: ['events'], verbs: ['create', 'patch'] },
];

/** Role `<release>-operator` (watchReleaseNamespace), `-operator-receivers` and `-operator-leases`. */
export const operatorCubeRules: PolicyRule[] = [
  {
    apiGroups: ['streamcube.io'],
    resources: ['cubeassignments'],
    verbs: ['get', 'list', 'watch', 'update', 'patch'],
  },
  {
    apiGroups: ['streamcube.io'],
    resources: ['cubeassignments/status', 'cubeassignments/finalizers'],
    verbs: ['get', 'update', 'patch'],
  },
  { apiGroups: [''], resources: ['events'], verbs: ['create', 'patch'] },
  { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch'] },
  { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['create'] },
  {
    apiGroups: ['coordination.k8s.io'],
    resources: ['leases'],
    resourceNames: ['streamcube-operator'],
    verbs: ['get', 'update'],
  },
];
