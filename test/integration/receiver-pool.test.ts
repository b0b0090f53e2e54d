// ReceiverPool against the real API server: the operator renders each set (StatefulSet, headless
// Service, PDB) owned by the pool, `kubectl scale` sets the number of sets, edits and deletions of
// a set are healed, a scale-in waits until no cube uses the Draining set, a cube on a pool
// follows it, sets adopted by spec.setNames keep their names, and bad pools and cubes are refused by the API server with the field named. The operator has the chart's rights, no more.
// No kubelet runs: pods never exist, and the StatefulSets' Ready replicas are written through
// their status subresource.
import { setTimeout as sleep } from 'node:timers/promises';
import { ApiException, type V1StatefulSet } from '@kubernetes/client-node';
import { group, version, type ReceiverPoolSpecInput } from '../../src/api/receiver-pool.ts';
import { mergePatch } from '../../src/kubernetes/cube-api.ts';
import { kubectl } from '../support/cluster.ts';
import { useOperatorStack } from '../support/operator-stack.ts';
import {
  createPool,
  getPool,
  orUndefined,
  poolApis,
  poolCondition,
  poolEvents,
  poolSeries,
  poolSpec,
  scalePool,
  statefulSet,
  useChartRightsOperator,
  waitForPool,
} from '../support/receiver-pools.ts';
import { waitFor } from '../support/wait.ts';

/** The operator's --resync: how often a stable pool is looked at again (and its sets applied). */
const resyncMs = 1_000;
// Receivers of pool `follow`'s two sets (no kubelet: processes and Ready pods standing for the
// StatefulSets' pods), for a cube on the pool.
const stack = useOperatorStack({
  name: 'receiver-pool',
  replicaSets: ['follow-0', 'follow-1'],
  operator: false,
});

// The operator runs with the chart's rights and no others.
const operator = useChartRightsOperator(stack, resyncMs);

const spec = (sets: number, more: Partial<ReceiverPoolSpecInput> = {}): ReceiverPoolSpecInput =>
  poolSpec(sets, 2, more);
const apis = () => poolApis(stack);

/** What the StatefulSet controller would write once its pods are Ready. */
async function setReadyReplicas(name: string, ready: number): Promise<void> {
  await apis().apps.patchNamespacedStatefulSetStatus(
    {
      name,
      namespace: stack.namespace,
      body: { status: { replicas: 2, readyReplicas: ready, availableReplicas: ready } },
    },
    mergePatch,
  );
}

const pool = 'pool';

test('each set is a StatefulSet, headless Service and PDB <pool>-<i>, owned by the pool and labelled with its set', async () => {
  await createPool(stack, pool, spec(2));
  const created = await getPool(stack, pool);
  for (const name of ['pool-0', 'pool-1']) {
    const sts = await waitFor(`StatefulSet ${name}`, () => statefulSet(stack, name));
    const service = await apis().core.readNamespacedService({ name, namespace: stack.namespace });
    const budget = await apis().policy.readNamespacedPodDisruptionBudget({
      name,
      namespace: stack.namespace,
    });
    const labels = { 'streamcube.io/pool': pool, 'streamcube.io/replica-set': name };
    for (const o of [sts, service, budget]) {
      expect(o.metadata?.labels).toMatchObject(labels);
      expect(o.metadata?.ownerReferences).toEqual([
        {
          apiVersion: `${group}/${version}`,
          kind: 'ReceiverPool',
          name: pool,
          uid: created.metadata.uid,
          controller: true,
        },
      ]);
      // Applied server-side, under the operator's field manager.
      expect(o.metadata?.managedFields?.map((f) => [f.manager, f.operation])).toContainEqual([
        'streamcube-operator',
        'Apply',
      ]);
    }
    expect(sts.spec?.template.metadata?.labels).toMatchObject(labels);
    expect(sts.spec?.replicas).toBe(2);
    expect(sts.spec?.template.spec?.containers[0]?.args).toContain(`--replica-set=${name}`);
    expect(service.spec?.clusterIP).toBe('None');
    expect(budget.spec?.maxUnavailable).toBe(1);
  }
  const notReady = await waitForPool(
    stack,
    pool,
    'both sets, not Ready',
    (p) => p.status?.replicas === 2,
  );
  expect(notReady.status?.sets?.map((s) => [s.name, s.state, s.readyReplicas])).toEqual([
    ['pool-0', 'Active', 0],
    ['pool-1', 'Active', 0],
  ]);
  expect(poolCondition(notReady, 'Ready')).toMatchObject({
    status: 'False',
    reason: 'ReceiversNotReady',
  });
  await setReadyReplicas('pool-0', 2);
  await setReadyReplicas('pool-1', 2);
  const ready = await waitForPool(
    stack,
    pool,
    'Ready',
    (p) => poolCondition(p, 'Ready')?.status === 'True',
  );
  expect(ready.status).toMatchObject({ readySets: 2, observedGeneration: 1 });
  expect(poolCondition(ready, 'Degraded')).toMatchObject({ status: 'False' });
  // Stable: no status write, and no object of a set changed, over three resyncs.
  const versions = async (): Promise<(string | undefined)[]> => [
    (await getPool(stack, pool)).metadata.resourceVersion,
    (await statefulSet(stack, 'pool-0'))?.metadata?.resourceVersion,
    (await statefulSet(stack, 'pool-1'))?.metadata?.resourceVersion,
  ];
  const settled = await versions();
  await sleep(3 * resyncMs);
  expect(await versions()).toEqual(settled);
  // The printer columns read these.
  const row = await kubectl('get', 'receiverpool', pool, '-n', stack.namespace, '--no-headers');
  expect(row.trim().split(/\s+/).slice(0, 5)).toEqual([pool, '2', '2', '2', 'True']);
});

test('kubectl scale receiverpool/<pool> --replicas=3 adds set <pool>-2 (the scale subresource)', async () => {
  await scalePool(stack, pool, 3);
  expect((await getPool(stack, pool)).spec.sets).toBe(3);
  await waitFor('StatefulSet pool-2', () => statefulSet(stack, 'pool-2'));
  await waitForPool(stack, pool, 'three sets', (p) => p.status?.replicas === 3);
  const scale = JSON.parse(
    await kubectl(
      'get',
      `receiverpool/${pool}`,
      '-n',
      stack.namespace,
      '--subresource=scale',
      '-o',
      'json',
    ),
  ) as { spec: { replicas: number }; status: { replicas: number; selector: string } };
  expect(scale.spec.replicas).toBe(3);
  expect(scale.status).toEqual({ replicas: 3, selector: `streamcube.io/pool=${pool}` });
});

test('drift is healed: a deleted StatefulSet or Service comes back, an edited replica count is set back', async () => {
  const before = await statefulSet(stack, 'pool-0');
  await apis().apps.deleteNamespacedStatefulSet({ name: 'pool-0', namespace: stack.namespace });
  await apis().core.deleteNamespacedService({ name: 'pool-1', namespace: stack.namespace });
  await apis().apps.patchNamespacedStatefulSet(
    { name: 'pool-2', namespace: stack.namespace, body: { spec: { replicas: 5 } } },
    mergePatch,
  );
  await waitFor('StatefulSet pool-0 made again', async () => {
    const sts = await statefulSet(stack, 'pool-0');
    return sts !== undefined && sts.metadata?.uid !== before?.metadata?.uid;
  });
  await waitFor('Service pool-1 made again', () =>
    orUndefined(apis().core.readNamespacedService({ name: 'pool-1', namespace: stack.namespace })),
  );
  await waitFor(
    'pool-2 back at 2 replicas',
    async () => (await statefulSet(stack, 'pool-2'))?.spec?.replicas === 2,
  );
});

test('scale-in: a Draining set stays while a cube lists it (Degraded SetsInUse, an Event), and goes with its claims once the cube leaves it', async () => {
  await stack.createCube('uses-pool-2', 'receiver-pool-topic', {
    replicaSets: ['pool-0', 'pool-2'],
  });
  // A claim as the StatefulSet controller would make it (labelled with the set's selector).
  await apis().core.createNamespacedPersistentVolumeClaim({
    namespace: stack.namespace,
    body: {
      metadata: {
        name: 'data-pool-2-0',
        labels: { 'streamcube.io/pool': pool, 'streamcube.io/replica-set': 'pool-2' },
      },
      spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
    },
  });
  await scalePool(stack, pool, 2);
  const held = await waitForPool(
    stack,
    pool,
    'Degraded SetsInUse',
    (p) => poolCondition(p, 'Degraded')?.reason === 'SetsInUse',
  );
  expect(poolCondition(held, 'Degraded')?.message).toBe(
    `set pool-2 is Draining but used by ${stack.namespace}/uses-pool-2 (listed)`,
  );
  expect(held.status?.sets?.map((s) => [s.name, s.state])).toEqual([
    ['pool-0', 'Active'],
    ['pool-1', 'Active'],
    ['pool-2', 'Draining'],
  ]);
  expect(held.status?.replicas).toBe(3);
  expect(await statefulSet(stack, 'pool-2')).toBeDefined();
  const events = await waitFor('a SetsInUse Event', async () => {
    const list = await poolEvents(stack, pool);
    return list.some((e) => e.reason === 'SetsInUse') ? list : undefined;
  });
  expect(events.find((e) => e.reason === 'SetsInUse')?.type).toBe('Warning');

  await apis().custom.patchNamespacedCustomObject(
    {
      group,
      version,
      plural: 'cubeassignments',
      namespace: stack.namespace,
      name: 'uses-pool-2',
      body: { spec: { replicaSets: ['pool-0'] } },
    },
    mergePatch,
  );
  await waitFor(
    'StatefulSet pool-2 deleted',
    async () => (await statefulSet(stack, 'pool-2')) === undefined,
  );
  const after = await waitForPool(
    stack,
    pool,
    'two sets, not Degraded',
    (p) => p.status?.replicas === 2 && poolCondition(p, 'Degraded')?.status === 'False',
  );
  expect(after.status?.sets?.map((s) => s.name)).toEqual(['pool-0', 'pool-1']);
  expect(
    await orUndefined(
      apis().core.readNamespacedService({ name: 'pool-2', namespace: stack.namespace }),
    ),
  ).toBeUndefined();
  expect(
    await orUndefined(
      apis().policy.readNamespacedPodDisruptionBudget({
        name: 'pool-2',
        namespace: stack.namespace,
      }),
    ),
  ).toBeUndefined();
  // retainOnScaleIn: Delete. The claim protection finalizer keeps a deleted claim until no pod uses
  // it, which only the controller manager (not running here) notices: deleted means Terminating.
  const claim = await orUndefined(
    apis().core.readNamespacedPersistentVolumeClaim({
      name: 'data-pool-2-0',
      namespace: stack.namespace,
    }),
  );
  expect(claim === undefined || claim.metadata?.deletionTimestamp !== undefined).toBe(true);
  const removed = await poolEvents(stack, pool);
  expect(removed.find((e) => e.reason === 'SetRemoved')?.message).toBe(
    'set pool-2 removed: no CubeAssignment uses it; its data claims were deleted (1) (spec.storage.retainOnScaleIn: Delete)',
  );
});

test("setNames: the first sets keep the chart's older names (set rs-a, objects <pool>-rs-a), later ones <pool>-<index>; an adopted set held by a cube drains and goes by its own name", async () => {
  const adopted = 'adopted';
  await stack.createCube('uses-rs-b', 'receiver-pool-topic', { replicaSets: ['rs-b'] });
  await createPool(stack, adopted, spec(3, { setNames: ['rs-a', 'rs-b'] }));
  for (const [name, set] of [
    ['adopted-rs-a', 'rs-a'],
    ['adopted-rs-b', 'rs-b'],
    ['adopted-2', 'adopted-2'],
  ] as const) {
    const sts = await waitFor(`StatefulSet ${name}`, () => statefulSet(stack, name));
    expect(sts.spec?.selector.matchLabels).toEqual({
      'streamcube.io/pool': adopted,
      'streamcube.io/replica-set': set,
    });
    expect(sts.spec?.serviceName).toBe(name);
    expect(sts.spec?.template.spec?.containers[0]?.args).toContain(`--replica-set=${set}`);
    await apis().core.readNamespacedService({ name, namespace: stack.namespace });
  }
  const listed = await waitForPool(
    stack,
    adopted,
    'three sets',
    (p) => p.status?.sets?.length === 3,
  );
  expect(listed.status?.sets?.map((s) => s.name)).toEqual(['rs-a', 'rs-b', 'adopted-2']);
  // Down to one set: adopted-2 goes, rs-b is held while the cube lists it.
  await scalePool(stack, adopted, 1);
  await waitFor(
    'StatefulSet adopted-2 deleted',
    async () => (await statefulSet(stack, 'adopted-2')) === undefined,
  );
  const held = await waitForPool(
    stack,
    adopted,
    'rs-b held',
    (p) => poolCondition(p, 'Degraded')?.reason === 'SetsInUse' && p.status?.sets?.length === 2,
  );
  expect(poolCondition(held, 'Degraded')?.message).toBe(
    `set rs-b is Draining but used by ${stack.namespace}/uses-rs-b (listed)`,
  );
  expect(await statefulSet(stack, 'adopted-rs-b')).toBeDefined();
  await apis().custom.deleteNamespacedCustomObject({
    group,
    version,
    plural: 'cubeassignments',
    namespace: stack.namespace,
    name: 'uses-rs-b',
  });
  await waitFor(
    'StatefulSet adopted-rs-b deleted',
    async () => (await statefulSet(stack, 'adopted-rs-b')) === undefined,
  );
  const removed = await waitFor('a SetRemoved Event for rs-b', async () => {
    const list = await poolEvents(stack, adopted);
    return list.find((e) => e.reason === 'SetRemoved' && e.message?.startsWith('set rs-b '));
  });
  expect(removed.type).toBe('Normal');
  expect(await statefulSet(stack, 'adopted-rs-a')).toBeDefined();
});

test.each<[string, string, ReceiverPoolSpecInput, RegExp]>([
  [
    'setNames with a name twice',
    'twice',
    spec(2, { setNames: ['rs-a', 'rs-a'] }),
    /spec\.setNames\[1\]: Duplicate value/,
  ],
  [
    'setNames too long for <pool>-<name>',
    'p'.repeat(40),
    spec(1, { setNames: ['n'.repeat(12)] }),
    /spec\.setNames: Invalid value: .*must be at most 52 characters/,
  ],
  [
    'a name too long for <pool>-<index>',
    'p'.repeat(50),
    spec(1),
    /metadata\.name of a ReceiverPool must be at most 49 characters/,
  ],
  ['a name with a dot (no Service name)', 'a.b', spec(1), /metadata\.name of a ReceiverPool/],
  [
    'more sets than 100',
    'too-many',
    spec(101),
    /spec\.sets: Invalid value: 101: spec\.sets in body should be less than or equal to 100/,
  ],
  ['a negative number of sets', 'negative', spec(-1), /spec\.sets/],
  [
    'a PDB that never lets a pod go (maxUnavailable 0)',
    'pdb-zero',
    spec(1, { replicas: 1, podDisruptionBudget: { maxUnavailable: 0 } }),
    /spec\.podDisruptionBudget\.maxUnavailable: Invalid value: 0/,
  ],
  [
    'a PDB that never lets a pod go (minAvailable = replicas)',
    'pdb-min',
    spec(1, { replicas: 2, podDisruptionBudget: { minAvailable: 2 } }),
    /spec\.podDisruptionBudget\.minAvailable: Invalid value: .*must be below spec\.replicas/,
  ],
  [
    'both kinds of deep storage',
    'two-stores',
    spec(1, { deepStorage: { claimName: 'x', s3: { bucket: 'bkt' } } }),
    /spec\.deepStorage needs exactly one of claimName and s3/,
  ],
  [
    'a leader Lease without a ServiceAccount',
    'lease',
    spec(1, {
      receiver: { adminToken: { name: 'a' }, readToken: { name: 'r' }, leaderLease: 'l' },
    }),
    /spec\.receiver\.leaderLease: Required value: spec\.receiver\.leaderLease needs spec\.receiver\.serviceAccountName/,
  ],
])('refused by the API server: %s', async (_, name, poolSpec, message) => {
  const error = await createPool(stack, name, poolSpec).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ApiException);
  expect((error as ApiException<string>).code).toBe(422);
  expect(JSON.stringify((error as ApiException<unknown>).body)).toMatch(message);
});

test('kubectl explain describes the fields from the CRD', async () => {
  const explained = await kubectl('explain', 'receiverpool.spec.storage.retainOnScaleIn');
  expect(explained.replace(/\s+/g, ' ')).toContain(
    "What becomes of a set's data claims when the set is removed",
  );
  expect(await kubectl('explain', 'rpool.status.sets.state')).toMatch(/Active .*Draining/s);
});

test('zero sets is a valid pool: nothing rendered, Ready', async () => {
  await createPool(stack, 'empty', spec(0));
  const empty = await waitForPool(
    stack,
    'empty',
    'Ready',
    (p) => poolCondition(p, 'Ready')?.status === 'True',
  );
  expect(empty.status).toMatchObject({ replicas: 0, readySets: 0, sets: [] });
  const sets: V1StatefulSet[] = (
    await apis().apps.listNamespacedStatefulSet({
      namespace: stack.namespace,
      labelSelector: 'streamcube.io/pool=empty',
    })
  ).items;
  expect(sets).toEqual([]);
});

test('a cube on a pool (spec.pool) is placed on its Active sets and moves off a set the pool scales in, which then goes', async () => {
  await createPool(stack, 'follow', spec(2));
  const topic = `receiver-pool-follow-${Date.now()}`;
  await stack.admin.createTopics({ topics: [{ topic, numPartitions: 4 }] });
  await stack.createCube('on-pool', topic, { pool: 'follow' });
  const sets = (c: { status?: { assignment?: Record<string, number[]> } }): string[] =>
    Object.entries(c.status?.assignment ?? {})
      .filter(([, partitions]) => partitions.length > 0)
      .map(([rs]) => rs)
      .sort();
  await stack.waitForSettled('on-pool', (c) => sets(c).join() === 'follow-0,follow-1');
  await scalePool(stack, 'follow', 1);
  const moved = await stack.waitForSettled('on-pool', (c) => sets(c).join() === 'follow-0');
  expect(moved.status?.assignment?.['follow-0']).toEqual([0, 1, 2, 3]);
  await waitFor(
    'StatefulSet follow-1 deleted',
    async () => (await statefulSet(stack, 'follow-1')) === undefined,
  );
  const pool = await waitForPool(stack, 'follow', 'one set', (p) => p.status?.replicas === 1);
  expect(pool.status?.sets?.map((s) => s.name)).toEqual(['follow-0']);
  const series = (metric: string) => poolSeries(stack, operator().port, 'follow', metric);
  expect(await series('streamcube_pool_sets')).toEqual([
    'streamcube_pool_sets{pool="follow",state="Active"} 1',
    'streamcube_pool_sets{pool="follow",state="Draining"} 0',
  ]);
  expect(await series('streamcube_pool_sets_removed_total')).toEqual([
    'streamcube_pool_sets_removed_total{pool="follow"} 1',
  ]);
});

test('a cube naming a pool that does not exist keeps its partitions: Degraded PoolNotFound, naming the field', async () => {
  const topic = `receiver-pool-nowhere-${Date.now()}`;
  await stack.admin.createTopics({ topics: [{ topic, numPartitions: 1 }] });
  await stack.createCube('on-no-pool', topic, { pool: 'nowhere' });
  const cube = await stack.waitForCube(
    'on-no-pool',
    'Degraded PoolNotFound',
    (c) => c.status?.conditions?.find((x) => x.type === 'Degraded')?.reason === 'PoolNotFound',
  );
  expect(cube.status?.conditions?.find((x) => x.type === 'Degraded')?.message).toContain(
    `spec.pool names ReceiverPool ${stack.namespace}/nowhere, which does not exist`,
  );
  expect(cube.status?.assignment ?? {}).toEqual({});
});

test.each<[string, object, RegExp]>([
  [
    'both replicaSets and pool',
    { replicaSets: ['a'], pool: 'p' },
    /spec needs exactly one of replicaSets and pool/,
  ],
  ['neither replicaSets nor pool', {}, /spec needs exactly one of replicaSets and pool/],
  [
    'pins with a pool',
    { pool: 'p', pins: { 'p-0': [0] } },
    /spec\.pins: Invalid value.*a cube on a pool has no pins/,
  ],
])('a cube with %s is refused by the API server', async (_, sets, message) => {
  const error = await apis()
    .custom.createNamespacedCustomObject({
      group,
      version,
      plural: 'cubeassignments',
      namespace: stack.namespace,
      body: {
        apiVersion: `${group}/${version}`,
        kind: 'CubeAssignment',
        metadata: { name: 'refused' },
        spec: {
          source: { brokers: ['k:9092'], topic: 't' },
          schema: {
            timestampField: 'ts',
            dimensions: [],
            measures: [{ name: 'n', function: 'count' }],
            window: '1m',
          },
          ...sets,
        },
      },
    })
    .then(
      () => undefined,
      (e: unknown) => e,
    );
  expect((error as ApiException<unknown>).code).toBe(422);
  expect(JSON.stringify((error as ApiException<unknown>).body)).toMatch(message);
});
