// The autoscaler's edges with fakes: which cubes and partitions count and how far behind they are
// (the brokers' high watermark minus the recorded position, unknown figures listed), and what it
// writes: spec.sets through the scale subresource with the pool's resourceVersion and the
// operator's field manager, an Event with the figures, status.autoscale only when worth it.
import type { CubeAssignment } from '../../src/api/cube-assignment.ts';
import { receiverPoolSpec, type ReceiverPool } from '../../src/api/receiver-pool.ts';
import type { EventRecorder } from '../../src/operator/events.ts';
import { PoolAutoscaler } from '../../src/operator/pool/autoscaler.ts';
import { cubeLag, cubeUsesPool, LastPositions } from '../../src/operator/pool/pool-lag.ts';
import { silentLogger } from '../../src/operator/runtime/logger.ts';

function cube(
  name: string,
  o: {
    pool?: string;
    replicaSets?: string[];
    assignment?: Record<string, number[]>;
    positions?: Record<number, string>;
    suspend?: boolean;
  },
): CubeAssignment {
  return {
    apiVersion: 'streamcube.io/v1alpha1',
    kind: 'CubeAssignment',
    metadata: { name, namespace: 'ns', uid: `uid-${name}` },
    spec: {
      source: { brokers: ['k:9092'], topic: `t-${name}` },
      ...(o.pool ? { pool: o.pool } : { replicaSets: o.replicaSets ?? [] }),
      ...(o.suspend ? { suspend: true } : {}),
    } as CubeAssignment['spec'],
    status: {
      assignment: o.assignment ?? {},
      partitions: Object.entries(o.positions ?? {}).map(([p, position]) => ({
        partition: Number(p),
        replicaSet: 'p-0',
        position,
      })),
    },
  };
}

const hw = (entries: [number, bigint][]) => new Map(entries);

test('the cubes that count: those naming the pool, listing its sets or holding partitions on them', () => {
  expect(cubeUsesPool(cube('a', { pool: 'p' }), 'p')).toBe(true);
  expect(cubeUsesPool(cube('b', { replicaSets: ['p-1', 'other'] }), 'p')).toBe(true);
  expect(cubeUsesPool(cube('c', { replicaSets: ['x'], assignment: { 'p-2': [0] } }), 'p')).toBe(
    true,
  );
  expect(cubeUsesPool(cube('d', { replicaSets: ['pp-0', 'q'] }), 'p')).toBe(false);
  expect(cubeUsesPool(cube('e', { pool: 'q' }), 'p')).toBe(false);
});

test('a pool whose first sets kept adopted names (setNames, the chart before pools): their cubes and partitions count', () => {
  const setNames = ['rs-a', 'rs-b'];
  const legacy = cube('a', {
    replicaSets: ['rs-a', 'rs-b'],
    assignment: { 'rs-a': [0], 'rs-b': [1], 'p-0': [2] },
    positions: { 0: '10', 1: '20', 2: '0' },
  });
  expect(cubeUsesPool(legacy, 'p', setNames)).toBe(true);
  expect(cubeUsesPool(cube('z', { replicaSets: ['rs-a'] }), 'p')).toBe(false);
  expect(cubeUsesPool(cube('z', { replicaSets: ['rs-a'] }), 'p', setNames)).toBe(true);
  // p-0 is index 0, which is rs-a's: not a set of this pool.
  const figures = cubeLag(
    legacy,
    'p',
    new LastPositions().update(legacy),
    hw([
      [0, 110n],
      [1, 40n],
      [2, 9999n],
    ]),
    setNames,
  );
  expect(figures).toEqual({ cube: 'ns/a', lag: 120n, partitions: 3 });
  expect(cubeUsesPool(cube('b', { replicaSets: ['p-2'] }), 'p', setNames)).toBe(true);
  expect(cubeUsesPool(cube('c', { replicaSets: ['p-1'] }), 'p', setNames)).toBe(false);
});

test("events behind: the high watermark minus the recorded position, over the pool's partitions only", () => {
  const c = cube('a', {
    replicaSets: ['p-0', 'other-0'],
    assignment: { 'p-0': [0, 1], 'other-0': [2] },
    positions: { 0: '100', 1: '50', 2: '0' },
  });
  const positions = new LastPositions().update(c);
  const figures = cubeLag(
    c,
    'p',
    positions,
    hw([
      [0, 1100n],
      [1, 50n],
      [2, 9999n],
    ]),
  );
  expect(figures).toEqual({ cube: 'ns/a', lag: 1000n, partitions: 3 });
});

test('unknown figures are listed, never counted as caught up: suspended, no position, no answer', () => {
  const positions = new LastPositions();
  const suspended = cube('s', {
    pool: 'p',
    suspend: true,
    assignment: { 'p-0': [0] },
    positions: { 0: '1' },
  });
  expect(cubeLag(suspended, 'p', positions.update(suspended), undefined)).toMatchObject({
    lag: 0n,
    unknown: 'ns/s (suspended)',
  });
  const noRow = cube('n', { pool: 'p', assignment: { 'p-0': [0, 1] }, positions: { 0: '5' } });
  expect(
    cubeLag(
      noRow,
      'p',
      positions.update(noRow),
      hw([
        [0, 10n],
        [1, 10n],
      ]),
    ),
  ).toEqual({
    cube: 'ns/n',
    lag: 5n,
    partitions: 2,
    unknown: 'ns/n (no position or high watermark for partition 1)',
  });
  const c = cube('b', { pool: 'p', assignment: { 'p-0': [0] }, positions: { 0: '5' } });
  expect(
    cubeLag(c, 'p', positions.update(c), { error: 'The group coordinator is not available' }),
  ).toMatchObject({ unknown: 'ns/b (high watermarks: The group coordinator is not available)' });
});

test('a row that vanishes (its owner stopped answering) keeps its last recorded position', () => {
  const positions = new LastPositions();
  positions.update(cube('a', { pool: 'p', assignment: { 'p-0': [0] }, positions: { 0: '40' } }));
  const later = cube('a', { pool: 'p', assignment: { 'p-0': [0] } });
  expect(cubeLag(later, 'p', positions.update(later), hw([[0, 1040n]]))).toEqual({
    cube: 'ns/a',
    lag: 1000n,
    partitions: 1,
  });
});

function fixture(autoscale: object | undefined, sets = 2, resyncMs?: number) {
  const pool: ReceiverPool = {
    apiVersion: 'streamcube.io/v1alpha1',
    kind: 'ReceiverPool',
    metadata: { name: 'p', namespace: 'ns', uid: 'pool-uid', resourceVersion: '7' },
    spec: receiverPoolSpec.parse({
      sets,
      image: 'i',
      storage: { size: '1Gi' },
      deepStorage: { claimName: 'd' },
      receiver: { adminToken: { name: 'a' }, readToken: { name: 'r' } },
      ...(autoscale ? { autoscale } : {}),
    }),
  };
  const scales: unknown[] = [];
  const events: string[] = [];
  let high = 0n;
  const cubes = [
    cube('a', {
      pool: 'p',
      assignment: { 'p-0': [0, 1], 'p-1': [2, 3] },
      positions: { 0: '0', 1: '0', 2: '0', 3: '0' },
    }),
  ];

  const autoscaler = new PoolAutoscaler({
    cubesUsing: () => cubes,
    highWatermarks: () => Promise.resolve(hw([0, 1, 2, 3].map((p) => [p, high]))),
    scaleApi: {
      patchNamespacedCustomObjectScale: (request: unknown) => {
        scales.push(request);
        return Promise.resolve({});
      },
    },
    events: {
      record: (_o: unknown, type: string, reason: string, message: string) =>
        events.push(`${type} ${reason}: ${message}`),
    } as unknown as EventRecorder,
    logger: silentLogger as never,
    ...(resyncMs === undefined ? {} : { resyncMs }),
  });
  return {
    pool,
    scales,
    events,
    autoscaler,
    setHigh: (h: bigint) => (high = h),
  };
}

test('a burst: spec.sets written through the scale subresource, guarded and under the field manager, with a ScaledOut Event', async () => {
  const f = fixture({ minSets: 2, maxSets: 4, targetLagPerSet: 100, scaleOutAfter: '2s' });
  f.setHigh(250n); // 1,000 behind over 2 sets
  const t0 = Date.parse('2026-01-01T00:00:00Z');
  const first = await f.autoscaler.evaluate(f.pool, 'ns', new Date(t0), false);
  expect(first).toMatchObject({
    desiredSets: 2,
    totalLag: 1000,
    lagPerSet: 500,
    targetLagPerSet: 100,
    cubes: 1,
    unknown: null,
    aboveTargetSince: '2026-01-01T00:00:00.000Z',
    belowThresholdSince: null,
    lastDecision: { action: 'Hold', reason: 'AboveTarget' },
  });
  expect(f.scales).toEqual([]);
  // Figures that move within their order of magnitude, same decision: nothing to write.
  f.setHigh(240n);
  expect(
    await f.autoscaler.evaluate(
      { ...f.pool, status: { autoscale: first as never } },
      'ns',
      new Date(t0 + 1000),
      false,
    ),
  ).toBeUndefined();
  const scaled = await f.autoscaler.evaluate(f.pool, 'ns', new Date(t0 + 2000), false);
  expect(f.scales).toEqual([
    {
      group: 'streamcube.io',
      version: 'v1alpha1',
      namespace: 'ns',
      plural: 'receiverpools',
      name: 'p',
      body: { metadata: { resourceVersion: '7' }, spec: { replicas: 4 } },
      fieldManager: 'streamcube-operator',
    },
  ]);
  expect(f.events).toEqual([
    'Normal ScaledOut: scaled out from 2 to 4 sets: 960 events behind over 2 sets (480 per set), above the target 100 per set for 2s (scaleOutAfter 2s)',
  ]);
  expect(scaled).toMatchObject({
    desiredSets: 4,
    // A new size: no run of looks at it yet.
    aboveTargetSince: null,
    lastScaleTime: '2026-01-01T00:00:02.000Z',
    lastDecision: { action: 'ScaleOut', reason: 'AboveTarget' },
    lastScale: {
      action: 'ScaleOut',
      fromSets: 2,
      toSets: 4,
      time: '2026-01-01T00:00:02.000Z',
    },
  });
  // The cache still shows 2 sets: no decision on a spec known to be old.
  expect(await f.autoscaler.evaluate(f.pool, 'ns', new Date(t0 + 3000), false)).toBeUndefined();
  expect(f.scales).toHaveLength(1);
});

test('another writer changing spec.sets starts the cooldown; a spec.sets above maxSets is clamped', async () => {
  const f = fixture({ minSets: 1, maxSets: 3, targetLagPerSet: 100, scaleOutAfter: '1s' }, 3);
  const t0 = Date.parse('2026-01-01T00:00:00Z');
  const status = await f.autoscaler.evaluate(f.pool, 'ns', new Date(t0), false);
  const changed = {
    ...f.pool,
    spec: { ...f.pool.spec, sets: 2 },
    status: { autoscale: status as never },
  };
  expect(await f.autoscaler.evaluate(changed, 'ns', new Date(t0 + 1000), false)).toMatchObject({
    desiredSets: 2,
    lastScaleTime: '2026-01-01T00:00:01.000Z',
    lastDecision: {
      action: 'Hold',
      reason: 'SetsChanged',
      message: 'spec.sets changed from 3 to 2 by another writer: cooldown 180s from now',
    },
  });
  const tooMany = { ...f.pool, spec: { ...f.pool.spec, sets: 9 } };
  await f.autoscaler.evaluate(tooMany, 'ns', new Date(t0 + 2000), false);
  expect(f.events).toEqual([
    'Warning SetsClamped: spec.sets 9 is above spec.autoscale.maxSets 3: set to 3',
  ]);
});

test('without spec.autoscale nothing is looked at, and a status.autoscale left is removed', async () => {
  const f = fixture(undefined);
  expect(await f.autoscaler.evaluate(f.pool, 'ns', new Date(), false)).toBeUndefined();
  const withStatus = { ...f.pool, status: { autoscale: {} as never } };
  expect(await f.autoscaler.evaluate(withStatus, 'ns', new Date(), false)).toBeNull();
});

test("two pools keep their own cubes' last positions: a row vanishing on one stays counted", async () => {
  let cubes = [
    cube('on-p', { pool: 'p', assignment: { 'p-0': [0] }, positions: { 0: '10' } }),
    cube('on-q', { pool: 'q', assignment: { 'q-0': [0] }, positions: { 0: '10' } }),
  ];
  const autoscaler = new PoolAutoscaler({
    cubesUsing: () => cubes,
    highWatermarks: () => Promise.resolve(hw([[0, 110n]])),
    scaleApi: { patchNamespacedCustomObjectScale: () => Promise.resolve({}) },
    events: { record: () => undefined } as unknown as EventRecorder,
    logger: silentLogger as never,
  });
  const pool = (name: string): ReceiverPool => ({
    ...fixture({ minSets: 1, maxSets: 2, targetLagPerSet: 1000 }, 1).pool,
    metadata: { name, namespace: 'ns', uid: `uid-${name}` },
  });
  await autoscaler.evaluate(pool('p'), 'ns', new Date(0), false);
  await autoscaler.evaluate(pool('q'), 'ns', new Date(0), false);
  // p's cube's owner stops answering: its row goes.
  cubes = [cube('on-p', { pool: 'p', assignment: { 'p-0': [0] } }), cubes[1]!];
  expect(await autoscaler.evaluate(pool('q'), 'ns', new Date(1000), false)).toMatchObject({
    totalLag: 100,
  });
  expect(await autoscaler.evaluate(pool('p'), 'ns', new Date(1000), false)).toMatchObject({
    totalLag: 100,
    unknown: null,
  });
});

test('a gap of more than three resyncs between looks (not leading meanwhile) starts the wait afresh', async () => {
  const f = fixture({ minSets: 2, maxSets: 4, targetLagPerSet: 100, scaleOutAfter: '5s' }, 2, 1000);
  f.setHigh(250n);
  const t0 = Date.parse('2026-01-01T00:00:00Z');
  await f.autoscaler.evaluate(f.pool, 'ns', new Date(t0), false);
  const after = await f.autoscaler.evaluate(f.pool, 'ns', new Date(t0 + 10_000), false);
  expect(after).toMatchObject({
    aboveTargetSince: '2026-01-01T00:00:10.000Z',
    lastDecision: { action: 'Hold', reason: 'AboveTarget' },
  });
  expect(f.scales).toEqual([]);
});
