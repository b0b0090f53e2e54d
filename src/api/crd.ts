// The CubeAssignment CustomResourceDefinition, generated from the zod definitions in
// cube-assignment.ts; `npm run crds` writes it to deploy/crds, a unit test checks it is current.
import { DEFAULT_SCALAR_STYLE_RULES, SCALAR_STYLE, dump, type ScalarLayout } from 'js-yaml';
import {
  cubeAssignmentSpec,
  cubeAssignmentStatus,
  group,
  kind,
  listKind,
  plural,
  shortNames,
  singular,
  version,
} from './cube-assignment.ts';
import {
  toStructuralSchema,
  type StructuralSchema,
  type ValidationRule,
} from './structural-schema.ts';

export const crdName = `${plural}.${group}`;
/** Relative to the repository root. */
export const crdFile = `deploy/crds/${group}_${plural}.yaml`;
/** The chart's template of the CRD: a template, not crds/, so that `helm upgrade` updates it. */
export const helmCrdFile = `deploy/helm/streamcube/templates/crd.yaml`;

export interface PrinterColumn {
  name: string;
  type: 'string' | 'integer' | 'number' | 'boolean' | 'date';
  jsonPath: string;
  description?: string;
  priority?: number;
}

/** apiextensions.k8s.io/v1 CustomResourceDefinition, keys as on the wire. */
export interface CustomResourceDefinition {
  apiVersion: 'apiextensions.k8s.io/v1';
  kind: 'CustomResourceDefinition';
  metadata: { name: string; labels?: Record<string, string> };
  spec: {
    group: string;
    scope: 'Namespaced' | 'Cluster';
    names: {
      kind: string;
      listKind: string;
      plural: string;
      singular: string;
      shortNames?: string[];
      categories?: string[];
    };
    versions: {
      name: string;
      served: boolean;
      storage: boolean;
      subresources?: {
        status?: Record<string, never>;
        scale?: {
          specReplicasPath: string;
          statusReplicasPath: string;
          labelSelectorPath?: string;
        };
      };
      additionalPrinterColumns?: PrinterColumn[];
      schema: { openAPIV3Schema: StructuralSchema };
    }[];
  };
}

export const printerColumns: PrinterColumn[] = [
  {
    name: 'Ready',
    type: 'string',
    jsonPath: '.status.conditions[?(@.type=="Ready")].status',
  },
  {
    name: 'Phase',
    type: 'string',
    jsonPath: '.status.reassign.phase',
    description: 'Phase of the move in flight, if any.',
  },
  { name: 'Replica Sets', type: 'string', jsonPath: '.spec.replicaSets' },
  {
    name: 'Lag',
    type: 'string',
    jsonPath: '.status.totalLag',
    description: 'Events not yet consumed, summed over partitions.',
  },
  { name: 'Strategy', type: 'string', jsonPath: '.spec.strategy', priority: 1 },
  {
    name: 'Proposal',
    type: 'string',
    jsonPath: '.status.proposal.id',
    description: 'The id of the move waiting for approval (spec.approval: manual), if any.',
    priority: 1,
  },
  { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
];

// The texts Kubernetes gives these fields in its own types (controller-gen copies them too), so
// that the CRD file read on its own explains them as the API server's OpenAPI does. The root
// metadata takes none: the API server refuses anything there but its type, and publishes
// ObjectMeta's own description.
const typeMetaDescriptions = {
  apiVersion:
    'APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources',
  kind: 'Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds',
};

export function cubeAssignmentCrd(): CustomResourceDefinition {
  return customResourceDefinition({
    names: { kind, listKind, plural, singular, shortNames },
    subresources: { status: {} },
    printerColumns,
    description:
      "A cube (one Kafka topic aggregated with one schema into time windows) and the replica sets of receivers that consume it: the operator places the topic's partitions on them, and moves partitions without losing or double-counting events when the spec changes or a replica set is lost.",
    spec: toStructuralSchema(cubeAssignmentSpec),
    status: toStructuralSchema(cubeAssignmentStatus),
  });
}

/** A namespaced CRD of this project's group, one served and stored version. */
export function customResourceDefinition(o: {
  names: { kind: string; listKind: string; plural: string; singular: string; shortNames: string[] };
  subresources: NonNullable<CustomResourceDefinition['spec']['versions'][number]['subresources']>;
  printerColumns: PrinterColumn[];
  description: string;
  spec: StructuralSchema;
  status: StructuralSchema;
  /** CEL rules on the whole object: the only place that may read metadata.name. */
  validations?: ValidationRule[];
}): CustomResourceDefinition {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: {
      name: `${o.names.plural}.${group}`,
      labels: { 'app.kubernetes.io/part-of': 'streamcube' },
    },
    spec: {
      group,
      scope: 'Namespaced',
      names: { ...o.names, categories: ['streamcube'] },
      versions: [
        {
          name: version,
          served: true,
          storage: true,
          subresources: o.subresources,
          additionalPrinterColumns: o.printerColumns,
          schema: {
            openAPIV3Schema: {
              type: 'object',
              description: o.description,
              properties: {
                apiVersion: { type: 'string', description: typeMetaDescriptions.apiVersion },
                kind: { type: 'string', description: typeMetaDescriptions.kind },
                metadata: { type: 'object' },
                spec: o.spec,
                status: o.status,
              },
              required: ['spec'],
              ...(o.validations ? { 'x-kubernetes-validations': o.validations } : {}),
            },
          },
        },
      ],
    },
  };
}

/** The CRD as committed under deploy/crds, already in the form prettier keeps. */
export function cubeAssignmentCrdYaml(): string {
  return crdYaml(cubeAssignmentCrd(), 'src/api/cube-assignment.ts');
}

/** A CRD as YAML in the form prettier keeps, with a header naming its source. */
export function crdYaml(crd: CustomResourceDefinition, source: string): string {
  return (
    `# Generated by \`npm run crds\` from ${source}. Do not edit.\n` +
    dump(crd, {
      noRefs: true,
      lineWidth: -1,
      quoteStyle: 'single',
      scalarStyleRules: [...Object.values(DEFAULT_SCALAR_STYLE_RULES), doubleQuoteOverEscapes],
    })
  );
}

/**
 * The CRD as the Helm chart's template: rendered when crds.enabled, kept on uninstall (and on a
 * release that stops rendering it) when crds.keep, so deleting a release never deletes every cube.
 */
export function cubeAssignmentCrdHelmTemplate(yaml = cubeAssignmentCrdYaml()): string {
  return crdHelmTemplate(yaml, helmCrdFile);
}

/** A CRD's YAML as a template of the chart, rendered with crds.enabled, kept with crds.keep. */
export function crdHelmTemplate(yaml: string, file: string): string {
  const metadata = /^metadata:\n {2}name: .+\n/m;
  if (!metadata.test(yaml) || yaml.includes('{{'))
    throw new Error(`the CRD's YAML cannot be wrapped as a Helm template (${file})`);
  const keep =
    '  {{- if .Values.crds.keep }}\n' +
    '  annotations:\n' +
    '    helm.sh/resource-policy: keep\n' +
    '  {{- end }}\n';
  return `{{- if .Values.crds.enabled }}\n${yaml.replace(metadata, (m) => m + keep)}{{- end }}\n`;
}

// Prettier's rule: a string holding single quotes (CEL rules do) is written in double quotes.
function doubleQuoteOverEscapes(layout: ScalarLayout): void {
  const double = (layout.allowedStylesMask & (1 << SCALAR_STYLE.DOUBLE_QUOTED)) !== 0;
  if (layout.style === SCALAR_STYLE.SINGLE_QUOTED && layout.node.value.includes("'") && double) {
    layout.style = SCALAR_STYLE.DOUBLE_QUOTED;
  }
}
