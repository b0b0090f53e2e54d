// The pool autoscaler against the real API server and broker: a cube on pool `auto` (two sets,
// their receivers processes standing for the StatefulSets' pods) falls behind for real when a
// burst is produced while its receivers are frozen (SIGSTOP); the operator, reading the brokers'
// high watermarks against the positions the cube's status recorded, scales the pool out through
// the scale subresource with a ScaledOut Event naming the figures; once the receivers are thawed
// and caught up, it scales back in to minSets after scaleInAfter (ScaledIn), and the Draining sets
// go by the usual path. A kubectl scale above maxSets is clamped; a suspended cube (whose status
// lag is not refreshed) holds the scale-in instead of passing for caught up. The operator has the
// chart's rights plus the scale subresource.
import { setTimeout as sleep } from 'node:timers/promises';
import { group, plural, version, type ReceiverPoolSpecInput } from '../../src/api/receiver-pool.ts';
import { mergePatch } from '../../src/kubernetes/cube-api.ts';
import { kubectl } from '../support/cluster.ts';
import { makeEvents, produce } from '../support/events.ts';
import { useOperatorStack } from '../support/operator-stack.ts';
import {
  createPool,
  expectAutoscaleInCrd,
  getPool,
  poolApis,
  poolEvents,
  poolSeries,
  poolSpec,
  useChartRightsOperator,
  waitForPool,
} from '../support/receiver-pools.ts';
import { waitFor } from '../support/wait.ts';

const resyncMs = 1_000;
const stack = useOperatorStack({
  name: 'pool-autoscale',
  replicaSets: ['auto-0', 'auto-1'],
  operator: false,
});
// The operator runs with the chart's rights and no others.
const operator = useChartRightsOperator(stack, resyncMs);

// A receiver left frozen would never stop.
afterAll(() => {
  for (const r of Object.values(stack.replicas).flat()) if (r.running) r.child!.kill('SIGCONT');
});

const custom = () => poolApis(stack).custom;
const waitForAuto = (what: string, check: Parameters<typeof waitForPool>[3]) =>
  waitForPool(stack, 'auto', what, check, 120_000);

const perPartition = 2_000;

test('a burst the receivers cannot keep up with scales the pool out (ScaledOut with the figures); caught up, it scales back in to minSets (ScaledIn)', async () => {
  await expectAutoscaleInCrd();
  await createPool(
    stack,
    'auto',
    poolSpec(2, 1, {
      autoscale: {
        minSets: 2,
        maxSets: 4,
        targetLagPerSet: 1_000,
        scaleOutAfter: '3s',
        scaleInAfter: '5s',
        cooldown: '5s',
      },
    }),
  );
  expect((await getPool(stack, 'auto')).spec.autoscale).toMatchObject({ maxSets: 4 });
  const topic = `pool-autoscale-${Date.now()}`;
  await stack.admin.createTopics({ topics: [{ topic, numPartitions: 4 }] });
  await stack.createCube('burst', topic, { pool: 'auto' });
  const start = Date.now();
  for (let p = 0; p < 4; p++) await produce(stack.producer, topic, p, makeEvents(p, 10, start));
  const owners = (c: { status?: { assignment?: Record<string, number[]> } }) =>
    Object.entries(c.status?.assignment ?? {})
      .filter(([, ps]) => ps.length > 0)
      .map(([rs]) => rs)
      .sort()
      .join();
  await stack.waitForSettled(
    'burst',
    (c) =>
      owners(c) === 'auto-0,auto-1' &&
      c.status?.partitions?.length === 4 &&
      c.status.partitions.every((r) => r.position === '10'),
  );
  // Caught up at minSets: the autoscaler holds, and says why.
  const calm = await waitForAuto(
    'autoscale figures',
    (p) => p.status?.autoscale?.totalLag === 0 && p.status.autoscale.cubes === 1,
  );
  expect(calm.spec.sets).toBe(2);
  expect(calm.status?.autoscale).toMatchObject({
    desiredSets: 2,
    lagPerSet: 0,
    targetLagPerSet: 1_000,
    lastDecision: { action: 'Hold', reason: 'WithinTarget' },
  });

  // Frozen receivers, and 2,000 events more per partition: 8,000 behind, 4,000 per set.
  const frozen = Object.values(stack.replicas).flat();
  for (const r of frozen) r.child!.kill('SIGSTOP');
  try {
    for (let p = 0; p < 4; p++)
      await produce(stack.producer, topic, p, makeEvents(p, perPartition, start, 1, 1));
    const out = await waitForAuto('scaled out', (p) => p.spec.sets > 2);
    // As many sets as the lag asks for at the target (8), within maxSets (4).
    expect(out.spec.sets).toBe(4);
    const scaledOut = await waitFor('a ScaledOut Event', async () =>
      (await poolEvents(stack, 'auto')).find((e) => e.reason === 'ScaledOut'),
    );
    expect(scaledOut.type).toBe('Normal');
    expect(scaledOut.message).toMatch(
      /^scaled out from 2 to 4 sets: 8000 events behind over 2 sets \(4000 per set\), above the target 1000 per set for \d+s \(scaleOutAfter 3s\)$/,
    );
    // Written by the operator's field manager through the scale subresource.
    expect(
      out.metadata.managedFields?.some(
        (f) => f.manager === 'streamcube-operator' && f.subresource === 'scale',
      ),
    ).toBe(true);
    // Kept in status.autoscale.lastScale until the next change (lastDecision moves on to Hold).
    const status = await waitForAuto(
      'status.autoscale.lastScale',
      (p) => p.status?.autoscale?.lastScale?.action === 'ScaleOut',
    );
    expect(status.status?.autoscale).toMatchObject({
      desiredSets: 4,
      lastScale: { fromSets: 2, toSets: 4, message: scaledOut.message },
    });
  } finally {
    for (const r of frozen) r.child!.kill('SIGCONT');
  }

  // Thawed, the receivers catch up; the pool scales in to minSets once comfortably below.
  await stack.waitForCube('burst', 'caught up', (c) =>
    (c.status?.partitions ?? []).every((r) => r.position === String(10 + perPartition)),
  );
  // Usually in one step (4 → 2, nothing behind); a slow catch-up may make it 4 → 3 → 2.
  const back = await waitForAuto(
    'scaled back in to 2',
    (p) => p.spec.sets === 2 && p.status?.autoscale?.lastScale?.toSets === 2,
  );
  // Events are written in the background: the last one's message may land after the status.
  const scaledIn = await waitFor('the ScaledIn Event of the last change', async () =>
    (await poolEvents(stack, 'auto')).find(
      (e) => e.reason === 'ScaledIn' && e.message === back.status?.autoscale?.lastScale?.message,
    ),
  );
  expect(scaledIn.message).toMatch(
    /^scaled in from [34] to 2 sets: \d+ events behind over [34] sets \(\d+ per set\), \d+ per set with one set fewer, below 50% of the target 1000 \(500\) for \d+s \(scaleInAfter 5s\)$/,
  );
  expect(back.status?.autoscale?.lastScale).toMatchObject({
    action: 'ScaleIn',
    toSets: 2,
    message: scaledIn.message,
  });
  // The sets made by the scale-out were never used: Draining, then removed.
  await waitForAuto(
    'two sets left',
    (p) => p.status?.replicas === 2 && p.status.sets?.every((s) => s.state === 'Active') === true,
  );
  const series = (metric: string) => poolSeries(stack, operator().port, 'auto', metric);
  const ins = (scaledIn.count ?? 1).toString();
  expect(await series('streamcube_pool_autoscale_decisions_total')).toEqual([
    'streamcube_pool_autoscale_decisions_total{pool="auto",direction="out"} 1',
    `streamcube_pool_autoscale_decisions_total{pool="auto",direction="in"} ${ins}`,
    'streamcube_pool_autoscale_decisions_total{pool="auto",direction="clamp"} 0',
  ]);
  expect(await series('streamcube_pool_autoscale_target_lag_per_set')).toEqual([
    'streamcube_pool_autoscale_target_lag_per_set{pool="auto"} 1000',
  ]);
  expect(await series('streamcube_pool_autoscale_desired_sets')).toEqual([
    'streamcube_pool_autoscale_desired_sets{pool="auto"} 2',
  ]);
  // Settled at minSets after the cooldown: the pool's status is not written at every pass.
  await waitForAuto(
    'holding within the target',
    (p) => p.status?.autoscale?.lastDecision.reason === 'WithinTarget',
  );
  const settled = (await getPool(stack, 'auto')).metadata.resourceVersion;
  await sleep(3 * resyncMs);
  expect((await getPool(stack, 'auto')).metadata.resourceVersion).toBe(settled);
}, 240_000);

test('kubectl scale outside [minSets, maxSets] is clamped back (Warning SetsClamped)', async () => {
  // The autoscaler's guard: a scale patch naming a resourceVersion the pool has moved past is
  // refused (409), so its write never overwrites one made since it read the pool.
  const stale = await custom()
    .patchNamespacedCustomObjectScale(
      {
        group,
        version,
        plural,
        namespace: stack.namespace,
        name: 'auto',
        body: { metadata: { resourceVersion: '1' }, spec: { replicas: 3 } },
      },
      mergePatch,
    )
    .then(
      () => undefined,
      (e: unknown) => e as { code: number },
    );
  expect(stale?.code).toBe(409);
  await custom().patchNamespacedCustomObjectScale(
    {
      group,
      version,
      plural,
      namespace: stack.namespace,
      name: 'auto',
      body: { spec: { replicas: 9 } },
    },
    mergePatch,
  );
  await waitForAuto('clamped to 4', (p) => p.spec.sets === 4);
  const clamped = await waitFor('a SetsClamped Event', async () =>
    (await poolEvents(stack, 'auto')).find((e) => e.reason === 'SetsClamped'),
  );
  expect(clamped).toMatchObject({
    type: 'Warning',
    message: 'spec.sets 9 is above spec.autoscale.maxSets 4: set to 4',
  });
});

test('a suspended cube (its status not refreshed) holds the scale-in: listed as unknown, LagUnknown; resumed, the pool scales in', async () => {
  // After the clamp: 4 sets, nothing behind, every set but two unused.
  const suspend = (value: boolean) =>
    custom().patchNamespacedCustomObject(
      {
        group,
        version,
        plural: 'cubeassignments',
        namespace: stack.namespace,
        name: 'burst',
        body: { spec: { suspend: value } },
      },
      mergePatch,
    );
  await suspend(true);
  const held = await waitForAuto(
    'LagUnknown',
    (p) => p.status?.autoscale?.lastDecision.reason === 'LagUnknown',
  );
  expect(held.spec.sets).toBe(4);
  expect(held.status?.autoscale?.unknown).toEqual([`${stack.namespace}/burst (suspended)`]);
  expect(held.status?.autoscale?.lastDecision.message).toBe(
    `0 events behind over 4 sets (0 per set); no scale-in while figures are unknown; not known: ${stack.namespace}/burst (suspended)`,
  );
  await suspend(false);
  const back = await waitForAuto('scaled in to 2', (p) => p.spec.sets === 2);
  expect(back.status?.autoscale?.unknown).toBeUndefined();
  // kubectl get -o wide shows what the autoscaler wants and the lag per set it last wrote.
  const wide = await kubectl('get', 'receiverpool', 'auto', '-n', stack.namespace, '-o', 'wide');
  const [header, row] = wide
    .trim()
    .split('\n')
    .map((l) => l.trim().split(/\s{2,}/));
  const column = (name: string) => row?.[header!.indexOf(name)];
  expect([column('DESIRED'), column('LAG/SET')]).toEqual(['2', '0']);
});

test('kubectl explain describes spec.autoscale', async () => {
  const explained = await kubectl('explain', 'receiverpool.spec.autoscale.targetLagPerSet');
  expect(explained.replace(/\s+/g, ' ')).toContain('Events behind per set the pool aims at');
  expect(await kubectl('explain', 'rpool.status.autoscale.lastDecision.action')).toMatch(
    /ScaleOut, ScaleIn, Clamp/,
  );
});

test('bad spec.autoscale settings are refused by the API server, naming the field', async () => {
  for (const [autoscale, message] of [
    [
      { minSets: 3, maxSets: 2, targetLagPerSet: 1 },
      /spec\.autoscale\.minSets: Invalid value.*must be at most spec\.autoscale\.maxSets/,
    ],
    [
      { maxSets: 2, targetLagPerSet: 1, scaleOutAfter: '0s' },
      /spec\.autoscale\.scaleOutAfter: Invalid value.*must be above 0s/,
    ],
    [{ maxSets: 2 }, /spec\.autoscale\.targetLagPerSet: Required value/],
    [
      { maxSets: 101, targetLagPerSet: 1 },
      /spec\.autoscale\.maxSets: Invalid value: 101: .*less than or equal to 100/,
    ],
    [
      { maxSets: 2, targetLagPerSet: 1, scaleInBelowPercent: 95 },
      /spec\.autoscale\.scaleInBelowPercent: Invalid value: 95: .*less than or equal to 90/,
    ],
    [{ maxSets: 2, targetLagPerSet: 0 }, /spec\.autoscale\.targetLagPerSet: Invalid value: 0/],
  ] as const) {
    const error = await createPool(stack, 'refused', {
      sets: 1,
      image: 'i',
      storage: { size: '1Gi' },
      deepStorage: { claimName: 'd' },
      receiver: { adminToken: { name: 'a' }, readToken: { name: 'r' } },
      // Some are not even of the type: the API server is what refuses them.
      autoscale: autoscale as ReceiverPoolSpecInput['autoscale'],
    }).then(
      () => undefined,
      (e: unknown) => e as { code: number; body: unknown },
    );
    expect(error?.code).toBe(422);
    expect(JSON.stringify(error?.body)).toMatch(message);
  }
});
