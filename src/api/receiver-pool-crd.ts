// The ReceiverPool CustomResourceDefinition, generated from receiver-pool.ts like the
// CubeAssignment's (crd.ts): `npm run crds` writes it, a unit test checks it is current.
import { crdHelmTemplate, crdYaml, customResourceDefinition, type PrinterColumn } from './crd.ts';
import {
  group,
  kind,
  listKind,
  maxPoolNameLength,
  plural,
  poolNamePattern,
  receiverPoolSpec,
  receiverPoolStatus,
  shortNames,
  singular,
} from './receiver-pool.ts';
import { toStructuralSchema } from './structural-schema.ts';
import type { CustomResourceDefinition } from './crd.ts';

export const poolCrdName = `${plural}.${group}`;
/** Relative to the repository root. */
export const poolCrdFile = `deploy/crds/${group}_${plural}.yaml`;
export const poolHelmCrdFile = `deploy/helm/streamcube/templates/crd-receiver-pool.yaml`;

export const poolPrinterColumns: PrinterColumn[] = [
  { name: 'Sets', type: 'integer', jsonPath: '.spec.sets', description: 'Sets asked for.' },
  {
    name: 'Current',
    type: 'integer',
    jsonPath: '.status.replicas',
    description: 'Sets that exist, Draining ones included.',
  },
  {
    name: 'Ready Sets',
    type: 'integer',
    jsonPath: '.status.readySets',
    description: 'Active sets whose every receiver is Ready.',
  },
  { name: 'Replicas', type: 'integer', jsonPath: '.spec.replicas', priority: 1 },
  {
    name: 'Ready',
    type: 'string',
    jsonPath: '.status.conditions[?(@.type=="Ready")].status',
  },
  {
    name: 'Degraded',
    type: 'string',
    jsonPath: '.status.conditions[?(@.type=="Degraded")].reason',
    description: 'Why the pool is Degraded, if it is.',
    priority: 1,
  },
  {
    name: 'Desired',
    type: 'integer',
    jsonPath: '.status.autoscale.desiredSets',
    description: 'The sets the autoscaler wants (spec.autoscale).',
    priority: 1,
  },
  {
    name: 'Lag/Set',
    type: 'integer',
    jsonPath: '.status.autoscale.lagPerSet',
    description: 'Events behind per set, as the autoscaler last wrote it.',
    priority: 1,
  },
  { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
];

export function receiverPoolCrd(): CustomResourceDefinition {
  return customResourceDefinition({
    names: { kind, listKind, plural, singular, shortNames },
    subresources: {
      status: {},
      scale: {
        specReplicasPath: '.spec.sets',
        statusReplicasPath: '.status.replicas',
        labelSelectorPath: '.status.selector',
      },
    },
    printerColumns: poolPrinterColumns,
    description:
      'Replica sets of streamcube receivers that the operator runs: per set a StatefulSet, a headless Service and a PodDisruptionBudget named <pool>-<index>, owned by the pool. kubectl scale receiverpool/<pool> --replicas=N sets the number of sets; a set is removed only once no CubeAssignment uses it.',
    spec: toStructuralSchema(receiverPoolSpec),
    status: toStructuralSchema(receiverPoolStatus),
    validations: [
      {
        rule: `size(self.metadata.name) <= ${maxPoolNameLength} && self.metadata.name.matches('${poolNamePattern}')`,
        message: `metadata.name of a ReceiverPool must be at most ${maxPoolNameLength} characters, a lowercase letter first, then lowercase letters, digits or -: its sets are <name>-<index>, names of StatefulSets (whose pods carry <set>-<hash> in a 63-character label) and of Services (DNS-1035 labels)`,
        reason: 'FieldValueInvalid',
      },
      {
        rule: `!has(self.spec.setNames) || self.spec.setNames.all(n, size(self.metadata.name) + 1 + size(n) <= ${maxPoolNameLength + 3})`,
        message: `spec.setNames: <pool>-<name> must be at most ${maxPoolNameLength + 3} characters, the longest StatefulSet name whose pods' controller-revision-hash label fits 63`,
        fieldPath: '.spec.setNames',
        reason: 'FieldValueInvalid',
      },
    ],
  });
}

export function receiverPoolCrdYaml(): string {
  return crdYaml(receiverPoolCrd(), 'src/api/receiver-pool.ts');
}

export function receiverPoolCrdHelmTemplate(yaml = receiverPoolCrdYaml()): string {
  return crdHelmTemplate(yaml, poolHelmCrdFile);
}
