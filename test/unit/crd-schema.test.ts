// The generated CRDs (CubeAssignment, ReceiverPool): structural (checked here independently of the converter), current with the
// committed deploy/crds file, and its printer columns and CEL field paths point at real fields.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import {
  crdFile,
  crdName,
  cubeAssignmentCrd,
  cubeAssignmentCrdYaml,
  printerColumns,
} from '../../src/api/crd.ts';
import { toStructuralSchema, type StructuralSchema } from '../../src/api/structural-schema.ts';
import { maxPoolNameLength, maxSets } from '../../src/api/receiver-pool.ts';
import {
  poolCrdFile,
  poolCrdName,
  poolHelmCrdFile,
  poolPrinterColumns,
  receiverPoolCrd,
  receiverPoolCrdHelmTemplate,
  receiverPoolCrdYaml,
} from '../../src/api/receiver-pool-crd.ts';

const crd = cubeAssignmentCrd();
const [served] = crd.spec.versions;
if (!served) throw new Error('the CRD has no version');
const root = served.schema.openAPIV3Schema;

const forbidden = ['$ref', '$defs', '$schema', 'definitions', 'anyOf', 'oneOf', 'allOf', 'not'];

/** Paths where the schema breaks the rules of a structural schema (apiextensions v1). */
function structuralViolations(node: unknown, path = ''): string[] {
  if (typeof node !== 'object' || node === null || Array.isArray(node)) {
    return [`${path}: not a schema object`];
  }
  const s = node as Record<string, unknown>;
  const found: string[] = forbidden.filter((k) => k in s).map((k) => `${path}: has ${k}`);
  const typeless =
    s['x-kubernetes-int-or-string'] === true || s['x-kubernetes-preserve-unknown-fields'] === true;
  if (typeof s.type !== 'string' && !typeless) found.push(`${path}: no type`);
  if (s.properties !== undefined && s.additionalProperties !== undefined) {
    found.push(`${path}: both properties and additionalProperties`);
  }
  if (typeof s.additionalProperties === 'boolean') {
    found.push(`${path}: additionalProperties is a boolean`);
  }
  if (s.type === 'array' && (typeof s.items !== 'object' || Array.isArray(s.items))) {
    found.push(`${path}: an array without one items schema`);
  }
  if (s['x-kubernetes-list-type'] === 'map') {
    const items = s.items as StructuralSchema;
    for (const key of s['x-kubernetes-list-map-keys'] as string[]) {
      if (!items.required?.includes(key)) found.push(`${path}: list-map key ${key} not required`);
    }
  }
  for (const [name, child] of Object.entries((s.properties ?? {}) as Record<string, unknown>)) {
    found.push(...structuralViolations(child, `${path}.${name}`));
  }
  if (s.additionalProperties !== undefined && typeof s.additionalProperties === 'object') {
    found.push(...structuralViolations(s.additionalProperties, `${path}.*`));
  }
  if (s.items !== undefined) found.push(...structuralViolations(s.items, `${path}[]`));
  return found;
}

/** The schema node at a dotted path of property names; `[]` steps into items, `*` into maps. */
function nodeAt(path: string, from: StructuralSchema = root): StructuralSchema | undefined {
  let node: StructuralSchema | undefined = from;
  for (const step of path.replace(/^\./, '').split('.')) {
    const [name = '', ...rest] = step.split('[');
    node = name === '*' ? node?.additionalProperties : node?.properties?.[name];
    for (let i = 0; i < rest.length; i++) node = node?.items;
  }
  return node;
}

test('the generated schema is structural', () => {
  expect(structuralViolations(root)).toEqual([]);
});

test('the structural checker catches what it should', () => {
  expect(structuralViolations({ type: 'object', properties: { a: {} } })).toEqual(['.a: no type']);
  expect(
    structuralViolations({ type: 'object', properties: { a: { anyOf: [], type: 'string' } } }),
  ).toEqual(['.a: has anyOf']);
  expect(structuralViolations({ type: 'array', items: [{ type: 'string' }] })).toEqual([
    ': an array without one items schema',
    '[]: not a schema object',
  ]);
});

test(`the committed ${crdFile} is current (run \`npm run crds\` when this fails)`, () => {
  const committed = readFileSync(
    fileURLToPath(new URL(`../../${crdFile}`, import.meta.url)),
    'utf8',
  );
  expect(committed).toBe(cubeAssignmentCrdYaml());
});

/**
 * Every property without a description, at any depth: inside list items and map values too, so
 * that `kubectl explain` has something to say about each field.
 */
function undescribed(node: StructuralSchema, path = ''): string[] {
  return [
    ...Object.entries(node.properties ?? {}).flatMap(([name, child]) => [
      ...(child.description?.trim() ? [] : [`${path}.${name}`]),
      ...undescribed(child, `${path}.${name}`),
    ]),
    ...(node.items ? undescribed(node.items, `${path}[]`) : []),
    ...(node.additionalProperties ? undescribed(node.additionalProperties, `${path}.*`) : []),
  ];
}

test('every property of the CRD has a description (kubectl explain)', () => {
  // The API server refuses anything but the type at the root's metadata (it describes ObjectMeta
  // itself).
  expect(root.properties?.metadata).toEqual({ type: 'object' });
  expect(undescribed(root)).toEqual(['.metadata']);
});

test('the description check reaches into list items and map values', () => {
  const field = (description?: string): StructuralSchema => ({
    type: 'string',
    ...(description === undefined ? {} : { description }),
  });
  expect(
    undescribed({
      type: 'object',
      properties: {
        described: field('d'),
        bare: field(),
        list: {
          type: 'array',
          description: 'l',
          items: { type: 'object', properties: { inItem: field(), ok: field('o') } },
        },
        map: {
          type: 'object',
          description: 'm',
          additionalProperties: {
            type: 'array',
            items: { type: 'object', properties: { blank: field(' ') } },
          },
        },
      },
    }),
  ).toEqual(['.bare', '.list[].inItem', '.map.*[].blank']);
});

test('names, group, scope and the status subresource', () => {
  expect(crd.metadata.name).toBe(crdName);
  expect(crdName).toBe('cubeassignments.streamcube.io');
  expect(crd.spec.scope).toBe('Namespaced');
  expect(crd.spec.names).toMatchObject({ kind: 'CubeAssignment', shortNames: ['cube'] });
  expect(served).toMatchObject({ name: 'v1alpha1', served: true, storage: true });
  expect(served.subresources).toEqual({ status: {} });
});

test('conditions are a list-map keyed by type; offsets are int64 strings', () => {
  const conditions = nodeAt('status.conditions');
  expect(conditions?.['x-kubernetes-list-type']).toBe('map');
  expect(conditions?.['x-kubernetes-list-map-keys']).toEqual(['type']);
  const { description, ...transitionTime } = nodeAt('status.conditions[].lastTransitionTime') ?? {};
  expect(transitionTime).toEqual({ type: 'string', format: 'date-time' });
  expect(description).toMatch(/^When status last changed/);
  for (const path of [
    'status.totalLag',
    'status.partitions[].position',
    'status.partitions[].highWatermark',
    'status.partitions[].lag',
    'status.reassign.stopOffsets.*',
  ]) {
    expect({ path, node: nodeAt(path) }).toMatchObject({
      path,
      node: { type: 'string', pattern: '^(0|[1-9][0-9]*)$', maxLength: 19 },
    });
  }
  expect(nodeAt('status.epochs.*')?.type).toBe('integer');
});

test('defaults, enums and bounds reach the schema', () => {
  expect(nodeAt('spec.strategy')).toMatchObject({
    enum: ['range', 'roundRobin', 'sticky'],
    default: 'sticky',
  });
  expect(nodeAt('spec.suspend')).toMatchObject({ type: 'boolean', default: false });
  expect(nodeAt('spec.replicaSets')).toMatchObject({
    minItems: 1,
    'x-kubernetes-list-type': 'set',
  });
  expect(nodeAt('spec.pins.*[]')).toMatchObject({ type: 'integer', minimum: 0 });
  expect(nodeAt('spec.schema.window')?.pattern).toBe('^([0-9]{1,6}(ms|s|m|h))+$');
  expect(root.required).toEqual(['spec']);
});

/** Every CEL rule of the schema, with the path of the node carrying it. */
function rules(node: StructuralSchema, path = ''): { path: string; fieldPath?: string }[] {
  const here = (node['x-kubernetes-validations'] ?? []).map((r) => {
    expect(r.message.length).toBeGreaterThan(0);
    return { path, ...(r.fieldPath !== undefined && { fieldPath: r.fieldPath }) };
  });
  const children = [
    ...Object.entries(node.properties ?? {}).map(([k, v]) => rules(v, `${path}.${k}`)),
    node.items ? rules(node.items, `${path}[]`) : [],
    node.additionalProperties ? rules(node.additionalProperties, `${path}.*`) : [],
  ];
  return [...here, ...children.flat()];
}

test('every CEL rule has a message and its fieldPath names a field that exists', () => {
  const all = rules(root);
  expect(all.map((r) => `${r.path}${r.fieldPath ?? ''}`).sort()).toEqual([
    '.spec', // exactly one of replicaSets and pool
    '.spec.pins',
    '.spec.pins',
    '.spec.schema', // immutable (transition rule)
    '.spec.schema.allowedLateness',
    '.spec.schema.measures',
    '.spec.schema.measures[].field',
    '.spec.schema.measures[].scale',
    '.spec.schema.window',
    '.spec.source.sasl', // only with tls, unless allowPlaintext
    '.spec.source.topic', // immutable (transition rule)
  ]);
  for (const r of all) expect(nodeAt(`${r.path}${r.fieldPath ?? ''}`)).toBeDefined();
});

test('printer columns read fields the schema has', () => {
  expect(printerColumns.map((c) => c.name)).toEqual([
    'Ready',
    'Phase',
    'Replica Sets',
    'Lag',
    'Strategy',
    'Proposal',
    'Age',
  ]);
  expect(printerColumns[0]?.jsonPath).toBe('.status.conditions[?(@.type=="Ready")].status');
  for (const column of printerColumns) {
    if (column.jsonPath.startsWith('.metadata.')) continue;
    const path = column.jsonPath.replace(/\[\?\(.*\)\]/, '[]');
    expect({ column: column.name, found: nodeAt(path) !== undefined }).toEqual({
      column: column.name,
      found: true,
    });
  }
});

describe('the converter refuses what a structural schema cannot say', () => {
  test.each<[string, z.ZodType, RegExp]>([
    ['a union', z.object({ a: z.union([z.string(), z.number()]) }), /\.a: 'anyOf'/],
    ['an unvalidated format', z.object({ mail: z.email() }), /\.mail: format 'email'/],
    ['a lookahead pattern', z.object({ p: z.string().regex(/^(?!x)/) }), /\.p: pattern uses/],
    ['a tuple', z.object({ t: z.tuple([z.string(), z.int()]) }), /\.t\[\]: 'anyOf'/],
  ])('%s', (_, schema, error) => {
    expect(() => toStructuralSchema(schema)).toThrow(error);
  });

  test('a record becomes additionalProperties; zod safe-integer bounds are dropped', () => {
    expect(toStructuralSchema(z.record(z.string(), z.int().min(0)))).toEqual({
      type: 'object',
      additionalProperties: { type: 'integer', minimum: 0 },
    });
  });
});

describe('the ReceiverPool CRD', () => {
  const poolCrd = receiverPoolCrd();
  const [poolVersion] = poolCrd.spec.versions;
  if (!poolVersion) throw new Error('the pool CRD has no version');
  const poolRoot = poolVersion.schema.openAPIV3Schema;
  const at = (path: string): StructuralSchema | undefined => nodeAt(path, poolRoot);

  test('is structural, and every property has a description (kubectl explain)', () => {
    expect(structuralViolations(poolRoot)).toEqual([]);
    expect(undescribed(poolRoot)).toEqual(['.metadata']);
  });

  test(`the committed ${poolCrdFile} and ${poolHelmCrdFile} are current (run \`npm run crds\` when this fails)`, () => {
    const read = (file: string): string =>
      readFileSync(fileURLToPath(new URL(`../../${file}`, import.meta.url)), 'utf8');
    expect(read(poolCrdFile)).toBe(receiverPoolCrdYaml());
    expect(read(poolHelmCrdFile)).toBe(receiverPoolCrdHelmTemplate());
  });

  test('names, scope, and a scale subresource over spec.sets', () => {
    expect(poolCrd.metadata.name).toBe(poolCrdName);
    expect(poolCrdName).toBe('receiverpools.streamcube.io');
    expect(poolCrd.spec.scope).toBe('Namespaced');
    expect(poolCrd.spec.names).toMatchObject({ kind: 'ReceiverPool', shortNames: ['rpool'] });
    expect(poolVersion.subresources).toEqual({
      status: {},
      scale: {
        specReplicasPath: '.spec.sets',
        statusReplicasPath: '.status.replicas',
        labelSelectorPath: '.status.selector',
      },
    });
    expect(at('spec.sets')).toMatchObject({ type: 'integer', minimum: 0, maximum: 100 });
    expect(at('status.replicas')?.type).toBe('integer');
    expect(at('status.selector')?.type).toBe('string');
    expect(at('spec.scheduling.affinity')).toMatchObject({
      type: 'object',
      'x-kubernetes-preserve-unknown-fields': true,
    });
    expect(at('spec.scheduling.affinity')?.properties).toBeUndefined();
  });

  test('every CEL rule has a message, its fieldPath exists; the name rule is on the root', () => {
    const all = rules(poolRoot);
    expect(all.map((r) => `${r.path}${r.fieldPath ?? ''}`).sort()).toEqual([
      '', // metadata.name fits <pool>-<index>
      '.spec.autoscale.minSets', // at most maxSets
      '.spec.autoscale.scaleInAfter', // above 0s
      '.spec.autoscale.scaleOutAfter',
      '.spec.deepStorage',
      '.spec.podDisruptionBudget',
      '.spec.podDisruptionBudget.minAvailable',
      '.spec.receiver.leaderLease',
      '.spec.setNames', // on the root too: <pool>-<name> fits as <pool>-<index> does
    ]);
    for (const r of all.filter((r) => r.path !== ''))
      expect(at(`${r.path}${r.fieldPath ?? ''}`)).toBeDefined();
  });

  test('printer columns read fields the schema has', () => {
    for (const column of poolPrinterColumns) {
      if (column.jsonPath.startsWith('.metadata.')) continue;
      const path = column.jsonPath.replace(/\[\?\(.*\)\]/, '[]');
      expect({ column: column.name, found: at(path) !== undefined }).toEqual({
        column: column.name,
        found: true,
      });
    }
  });

  test('a longest pool name leaves its sets valid StatefulSet and Service names', () => {
    const name = 'p'.repeat(maxPoolNameLength);
    const set = `${name}-${maxSets - 1}`;
    // controller-revision-hash: <set>-<10 characters>, a label value of at most 63.
    expect(`${set}-0123456789`.length).toBeLessThanOrEqual(63);
  });
});
