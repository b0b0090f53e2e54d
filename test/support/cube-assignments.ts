// CubeAssignment objects for unit tests of the operator, and the merge patch the API server applies
// to them, so that a fake persist writes status as the real one does.
import {
  cubeAssignment,
  type CubeAssignment,
  type CubeAssignmentStatus,
} from '../../src/api/cube-assignment.ts';

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
