// The committed CubeAssignment CRD on a real API server: it is applied as a user would apply it,
// becomes Established, accepts a valid object with defaults, refuses bad ones with a 422 naming
// the field (and zod refuses the same ones), takes status merge patches, serves its columns, and
// `kubectl explain` prints its descriptions.
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { request } from 'node:https';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  ApiException,
  ApiextensionsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  setHeaderOptions,
} from '@kubernetes/client-node';
import { crdFile, crdName, cubeAssignmentCrd, printerColumns } from '../../src/api/crd.ts';
import type { StructuralSchema } from '../../src/api/structural-schema.ts';
import {
  cubeAssignment,
  cubeAssignmentSpec,
  cubeAssignmentStatus,
  group,
  plural,
  version,
  type CubeAssignmentSpecInput,
  type CubeAssignmentStatus,
} from '../../src/api/cube-assignment.ts';
import { adminKubeConfig, testEnvironment } from '../env/connection.ts';
import { binDir } from '../../src/local/controlplane.ts';
import { runCommand } from '../../src/local/processes.ts';
import { drainingStatus, securedSpec } from '../support/cube-assignments.ts';
import { tempDir } from '../support/scratch-dirs.ts';

const kc = adminKubeConfig();
const custom = kc.makeApiClient(CustomObjectsApi);
const extensions = kc.makeApiClient(ApiextensionsV1Api);
const namespace = `crd-${randomUUID().slice(0, 8)}`;
const repoRoot = fileURLToPath(new URL('../../', import.meta.url));

function kubectl(...args: string[]): Promise<string> {
  return runCommand(join(binDir(), 'kubectl'), args, {
    env: { ...process.env, KUBECONFIG: testEnvironment().kube.kubeconfig },
  });
}

async function eventually<T>(what: string, probe: () => Promise<T | undefined>): Promise<T> {
  let last: unknown;
  for (let i = 0; i < 200; i++) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (e) {
      last = e;
    }
    await sleep(100);
  }
  throw new Error(`timed out waiting for ${what}`, { cause: last });
}

/** A GET with our own Accept header, which the generated client does not let us choose. */
function getJson(path: string, accept: string): Promise<unknown> {
  const env = testEnvironment().kube;
  return new Promise((resolve, reject) => {
    const req = request(
      new URL(path, env.server),
      {
        ca: readFileSync(env.caFile),
        headers: { Authorization: `Bearer ${env.adminToken}`, Accept: accept },
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () => {
          if (res.statusCode === 200) resolve(JSON.parse(body));
          else reject(new Error(`GET ${path}: ${res.statusCode} ${body}`));
        });
      },
    );
    req.on('error', reject);
    req.end();
  });
}

const validSpec: CubeAssignmentSpecInput = securedSpec(
  ['kafka-0.kafka:9092', 'kafka-1.kafka:9092'],
  { window: '1h30m' },
);

function manifest(name: string, spec: unknown): object {
  return { apiVersion: `${group}/${version}`, kind: 'CubeAssignment', metadata: { name }, spec };
}

function create(name: string, spec: unknown): Promise<unknown> {
  return custom.createNamespacedCustomObject({
    group,
    version,
    namespace,
    plural,
    body: manifest(name, spec),
  });
}

beforeAll(async () => {
  // Server-side apply is idempotent, so concurrent suites applying the same CRD do not collide.
  await kubectl(
    'apply',
    '--server-side',
    '--force-conflicts',
    '--field-manager=streamcube-crd-test',
    '-f',
    join(repoRoot, crdFile),
  );
  await eventually('the CRD to be Established', async () => {
    const crd = await extensions.readCustomResourceDefinition({ name: crdName });
    const established = crd.status?.conditions?.find((c) => c.type === 'Established');
    return established?.status === 'True' ? crd : undefined;
  });
  await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: namespace } } });
  await eventually('the resource to be served', () =>
    custom.listNamespacedCustomObject({ group, version, namespace, plural }),
  );
});

test('the CRD is Established with its names accepted', async () => {
  const crd = await extensions.readCustomResourceDefinition({ name: crdName });
  const conditions = Object.fromEntries(
    (crd.status?.conditions ?? []).map((c) => [c.type, c.status]),
  );
  expect(conditions).toMatchObject({ Established: 'True', NamesAccepted: 'True' });
  expect(crd.status?.acceptedNames?.shortNames).toEqual(['cube']);
});

test('a valid CubeAssignment is accepted and defaulted by the API server', async () => {
  const created = await create('orders', validSpec);
  const parsed = cubeAssignment.parse(created);
  expect(parsed.spec.strategy).toBe('sticky');
  expect(parsed.spec.suspend).toBe(false);
  expect(parsed.spec.source.startingOffsets).toBe('earliest');
  expect(parsed.spec.schema.allowedLateness).toBe('0s');
  expect(parsed.spec.pins).toEqual({ 'rs-a': [0, 1] });
  expect(parsed.metadata.generation).toBe(1);
});

type Change = (spec: CubeAssignmentSpecInput) => unknown;
const withSchema = (s: CubeAssignmentSpecInput, change: object): unknown => ({
  ...s,
  schema: { ...s.schema, ...change },
});

const invalid: [string, string, Change, RegExp][] = [
  ['no replica sets', 'spec.replicaSets', (s) => ({ ...s, replicaSets: [] }), /at least 1 items/],
  [
    'a replica set twice',
    'spec.replicaSets[1]',
    (s) => ({ ...s, replicaSets: ['rs-a', 'rs-a'] }),
    /Duplicate value/,
  ],
  [
    'a replica set name that is no DNS label',
    'spec.replicaSets[0]',
    (s) => ({ ...s, replicaSets: ['RS_A'], pins: undefined }),
    /should match/,
  ],
  ['an unknown strategy', 'spec.strategy', (s) => ({ ...s, strategy: 'random' }), /Unsupported/],
  ['no source', 'spec.source', ({ source: _, ...s }) => s, /Required/],
  [
    'a broker without port',
    'spec.source.brokers[0]',
    (s) => ({ ...s, source: { ...s.source, brokers: ['kafka'] } }),
    /should match/,
  ],
  [
    'an unknown SASL mechanism',
    'spec.source.sasl.mechanism',
    (s) => ({ ...s, source: { ...s.source, sasl: { mechanism: 'gssapi', secretRef: 'u' } } }),
    /Unsupported/,
  ],
  [
    'SASL without TLS (CEL): the credentials would cross the network unencrypted',
    'spec.source.sasl',
    (s) => ({ ...s, source: { ...s.source, tls: undefined } }),
    /without spec.source.tls sends the credentials unencrypted/,
  ],
  [
    'a zero window (CEL)',
    'spec.schema.window',
    (s) => withSchema(s, { window: '0s' }),
    /window must be a positive duration/,
  ],
  [
    'a window in days, which CEL duration() cannot read',
    'spec.schema.window',
    (s) => withSchema(s, { window: '2d' }),
    /should match/,
  ],
  [
    'a window beyond int64 nanoseconds',
    'spec.schema.window',
    (s) => withSchema(s, { window: '9999999h' }),
    /should match/,
  ],
  [
    'allowedLateness not below window (CEL)',
    'spec.schema.allowedLateness',
    (s) => withSchema(s, { allowedLateness: '90m' }),
    /allowedLateness must be below window/,
  ],
  [
    'a sum without field (CEL)',
    'spec.schema.measures[1].field',
    (s) =>
      withSchema(s, {
        measures: [
          { name: 'events', function: 'count' },
          { name: 'x', function: 'sum' },
        ],
      }),
    /field is required when function is sum, min or max/,
  ],
  [
    'a name used by a dimension and a measure (CEL)',
    'spec.schema.measures',
    (s) => withSchema(s, { dimensions: ['events'] }),
    /names must be unique across dimensions and measures/,
  ],
  [
    'overlapping pins (CEL)',
    'spec.pins',
    (s) => ({ ...s, pins: { 'rs-a': [0, 1], 'rs-b': [1, 2] } }),
    /pins must be disjoint/,
  ],
  [
    'a pinned replica set not listed (CEL)',
    'spec.pins',
    (s) => ({ ...s, pins: { 'rs-c': [0] } }),
    /every replica set in pins must be listed in replicaSets/,
  ],
  [
    'a negative pinned partition',
    'spec.pins.rs-a[0]',
    (s) => ({ ...s, pins: { 'rs-a': [-1] } }),
    /greater than or equal to 0/,
  ],
  [
    'too many pinned partitions',
    'spec.pins.rs-a',
    (s) => ({ ...s, pins: { 'rs-a': Array.from({ length: 129 }, (_, i) => i) } }),
    /at most 128 items/,
  ],
];

test.each(invalid)('%s is refused with 422 at %s', async (_, field, change, message) => {
  const spec = change(validSpec);
  // The same rule holds in zod, so the operator never holds a spec the API server would refuse.
  expect(cubeAssignmentSpec.safeParse(spec).success).toBe(false);

  const error: unknown = await create(`bad-${randomUUID().slice(0, 8)}`, spec).catch(
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ApiException);
  expect((error as ApiException<string>).code).toBe(422);
  const status = JSON.parse(String((error as ApiException<string>).body)) as {
    message: string;
    details?: { causes?: { field?: string; message?: string }[] };
  };
  expect(status.details?.causes?.map((c) => c.field)).toContain(field);
  expect(status.details?.causes?.find((c) => c.field === field)?.message).toMatch(message);
  expect(status.message).toContain(`${field}:`);
});

test('SASL without TLS is accepted when the cube says allowPlaintext, as zod accepts it', async () => {
  const spec = {
    ...validSpec,
    source: { ...validSpec.source, tls: undefined, allowPlaintext: true },
  };
  expect(cubeAssignmentSpec.safeParse(spec).success).toBe(true);
  const created = await create(`plain-${randomUUID().slice(0, 8)}`, spec);
  expect(cubeAssignment.parse(created).spec.source.allowPlaintext).toBe(true);
});

describe('fields whose change would alter the meaning of stored data are immutable', () => {
  const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
  const patchSpec = (name: string, spec: object): Promise<unknown> =>
    custom.patchNamespacedCustomObject(
      { group, version, namespace, plural, name, body: { spec } },
      merge,
    );

  const refused: [string, string, object, RegExp][] = [
    [
      'the topic',
      'spec.source.topic',
      { source: { topic: 'payments' } },
      /create a new CubeAssignment/,
    ],
    ['the window', 'spec.schema', { schema: { window: '30m' } }, /spec.schema is immutable/],
    ['a dimension', 'spec.schema', { schema: { dimensions: ['country'] } }, /immutable/],
    ['the lateness', 'spec.schema', { schema: { allowedLateness: '1m' } }, /immutable/],
  ];

  test.each(refused)(
    'an edit of %s is refused with 422 at %s',
    async (what, field, spec, message) => {
      const name = `immutable-${randomUUID().slice(0, 8)}`;
      await create(name, validSpec);
      const error: unknown = await patchSpec(name, spec).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ApiException);
      expect((error as ApiException<string>).code).toBe(422);
      const body = JSON.parse(String((error as ApiException<string>).body)) as {
        details?: { causes?: { field?: string; message?: string }[] };
      };
      const cause = body.details?.causes?.find((c) => c.field === field);
      expect(cause?.message).toMatch(message);
      expect(what).toBeTruthy();
    },
  );

  test('brokers, startingOffsets and the placement may change', async () => {
    const name = `mutable-${randomUUID().slice(0, 8)}`;
    await create(name, validSpec);
    const patched = cubeAssignment.parse(
      await patchSpec(name, {
        source: { brokers: ['kafka-2.kafka:9092'], startingOffsets: 'latest' },
        replicaSets: ['rs-a', 'rs-b', 'rs-c'],
      }),
    );
    expect(patched.spec.source).toMatchObject({
      brokers: ['kafka-2.kafka:9092'],
      topic: 'orders',
      startingOffsets: 'latest',
    });
    expect(patched.metadata.generation).toBe(2);
  });
});

const status: CubeAssignmentStatus = drainingStatus(1);

describe('status and printer columns', () => {
  const name = 'with-status';
  const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

  beforeAll(async () => {
    await create(name, validSpec);
  });

  test('the status subresource takes a merge patch, and validates it', async () => {
    const patched: unknown = await custom.patchNamespacedCustomObjectStatus(
      { group, version, namespace, plural, name, body: { status } },
      merge,
    );
    expect(cubeAssignmentStatus.parse((patched as { status: unknown }).status)).toEqual(status);

    // A second merge patch changes one field and leaves the rest.
    const again: unknown = await custom.patchNamespacedCustomObjectStatus(
      { group, version, namespace, plural, name, body: { status: { totalLag: '0' } } },
      merge,
    );
    expect(cubeAssignment.parse(again).status).toEqual({ ...status, totalLag: '0' });

    // Offsets are strings; a number is refused rather than silently rounded one day.
    const error: unknown = await custom
      .patchNamespacedCustomObjectStatus(
        { group, version, namespace, plural, name, body: { status: { totalLag: 3 } } },
        merge,
      )
      .catch((e: unknown) => e);
    expect((error as ApiException<string>).code).toBe(422);
    expect(String((error as ApiException<string>).body)).toContain('status.totalLag');
    await custom.patchNamespacedCustomObjectStatus(
      { group, version, namespace, plural, name, body: { status: { totalLag: '3' } } },
      merge,
    );
  });

  test("the API server's field manager tracks the status as one field, not each of its fields", async () => {
    const object = (await custom.getNamespacedCustomObject({
      group,
      version,
      namespace,
      plural,
      name,
    })) as { metadata: { managedFields: { subresource?: string; fieldsV1: unknown }[] } };
    // Every partition, epoch and condition tracked was over half the object, and their upkeep
    // most of the API server's work at each status write (bench:scale).
    const ofStatus = object.metadata.managedFields.filter((m) => m.subresource === 'status');
    expect(ofStatus.map((m) => m.fieldsV1)).toEqual([{ 'f:status': {} }]);
  });

  test('printer columns are served as a Table', async () => {
    const table = (await getJson(
      `/apis/${group}/${version}/namespaces/${namespace}/${plural}/${name}`,
      'application/json;as=Table;v=v1;g=meta.k8s.io',
    )) as { kind: string; columnDefinitions: { name: string }[]; rows: { cells: unknown[] }[] };
    expect(table.kind).toBe('Table');
    const columns = table.columnDefinitions.map((c) => c.name);
    // Every column the CRD declares (crd-schema's unit test names them), wide ones too.
    expect(columns).toEqual(['Name', ...printerColumns.map((c) => c.name)]);
    const row = Object.fromEntries(columns.map((c, i) => [c, table.rows[0]?.cells[i]]));
    expect(row).toMatchObject({
      Name: name,
      Ready: 'True',
      Phase: 'Draining',
      'Replica Sets': '["rs-a","rs-b"]',
      Lag: '3',
      Strategy: 'sticky',
    });
  });

  test('kubectl finds the resource by its short name and prints the columns', async () => {
    const out = await kubectl('get', 'cube', name, '-n', namespace);
    const [header, line] = out.trim().split('\n');
    expect(header?.split(/\s{2,}/)).toEqual([
      'NAME',
      'READY',
      'PHASE',
      'REPLICA SETS',
      'LAG',
      'AGE',
    ]);
    expect(line).toMatch(/^with-status\s+True\s+Draining\s+\["rs-a","rs-b"\]\s+3\s+\S+$/);
  });
});

// `kubectl explain` reads the OpenAPI the API server publishes from the applied CRD: every field
// it prints must say what it is, not `<empty>` or `<no description>`.
describe('kubectl explain', () => {
  const [served] = cubeAssignmentCrd().spec.versions;
  const words = (text: string): string => text.replace(/\s+/g, ' ').trim();
  let cacheDir = '';

  /**
   * The committed schema's field at a dotted path (list items stepped into): its description and
   * its fields', which kubectl must print.
   */
  function fieldAt(path: string): { description: string; fields: [string, StructuralSchema][] } {
    let field = served?.schema.openAPIV3Schema;
    let inner = field;
    for (const name of path.split('.')) {
      field = inner?.properties?.[name];
      inner = field;
      while (inner?.items) inner = inner.items;
    }
    if (!field) throw new Error(`no field ${path} in the CRD`);
    return {
      description: field.description ?? '',
      fields: Object.entries(inner?.properties ?? {}),
    };
  }

  beforeAll(() => {
    // Its own discovery and OpenAPI cache: nothing another run of kubectl saw stands in.
    cacheDir = tempDir('kubectl-explain');
  });

  afterAll(async () => {
    await rm(cacheDir, { recursive: true, force: true });
  });

  test.each(['spec.source', 'spec.suspend', 'spec.schema.measures', 'status.partitions'])(
    'kubectl explain cubeassignments.%s prints the descriptions of the field and of its fields',
    async (path) => {
      const { description, fields } = fieldAt(path);
      const expected = words(description);
      expect(expected.length).toBeGreaterThan(0);
      // The API server publishes a CRD's OpenAPI some moments after the CRD changes.
      const out = await eventually(`kubectl explain ${path} to print its description`, async () => {
        const text = await kubectl('--cache-dir', cacheDir, 'explain', `cubeassignments.${path}`);
        return words(text).includes(expected) ? text : undefined;
      });
      expect(out).not.toContain('<empty>');
      expect(out).not.toContain('<no description>');
      const unexplained = fields
        .filter(([, f]) => !words(out).includes(words(f.description ?? '')))
        .map(([name]) => name);
      expect(unexplained).toEqual([]);
    },
  );
});

// The CRD keeps durations to units CEL's duration() reads. This checks that premise on the
// server itself, with a throwaway CRD whose only check is the CEL rule.
describe('CEL duration() on this API server', () => {
  const probeGroup = `durations-${randomUUID().slice(0, 8)}.crd-test.streamcube.io`;
  const probePlural = 'durationprobes';

  beforeAll(async () => {
    await extensions.createCustomResourceDefinition({
      body: {
        metadata: { name: `${probePlural}.${probeGroup}` },
        spec: {
          group: probeGroup,
          scope: 'Namespaced',
          names: { plural: probePlural, singular: 'durationprobe', kind: 'DurationProbe' },
          versions: [
            {
              name: 'v1',
              served: true,
              storage: true,
              schema: {
                openAPIV3Schema: {
                  type: 'object',
                  properties: {
                    spec: {
                      type: 'object',
                      properties: { d: { type: 'string', maxLength: 32 } },
                      x_kubernetes_validations: [
                        {
                          rule: "duration(self.d) > duration('0s')",
                          message: 'd must be positive',
                        },
                      ],
                    },
                  },
                },
              },
            },
          ],
        },
      },
    });
    await eventually('the probe CRD to be served', () =>
      custom.listNamespacedCustomObject({
        group: probeGroup,
        version: 'v1',
        namespace,
        plural: probePlural,
      }),
    );
  });

  afterAll(async () => {
    await extensions.deleteCustomResourceDefinition({ name: `${probePlural}.${probeGroup}` });
  });

  test.each([
    ['1h30m', 'accepted'],
    ['500ms', 'accepted'],
    ['90s', 'accepted'],
    ['0s', 'refused by the rule'],
    ['2d', 'not a duration to CEL'],
    ['1w', 'not a duration to CEL'],
  ])('duration(%j): %s', async (d, expected) => {
    const outcome = await custom
      .createNamespacedCustomObject({
        group: probeGroup,
        version: 'v1',
        namespace,
        plural: probePlural,
        body: {
          apiVersion: `${probeGroup}/v1`,
          kind: 'DurationProbe',
          metadata: { generateName: 'probe-' },
          spec: { d },
        },
      })
      .then(
        () => 'accepted',
        (e: unknown) => {
          if (!(e instanceof ApiException) || e.code !== 422) throw e;
          return /type conversion error .* to 'google.protobuf.Duration'/.test(String(e.body))
            ? 'not a duration to CEL'
            : 'refused by the rule';
        },
      );
    expect(outcome).toBe(expected);
  });
});
