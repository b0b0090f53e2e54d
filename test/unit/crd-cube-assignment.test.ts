// The CubeAssignment zod definitions: a full object parses with its defaults, and the rules the
// CRD's CEL says (pins disjoint and listed, durations CEL understands) hold in zod too.
import {
  cubeAssignment,
  cubeAssignmentSpec,
  cubeAssignmentStatus,
  maxPinnedPartitions,
  type CubeAssignment,
  type CubeAssignmentSpecInput,
} from '../../src/api/cube-assignment.ts';
import { assignCubeRequest } from '../../src/protocol/admin-api.ts';
import { drainingStatus, securedSpec } from '../support/cube-assignments.ts';

const spec: CubeAssignmentSpecInput = securedSpec(['kafka:9092'], {
  window: '1h30m',
  allowedLateness: '10m',
});

const status = drainingStatus(3);

test('a full CubeAssignment parses; defaults fill strategy, suspend and startingOffsets', () => {
  const parsed: CubeAssignment = cubeAssignment.parse({
    apiVersion: 'streamcube.io/v1alpha1',
    kind: 'CubeAssignment',
    metadata: { name: 'orders', namespace: 'analytics', generation: 3 },
    spec,
    status,
  });
  expect(parsed.spec.strategy).toBe('sticky');
  expect(parsed.spec.suspend).toBe(false);
  expect(parsed.spec.source.startingOffsets).toBe('earliest');
  expect(parsed.spec.source.sasl?.mechanism).toBe('scram-sha-512');
  expect(parsed.status?.reassign?.stopOffsets).toEqual({ '2': '18234' });
  expect(parsed.status?.conditions?.[0]?.reason).toBe('Assigned');
  expect(parsed.metadata.generation).toBe(3);
});

test('allowedLateness defaults to 0s and dimensions to none', () => {
  const schema = { ...spec.schema, allowedLateness: undefined, dimensions: undefined };
  const parsed = cubeAssignmentSpec.parse({ ...spec, schema });
  expect(parsed.schema.allowedLateness).toBe('0s');
  expect(parsed.schema.dimensions).toEqual([]);
});

type SpecChange = (s: CubeAssignmentSpecInput) => unknown;

test.each<[string, SpecChange, string]>([
  ['no replica sets', (s) => ({ ...s, replicaSets: [] }), 'replicaSets'],
  ['a replica set twice', (s) => ({ ...s, replicaSets: ['rs-a', 'rs-a'] }), 'replicaSets'],
  ['a replica set that is no DNS label', (s) => ({ ...s, replicaSets: ['RS_A'] }), 'replicaSets.0'],
  ['an unknown strategy', (s) => ({ ...s, strategy: 'random' }), 'strategy'],
  ['a pinned replica set not listed', (s) => ({ ...s, pins: { 'rs-c': [0] } }), 'pins.rs-c'],
  ['overlapping pins', (s) => ({ ...s, pins: { 'rs-a': [0, 1], 'rs-b': [1] } }), 'pins.rs-b'],
  ['a negative pinned partition', (s) => ({ ...s, pins: { 'rs-a': [-1] } }), 'pins.rs-a.0'],
  [
    'a partition pinned twice in one list',
    (s) => ({ ...s, pins: { 'rs-a': [1, 1] } }),
    'pins.rs-a',
  ],
  [
    'too many pinned partitions',
    (s) => ({
      ...s,
      pins: { 'rs-a': Array.from({ length: maxPinnedPartitions + 1 }, (_, i) => i) },
    }),
    'pins.rs-a',
  ],
  [
    'a broker without port',
    (s) => ({ ...s, source: { ...s.source, brokers: ['kafka'] } }),
    'source.brokers.0',
  ],
  [
    'an unknown SASL mechanism',
    (s) => ({ ...s, source: { ...s.source, sasl: { mechanism: 'gssapi', secretRef: 'u' } } }),
    'source.sasl.mechanism',
  ],
  [
    'a window in days (CEL duration() has no d)',
    (s) => ({ ...s, schema: { ...s.schema, window: '2d' } }),
    'schema.window',
  ],
  ['a zero window', (s) => ({ ...s, schema: { ...s.schema, window: '0s' } }), 'schema.window'],
  [
    'allowedLateness not below window',
    (s) => ({ ...s, schema: { ...s.schema, allowedLateness: '90m' } }),
    'schema.allowedLateness',
  ],
  [
    'a sum without field',
    (s) => ({ ...s, schema: { ...s.schema, measures: [{ name: 'x', function: 'sum' }] } }),
    'schema.measures.0.field',
  ],
  [
    'a name used by a dimension and a measure',
    (s) => ({ ...s, schema: { ...s.schema, dimensions: ['events'] } }),
    'schema.measures',
  ],
])('%s is refused at %s', (_, change, path) => {
  const result = cubeAssignmentSpec.safeParse(change(spec));
  expect(result.success).toBe(false);
  expect(result.error?.issues.map((i) => i.path.join('.'))).toContain(path);
});

test.each([
  ['an offset as a number', { totalLag: 3 }],
  ['an offset beyond int64', { totalLag: '9223372036854775808' }],
  ['an offset with a sign', { partitions: [{ partition: 0, replicaSet: 'rs-a', lag: '-1' }] }],
  ['an unknown phase', { reassign: { ...status.reassign, phase: 'Merging' } }],
  ['an epoch keyed by a non-number', { epochs: { first: 1 } }],
  [
    'a condition reason with spaces',
    { conditions: [{ ...status.conditions[0], reason: 'not ok' }] },
  ],
])('status with %s is refused', (_, change) => {
  expect(cubeAssignmentStatus.safeParse({ ...status, ...change }).success).toBe(false);
});

test('the largest int64 offset is accepted', () => {
  expect(cubeAssignmentStatus.safeParse({ totalLag: '9223372036854775807' }).success).toBe(true);
});

describe('SASL without TLS is refused unless the cube says allowPlaintext, by the CRD and by the receiver', () => {
  const plain = { ...spec.source, tls: undefined };
  const assign = (source: object) =>
    assignCubeRequest.safeParse({
      source,
      schema: spec.schema,
      replicaSet: 'rs-a',
      partitions: [{ partition: 0, position: '0', epoch: 1 }],
    });

  test.each([
    ['with tls', spec.source, true],
    ['without tls', plain, false],
    ['without tls, allowPlaintext', { ...plain, allowPlaintext: true }, true],
    ['without tls, allowPlaintext false', { ...plain, allowPlaintext: false }, false],
    ['without sasl or tls', { ...plain, sasl: undefined }, true],
  ])('%s', (_name, source, accepted) => {
    const parsed = cubeAssignmentSpec.safeParse({ ...spec, source });
    expect(parsed.success).toBe(accepted);
    if (!parsed.success) {
      expect(parsed.error.issues[0]?.path).toEqual(['source', 'sasl']);
      expect(parsed.error.issues[0]?.message).toMatch(
        /add source.tls, or set source.allowPlaintext/,
      );
    }
    const request = assign(source);
    expect(request.success).toBe(accepted);
    if (!request.success) expect(request.error.issues[0]?.path).toEqual(['source', 'sasl']);
  });
});
