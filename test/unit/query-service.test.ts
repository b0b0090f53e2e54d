// The query service with its edges faked: which receivers it asks (one Ready replica per set, a
// sibling when that one fails), what an answer says when a set or deep storage cannot be read,
// and requireComplete's 503.
import type { QueryRequest, QueryResponse } from '../../src/protocol/admin-api.ts';
import { ReceiverApiError } from '../../src/protocol/client.ts';
import { QueryError } from '../../src/query/request.ts';
import { QueryService, type ReceiverRef } from '../../src/query/service.ts';
import { handOffSegment } from '../../src/receiver/hand-off.ts';
import { commitWindow, recordedHandOff } from '../../src/receiver/hand-off-commit.ts';
import type { Segment } from '../../src/receiver/segments.ts';
import { MemoryDeepStorage } from '../support/memory-deep-storage.ts';
import { queriedOrdersCube } from '../support/cube-assignments.ts';
import { schemaOf } from '../support/schemas.ts';

const M = 60_000;
const schema = schemaOf(['country'], { events: 'count' }, { window: '1m' });

const cube = queriedOrdersCube(schema, ['15', '4'], { epochs: { '0': 1, '1': 1 } });

/** Live answers by receiver name: partition p, window 1, offsets [from, to) and `events` rows. */
const live = (p: number, from: number, to: number, events: number): QueryResponse => ({
  columns: ['events'],
  rows: [[events]],
  offsetRanges: {},
  segments: 1,
  pieces: [
    {
      windowStart: M,
      windowEnd: 2 * M,
      epochs: { [p]: 1 },
      offsetRanges: { [p]: [[String(from), String(to)]] },
      inRange: true,
      rows: [[events]],
    },
  ],
  held: { [p]: { to: String(to), pending: [] } },
});

async function storageWithWindow0(): Promise<MemoryDeepStorage> {
  const storage = new MemoryDeepStorage();
  const target = {
    namespace: 'shop',
    cube: 'orders',
    replicaSet: 'rs-a',
    receiver: 'rs-a-0',
    schema,
  };
  const segment: Segment = {
    key: 0,
    windowStart: 0,
    windowEnd: M,
    state: 'IMMUTABLE',
    rows: new Map([['de', { dimensions: ['de'], values: [10] }]]),
    delta: new Map(),
    ranges: new Map([[0, [{ from: 0n, to: 10n }]]]),
    epochs: new Map([[0, 1]]),
  };
  await handOffSegment(storage, target, segment);
  await commitWindow({ storage, target, windowStart: 0, mine: [recordedHandOff(target, segment)] });
  return storage;
}

function service(o: {
  storage: MemoryDeepStorage;
  ready: Record<string, string[]>;
  answers: Record<string, QueryResponse | Error>;
}) {
  const asked: string[] = [];
  const s = new QueryService({
    receiverTimeoutMs: 1000,
    maxRows: 100,
    sources: {
      cube: (ns, name) => (ns === 'shop' && name === 'orders' ? cube : undefined),
      receivers: (_, set) =>
        (o.ready[set] ?? []).map((name) => ({ name, baseUrl: `http://${name}` })),
      query: (r: ReceiverRef, _ns: string, _cube: string, _q: QueryRequest) => {
        asked.push(r.name);
        const a = o.answers[r.name];
        return a instanceof Error || a === undefined
          ? Promise.reject(a ?? new Error('connect ECONNREFUSED'))
          : Promise.resolve(a);
      },
      storage: o.storage,
    },
  });
  return { s, asked };
}

test('committed window 0 and live window 1 of each set: complete, every offset once', async () => {
  const { s, asked } = service({
    storage: await storageWithWindow0(),
    ready: { 'rs-a': ['rs-a-0', 'rs-a-1'], 'rs-b': ['rs-b-0'] },
    answers: { 'rs-a-0': live(0, 10, 15, 5), 'rs-b-0': live(1, 0, 4, 4) },
  });
  const answer = await s.answer('shop', 'orders', { granularity: '1m' });
  expect(asked.sort()).toEqual(['rs-a-0', 'rs-b-0']);
  expect(answer.complete).toBe(true);
  expect(answer.rows).toEqual([
    ['1970-01-01T00:00:00.000Z', 10],
    ['1970-01-01T00:01:00.000Z', 9],
  ]);
  expect(answer.partitions.map((p) => [p.partition, p.from, p.to, p.covered])).toEqual([
    [0, '0', '15', [['0', '15']]],
    [1, '0', '4', [['0', '4']]],
  ]);
});

test('a replica that fails: its sibling answers', async () => {
  const { s, asked } = service({
    storage: await storageWithWindow0(),
    ready: { 'rs-a': ['rs-a-0', 'rs-a-1'], 'rs-b': ['rs-b-0'] },
    answers: {
      'rs-a-0': new Error('timeout'),
      'rs-a-1': live(0, 10, 15, 5),
      'rs-b-0': live(1, 0, 4, 4),
    },
  });
  const answer = await s.answer('shop', 'orders', {});
  expect(asked).toContain('rs-a-1');
  expect(answer.complete).toBe(true);
  expect(answer.rows).toEqual([[19]]);
  expect(answer.sources.live.find((l) => l.replicaSet === 'rs-a')).toMatchObject({
    receiver: 'rs-a-1',
    errors: [expect.stringMatching(/rs-a-0.*timeout/) as string],
  });
});

test('a set with no ready receiver: incomplete, its partitions named with the reason; requireComplete → 503', async () => {
  const sources = {
    storage: await storageWithWindow0(),
    ready: { 'rs-a': ['rs-a-0'] },
    answers: { 'rs-a-0': live(0, 10, 15, 5) },
  };
  const answer = await service(sources).s.answer('shop', 'orders', {});
  expect(answer.complete).toBe(false);
  expect(answer.rows).toEqual([[15]]);
  const p1 = answer.partitions.find((p) => p.partition === 1)!;
  expect(p1.missing).toEqual([
    { from: '0', to: '4', reason: 'replica set rs-b has no ready receiver' },
  ]);
  await expect(
    service(sources).s.answer('shop', 'orders', { requireComplete: true }),
  ).rejects.toMatchObject({
    status: 503,
    message: expect.stringMatching(/rs-b has no ready receiver/) as string,
  });
});

test('deep storage down: incomplete, said so', async () => {
  const storage = await storageWithWindow0();
  storage.down = true;
  const answer = await service({
    storage,
    ready: { 'rs-a': ['rs-a-0'], 'rs-b': ['rs-b-0'] },
    answers: { 'rs-a-0': live(0, 10, 15, 5), 'rs-b-0': live(1, 0, 4, 4) },
  }).s.answer('shop', 'orders', {});
  expect(answer.complete).toBe(false);
  expect(answer.sources.committed.error).toMatch(/deep storage: connect ECONNREFUSED/);
  expect(answer.partitions.find((p) => p.partition === 0)!.missing).toEqual([
    {
      from: '0',
      to: '10',
      reason: expect.stringMatching(/^deep storage: connect ECONNREFUSED/) as string,
    },
  ]);
});

test('a receiver that does not hold the cube (404) holds nothing of it', async () => {
  const { s } = service({
    storage: await storageWithWindow0(),
    ready: { 'rs-a': ['rs-a-0'], 'rs-b': ['rs-b-0'] },
    answers: {
      'rs-a-0': live(0, 10, 15, 5),
      'rs-b-0': new ReceiverApiError(404, 'no cube shop/orders'),
    },
  });
  const answer = await s.answer('shop', 'orders', {});
  expect(answer.sources.live.find((l) => l.replicaSet === 'rs-b')).toEqual({
    replicaSet: 'rs-b',
    receiver: 'rs-b-0',
    pieces: 0,
  });
  // Partition 1's position (4, from status) is then not covered: missing, not guessed.
  expect(answer.partitions.find((p) => p.partition === 1)!.complete).toBe(false);
});

test('an unknown cube: 404; an unknown measure: 400 naming it', async () => {
  const { s } = service({ storage: new MemoryDeepStorage(), ready: {}, answers: {} });
  await expect(s.answer('shop', 'nope', {})).rejects.toMatchObject({ status: 404 });
  await expect(s.answer('shop', 'orders', { measures: ['profit'] })).rejects.toMatchObject({
    status: 400,
    field: 'measures.0',
  });
  await expect(s.answer('shop', 'orders', { measures: ['profit'] })).rejects.toBeInstanceOf(
    QueryError,
  );
});
