// The query service with its edges faked: which receivers it asks (one Ready replica per set, a
// sibling when that one fails), what an answer says when a set or deep storage cannot be read,
// requireComplete's 503, and offsets Kafka deleted before any replica read them (lost, not missing).
import type { CubeAssignment } from '../../src/api/cube-assignment.ts';
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
  cube?: CubeAssignment;
}) {
  const served = o.cube ?? cube;
  const asked: string[] = [];
  const s = new QueryService({
    receiverTimeoutMs: 1000,
    maxRows: 100,
    sources: {
      cube: (ns, name) => (ns === 'shop' && name === 'orders' ? served : undefined),
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

/** Window 1 of partition 0 committed: offsets [from, to), `lost` right before them, 5 events. */
async function commitWindow1(
  storage: MemoryDeepStorage,
  from: number,
  to: number,
  lost?: [number, number],
) {
  const target = {
    namespace: 'shop',
    cube: 'orders',
    replicaSet: 'rs-a',
    receiver: 'rs-a-0',
    schema,
  };
  const segment: Segment = {
    key: M,
    windowStart: M,
    windowEnd: 2 * M,
    state: 'IMMUTABLE',
    rows: new Map([['de', { dimensions: ['de'], values: [5] }]]),
    delta: new Map(),
    ranges: new Map([[0, [{ from: BigInt(from), to: BigInt(to) }]]]),
    epochs: new Map([[0, 1]]),
  };
  const lostBefore = new Map(lost ? [[0, [{ from: BigInt(lost[0]), to: BigInt(lost[1]) }]]] : []);
  await handOffSegment(storage, target, segment, lostBefore);
  await commitWindow({
    storage,
    target,
    windowStart: M,
    mine: [recordedHandOff(target, segment, lostBefore)],
  });
}

describe('offsets lost to retention', () => {
  // Partition 0: window 0 committed [0, 10), Kafka deleted [10, 100), live [100, 115).
  const lostCube = (lostRanges: { from: string; to: string }[]) => {
    const c = queriedOrdersCube(schema, ['115', '4'], { epochs: { '0': 1, '1': 1 } });
    c.status!.partitions![0]!.lostRanges = lostRanges;
    c.status!.partitions![0]!.lostOffsets = '90';
    return c;
  };
  const answers = { 'rs-a-0': live(0, 100, 115, 5), 'rs-b-0': live(1, 0, 4, 4) };
  const ready = { 'rs-a': ['rs-a-0'], 'rs-b': ['rs-b-0'] };

  test("named in the cube's status: the answer is complete, and says which offsets were lost", async () => {
    const { s } = service({
      storage: await storageWithWindow0(),
      ready,
      answers,
      cube: lostCube([{ from: '10', to: '100' }]),
    });
    const answer = await s.answer('shop', 'orders', { requireComplete: true });
    expect(answer.complete).toBe(true);
    expect(answer.rows).toEqual([[19]]);
    expect(answer.partitions.map((p) => [p.partition, p.covered, p.lost, p.missing])).toEqual([
      [
        0,
        [
          ['0', '10'],
          ['100', '115'],
        ],
        [{ from: '10', to: '100', reason: 'retention' }],
        [],
      ],
      [1, [['0', '4']], [], []],
    ]);
  });

  test('a gap the lost range does not name stays missing: lost is never a guess', async () => {
    const { s } = service({
      storage: await storageWithWindow0(),
      ready,
      answers,
      cube: lostCube([{ from: '10', to: '60' }]),
    });
    const answer = await s.answer('shop', 'orders', {});
    expect(answer.complete).toBe(false);
    const p0 = answer.partitions.find((p) => p.partition === 0)!;
    expect(p0.lost).toEqual([{ from: '10', to: '60', reason: 'retention' }]);
    expect(p0.missing).toEqual([{ from: '60', to: '100', reason: expect.any(String) as string }]);
  });

  test('a lost range pieces hold after all (a sibling read it) is counted, not lost', async () => {
    const { s } = service({
      storage: await storageWithWindow0(),
      ready,
      answers: { ...answers, 'rs-a-0': live(0, 10, 115, 95) },
      cube: lostCube([{ from: '10', to: '100' }]),
    });
    const answer = await s.answer('shop', 'orders', {});
    expect(answer.complete).toBe(true);
    expect(answer.partitions[0]).toMatchObject({ covered: [['0', '115']], lost: [] });
  });

  test('named only by the live segment after it (past the ranges a status lists): complete, lost said', async () => {
    const withLost = live(0, 100, 115, 5);
    withLost.pieces![0]!.lostRanges = { '0': [['10', '100']] };
    const { s } = service({
      storage: await storageWithWindow0(),
      ready,
      answers: { ...answers, 'rs-a-0': withLost },
      cube: lostCube([]),
    });
    const answer = await s.answer('shop', 'orders', {});
    expect(answer.complete).toBe(true);
    expect(answer.partitions[0]).toMatchObject({
      lost: [{ from: '10', to: '100', reason: 'retention' }],
      missing: [],
    });
  });

  test('named only by a commit record (the status no longer lists it): complete, lost said', async () => {
    const storage = await storageWithWindow0();
    await commitWindow1(storage, 100, 110, [10, 100]);
    const { s } = service({
      storage,
      ready,
      answers: { ...answers, 'rs-a-0': live(0, 110, 115, 5) },
      cube: lostCube([]),
    });
    const answer = await s.answer('shop', 'orders', {});
    expect(answer.complete).toBe(true);
    expect(answer.rows).toEqual([[24]]);
    expect(answer.partitions[0]).toMatchObject({
      covered: [
        ['0', '10'],
        ['100', '115'],
      ],
      lost: [{ from: '10', to: '100', reason: 'retention' }],
      missing: [],
    });
  });

  test('a commit record of before (no lostRanges) still reads: the gap is missing, as it was', async () => {
    const storage = await storageWithWindow0();
    await commitWindow1(storage, 100, 110);
    const { s } = service({
      storage,
      ready,
      answers: { ...answers, 'rs-a-0': live(0, 110, 115, 5) },
      cube: lostCube([]),
    });
    const answer = await s.answer('shop', 'orders', {});
    expect(answer.complete).toBe(false);
    expect(answer.rows).toEqual([[24]]);
    expect(answer.partitions[0]).toMatchObject({ lost: [], missing: [{ from: '10', to: '100' }] });
  });
});

describe('a cube deleted and made again under the same name', () => {
  // Deep storage keeps the earlier cube's window 0 (partition 0, offsets [0, 10)); the new one
  // began reading from the latest offsets: partition 0 at 10, partition 1 at 0.
  const again = (resets?: CubeAssignment['status']): CubeAssignment => {
    const c = queriedOrdersCube(schema, ['15', '4'], {
      epochs: { '0': 1, '1': 1 },
      firstOffsets: { '0': '10', '1': '0' },
      ...resets,
    });
    return { ...c, spec: { ...c.spec, source: { ...c.spec.source, startingOffsets: 'latest' } } };
  };

  test("the earlier cube's hand-offs are not counted, nor a gap: complete, and said", async () => {
    const { s } = service({
      storage: await storageWithWindow0(),
      ready: { 'rs-a': ['rs-a-0'], 'rs-b': ['rs-b-0'] },
      answers: { 'rs-a-0': live(0, 10, 15, 5), 'rs-b-0': live(1, 0, 4, 4) },
      cube: again(),
    });
    const answer = await s.answer('shop', 'orders', { granularity: '1m' });
    expect(answer.complete).toBe(true);
    expect(answer.rows).toEqual([['1970-01-01T00:01:00.000Z', 9]]);
    expect(answer.partitions.map((p) => [p.partition, p.from, p.to, p.covered])).toEqual([
      [0, '10', '15', [['10', '15']]],
      [1, '0', '4', [['0', '4']]],
    ]);
    expect(answer.sources.committed.predating).toBe(1);
  });

  test('offsets before where it began that a reset read again are its own: counted', async () => {
    const { s } = service({
      storage: await storageWithWindow0(),
      ready: { 'rs-a': ['rs-a-0'], 'rs-b': ['rs-b-0'] },
      answers: { 'rs-a-0': live(0, 10, 15, 5), 'rs-b-0': live(1, 0, 4, 4) },
      cube: again({
        resets: [
          {
            id: 'r1',
            to: 'earliest',
            result: 'Applied',
            at: new Date(0).toISOString(),
            partitions: [{ partition: 0, from: '10', to: '0', epoch: 1 }],
          },
        ],
      }),
    });
    const answer = await s.answer('shop', 'orders', { granularity: '1m' });
    expect(answer.rows).toEqual([
      ['1970-01-01T00:00:00.000Z', 10],
      ['1970-01-01T00:01:00.000Z', 9],
    ]);
    expect(answer.sources.committed.predating).toBeUndefined();
  });
});
