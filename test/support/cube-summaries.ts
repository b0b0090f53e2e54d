// A receiver's summary of one cube, as GET /v1/cubes lists it, for tests of the operator's reads.
import type { CubeSummary } from '../../src/protocol/admin-api.ts';

export const cubeSummary = (
  cube: string,
  specDigest = 'd1',
  namespace = 'default',
): CubeSummary => ({
  namespace,
  cube,
  replicaSet: 'rs-a',
  receiver: 'rs-a-0',
  topic: 'orders',
  specDigest,
  partitions: [],
  segments: { active: 0, immutable: 0, handedOff: 0 },
  ingested: 0,
  rejected: {},
  consumer: { state: 'running', failures: 0 },
});
