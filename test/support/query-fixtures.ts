// Fixtures of the query service's unit tests: a cube `shop/orders` read by one replica set, a
// service whose one receiver answers as the test says (or as the real receiver query over given
// segments, through JSON as over HTTP), and segments committed the product's own way.
import { type CubeSchema, cubeSchema } from '../../src/api/cube.ts';
import type { CubeAssignment } from '../../src/api/cube-assignment.ts';
import type { QueryRequest, QueryResponse } from '../../src/protocol/admin-api.ts';
import type { CommittedViewCache } from '../../src/query/committed-cache.ts';
import { QueryService } from '../../src/query/service.ts';
import type { DeepStorage } from '../../src/receiver/deep-storage.ts';
import { handOffSegment } from '../../src/receiver/hand-off.ts';
import { commitWindow, recordedHandOff } from '../../src/receiver/hand-off-commit.ts';
import { querySegments } from '../../src/receiver/query.ts';
import type { PartitionClock, Segment } from '../../src/receiver/segments.ts';

/** Events counted by country in 1-minute windows. */
export const countByCountry = cubeSchema.parse({
  timestampField: 'ts',
  dimensions: ['country'],
  measures: [{ name: 'events', function: 'count' }],
  window: '1m',
});

/** `shop/orders` on replica set rs-a, holding partition 0, with `status` besides. */
export function oneSetCube(schema: CubeSchema, status: object = {}): CubeAssignment {
  return {
    metadata: { name: 'orders', namespace: 'shop' },
    spec: {
      source: { brokers: ['k:9092'], topic: 'orders', startingOffsets: 'earliest' },
      replicaSets: ['rs-a'],
      schema,
    },
    status: { assignment: { 'rs-a': [0] }, ...status },
  } as unknown as CubeAssignment;
}

/** A query service over `cube` whose one receiver (r0) answers with `answer`. */
export function oneReceiverService(o: {
  cube: CubeAssignment;
  storage: DeepStorage;
  answer: (request: QueryRequest) => QueryResponse;
  cache?: CommittedViewCache;
}): QueryService {
  return new QueryService({
    receiverTimeoutMs: 1000,
    maxRows: 100,
    ...(o.cache ? { cache: o.cache } : {}),
    sources: {
      cube: () => o.cube,
      receivers: () => [{ name: 'r0', baseUrl: 'http://r0' }],
      query: (_r, _ns, _c, request) => Promise.resolve(o.answer(request)),
      storage: o.storage,
    },
  });
}

/** The real receiver's answer over `segments` (and `clocks`), through JSON as over HTTP. */
export const receiverOver =
  (
    schema: CubeSchema,
    segments: Segment[],
    clocks?: ReadonlyMap<number, Pick<PartitionClock, 'pending' | 'pendingRejected'>>,
  ) =>
  (request: QueryRequest): QueryResponse =>
    JSON.parse(
      JSON.stringify(
        querySegments(
          'orders',
          schema,
          segments,
          { ...request, filters: request.filters ?? {}, groupBy: request.groupBy ?? [] },
          clocks,
        ),
      ),
    ) as QueryResponse;

/** Hands off each segment as the first receiver of `replicaSet` would, and commits its window. */
export async function commitSegments(
  storage: DeepStorage,
  schema: CubeSchema,
  segments: Segment[],
  replicaSet = 'rs-a',
): Promise<void> {
  const target = {
    namespace: 'shop',
    cube: 'orders',
    replicaSet,
    receiver: `${replicaSet}-0`,
    schema,
  };
  for (const s of segments) {
    await handOffSegment(storage, target, s);
    await commitWindow({
      storage,
      target,
      windowStart: s.windowStart,
      mine: [recordedHandOff(target, s)],
    });
  }
}
