// CubeAssignment objects for tests of the operator, the CRD and the query service, and the merge
// patch the API server applies to them, so that a fake persist writes status as the real one does.
import {
  cubeAssignment,
  type CubeAssignment,
  type CubeAssignmentSpecInput,
  type CubeAssignmentStatus,
} from '../../src/api/cube-assignment.ts';
import type { CubeSchema } from '../../src/api/cube.ts';
import { type SchemaOptions, schemaInput } from './schemas.ts';

/** The cube `shop/orders` (topic `orders`, one count measure) served by `replicaSets`. */
export function ordersCube(replicaSets: string[], status?: CubeAssignmentStatus): CubeAssignment {
  return cubeAssignment.parse({
    apiVersion: 'streamcube.io/v1alpha1',
    kind: 'CubeAssignment',
    metadata: { name: 'orders', namespace: 'shop', resourceVersion: '1' },
    spec: {
      source: { brokers: ['kafka:9092'], topic: 'orders' },
      schema: {
        timestampField: 'ts',
        dimensions: ['country'],
        measures: [{ name: 'events', function: 'count' }],
        window: '1h',
        allowedLateness: '10m',
      },
      replicaSets,
    },
    ...(status ? { status } : {}),
  });
}

/** RFC 7396: null deletes, objects merge key by key, anything else (lists too) replaces. */
export function applyMergePatch(target: unknown, patch: unknown): unknown {
  if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) return patch;
  const out: Record<string, unknown> =
    target !== null && typeof target === 'object' && !Array.isArray(target)
      ? { ...(target as Record<string, unknown>) }
      : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete out[key];
    else out[key] = applyMergePatch(out[key], value);
  }
  return out;
}

/** A status of generation `generation` in every field: four partitions, one moving (Draining). */
export function drainingStatus(generation: number) {
  return {
    observedGeneration: generation,
    assignment: { 'rs-a': [0, 1], 'rs-b': [2, 3] },
    epochs: { '0': 2, '1': 2, '2': 1, '3': 1 },
    reassign: {
      id: 'r-7',
      phase: 'Draining',
      moves: [{ partition: 2, from: 'rs-a', to: 'rs-b' }],
      stopOffsets: { '2': '18234' },
      startedAt: '2026-11-30T10:00:00Z',
      phaseStartedAt: '2026-11-30T10:00:02Z',
    },
    partitions: [
      { partition: 0, replicaSet: 'rs-a', position: '1200', highWatermark: '1203', lag: '3' },
    ],
    totalLag: '3',
    segments: { active: 2, immutable: 1, handedOff: 40 },
    conditions: [
      {
        type: 'Ready',
        status: 'True',
        observedGeneration: generation,
        lastTransitionTime: '2026-11-30T10:00:00Z',
        reason: 'Assigned',
        message: 'every partition is consumed',
      },
    ],
  } satisfies CubeAssignmentStatus;
}

/**
 * The cube `shop/orders` as the query service's sources give it: partition 0 on rs-a, 1 on rs-b,
 * at `positions`; `status` adds to its status (epochs, say).
 */
export function queriedOrdersCube(
  schema: CubeSchema,
  positions: [string, string],
  status: Partial<CubeAssignmentStatus> = {},
): CubeAssignment {
  return {
    apiVersion: 'streamcube.io/v1alpha1',
    kind: 'CubeAssignment',
    metadata: { name: 'orders', namespace: 'shop' },
    spec: {
      source: { brokers: ['kafka:9092'], topic: 'orders', startingOffsets: 'earliest' },
      replicaSets: ['rs-a', 'rs-b'],
      schema,
    },
    status: {
      assignment: { 'rs-a': [0], 'rs-b': [1] },
      ...status,
      partitions: [
        { partition: 0, replicaSet: 'rs-a', position: positions[0] },
        { partition: 1, replicaSet: 'rs-b', position: positions[1] },
      ],
    },
  } as unknown as CubeAssignment;
}

/** A spec naming every source option (TLS, SASL), pinning partitions 0 and 1 to rs-a. */
export function securedSpec(brokers: string[], schema: SchemaOptions): CubeAssignmentSpecInput {
  return {
    source: {
      brokers,
      topic: 'orders',
      tls: { secretRef: 'kafka-ca' },
      sasl: { mechanism: 'scram-sha-512', secretRef: 'kafka-user' },
    },
    schema: schemaInput(['country', 'device'], { events: 'count', revenue: 'sum(price)' }, schema),
    replicaSets: ['rs-a', 'rs-b'],
    pins: { 'rs-a': [0, 1] },
  };
}
