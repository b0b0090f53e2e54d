// The pool reconciler over in-memory caches and a fake API edge: what it applies, deletes and
// writes, and that a pass over an unchanged pool sends nothing.
import type { V1PodDisruptionBudget, V1Service, V1StatefulSet } from '@kubernetes/client-node';
import type { CubeAssignment } from '../../src/api/cube-assignment.ts';
import { receiverPoolSpec, type ReceiverPool } from '../../src/api/receiver-pool.ts';
import type { EventRecorder } from '../../src/operator/events.ts';
import { createPoolReconciler, setsRemoved } from '../../src/operator/pool/reconciler.ts';
import type { SetObjects } from '../../src/operator/pool/render.ts';
import type { SetWorkloads } from '../../src/operator/pool/workloads.ts';
import { silentLogger } from '../../src/operator/runtime/logger.ts';

function fixture(
  sets: number,
  cubes: CubeAssignment[] = [],
  autoscale?: object,
  setNames?: string[],
) {
  const pool: ReceiverPool = {
    apiVersion: 'streamcube.io/v1alpha1',
    kind: 'ReceiverPool',
    metadata: { name: 'p', namespace: 'ns', uid: 'pool-uid', generation: 1 },
    spec: receiverPoolSpec.parse({
      sets,
      ...(setNames ? { setNames } : {}),
      image: 'i',
      storage: { size: '1Gi' },
      deepStorage: { claimName: 'd' },
      receiver: { adminToken: { name: 'a' }, readToken: { name: 'r' } },
      ...(autoscale ? { autoscale } : {}),
    }),
  };
  /** The objects "in the caches", by name. */
  const statefulSets = new Map<string, V1StatefulSet>();
  const services = new Map<string, V1Service>();
  const budgets = new Map<string, V1PodDisruptionBudget>();
  const calls: string[] = [];
  const statusWrites: unknown[] = [];
  const events: string[] = [];
  let refuse: string | undefined;
  const stored = <T extends { metadata?: object }>(o: T): T => ({
    ...o,
    metadata: { ...o.metadata, uid: `uid-${JSON.stringify(o.metadata).length}`, generation: 1 },
  });
  const workloads = {
    apply: (objects: SetObjects) => {
      const name = objects.statefulSet.metadata!.name!;
      calls.push(`apply ${name}`);
      if (refuse === name) return Promise.reject(new Error('spec: Forbidden'));
      const result = {
        statefulSet: stored(objects.statefulSet),
        service: stored(objects.service),
        podDisruptionBudget: stored(objects.podDisruptionBudget),
      };
      statefulSets.set(name, result.statefulSet);
      services.set(name, result.service);
      budgets.set(name, result.podDisruptionBudget);
      return Promise.resolve(result);
    },
    delete: (o: { set: string; objectName?: string }) => {
      const name = o.objectName ?? o.set;
      calls.push(`delete ${name} (set ${o.set})`);
      for (const cache of [statefulSets, services, budgets]) cache.delete(name);
      return Promise.resolve({ claimsDeleted: [] });
    },
  } as unknown as SetWorkloads;
  const reconcile = createPoolReconciler({
    getPool: () => pool,
    statefulSets: () => [...statefulSets.values()],
    services: () => [...services.values()],
    budgets: () => [...budgets.values()],
    cubesUsing: () => cubes,
    workloads,
    statusApi: {
      patchNamespacedCustomObjectStatus: (request: {
        body: { status: ReceiverPool['status'] };
      }) => {
        statusWrites.push(request.body.status);
        pool.status = request.body.status;
        return Promise.resolve({});
      },
    },
    events: {
      record: (_: unknown, type: string, reason: string) => events.push(`${type} ${reason}`),
    } as unknown as EventRecorder,
    resyncMs: 60_000,
    logger: silentLogger as never,
  });
  return {
    pool,
    statefulSets,
    calls,
    statusWrites,
    events,
    reconcile: () => reconcile('ns/p'),
    refuse: (set: string | undefined) => (refuse = set),
  };
}

test('the first pass applies every set and writes status once; a second pass sends nothing', async () => {
  const f = fixture(2);
  await f.reconcile();
  expect(f.calls).toEqual(['apply p-0', 'apply p-1']);
  expect(f.statusWrites).toHaveLength(1);
  await f.reconcile();
  expect(f.calls).toEqual(['apply p-0', 'apply p-1']);
  expect(f.statusWrites).toHaveLength(1);
  // Someone deletes a StatefulSet: only that set is applied again.
  f.statefulSets.delete('p-1');
  await f.reconcile();
  expect(f.calls).toEqual(['apply p-0', 'apply p-1', 'apply p-1']);
  expect(f.statusWrites).toHaveLength(1);
});

test('a set the API server refuses: Degraded ApplyFailed naming it, a Warning Event once', async () => {
  const f = fixture(1);
  f.refuse('p-0');
  await f.reconcile();
  await f.reconcile();
  const degraded = f.pool.status?.conditions?.find((c) => c.type === 'Degraded');
  expect(degraded).toMatchObject({
    status: 'True',
    reason: 'ApplyFailed',
    message: 'set p-0: spec: Forbidden',
  });
  expect(f.events).toEqual(['Warning ApplyFailed']);
  expect(f.statusWrites).toHaveLength(1);
});

test('scale-in: a set a cube lists is held (never deleted) until the cube leaves it', async () => {
  const listing: CubeAssignment = {
    apiVersion: 'streamcube.io/v1alpha1',
    kind: 'CubeAssignment',
    metadata: { name: 'c', namespace: 'ns' },
    spec: { replicaSets: ['p-1'] } as CubeAssignment['spec'],
  };
  const cubes = [listing];
  const f = fixture(2, cubes);
  await f.reconcile();
  f.pool.spec.sets = 1;
  await f.reconcile();
  expect(f.calls).not.toContain('delete p-1 (set p-1)');
  expect(f.pool.status?.sets?.map((s) => `${s.name} ${s.state}`)).toEqual([
    'p-0 Active',
    'p-1 Draining',
  ]);
  expect(f.events).toEqual(['Warning SetsInUse']);
  cubes.pop();
  await f.reconcile();
  expect(f.calls).toContain('delete p-1 (set p-1)');
  expect(f.events).toEqual(['Warning SetsInUse', 'Normal SetRemoved']);
  expect(f.pool.status?.sets?.map((s) => s.name)).toEqual(['p-0']);
  expect(f.pool.status?.conditions?.find((c) => c.type === 'Degraded')?.status).toBe('False');
});

test("sets removed together are named in one SetRemoved Event (one series per reason: a second Event would replace the first one's message)", async () => {
  const f = fixture(4, []);
  await f.reconcile();
  f.pool.spec.sets = 2;
  await f.reconcile();
  expect(f.calls).toEqual(expect.arrayContaining(['delete p-2 (set p-2)', 'delete p-3 (set p-3)']));
  expect(f.events).toEqual(['Normal SetRemoved']);
  const spec = (retainOnScaleIn: 'Delete' | 'Retain') =>
    ({ spec: { storage: { retainOnScaleIn } } }) as unknown as Pick<ReceiverPool, 'spec'>;
  expect(
    setsRemoved(spec('Delete'), [
      { set: 'p-2', claimsDeleted: 2 },
      { set: 'p-3', claimsDeleted: 2 },
    ]),
  ).toBe(
    'sets p-2, p-3 removed: no CubeAssignment uses them; their data claims were deleted (4) (spec.storage.retainOnScaleIn: Delete)',
  );
  expect(setsRemoved(spec('Retain'), [{ set: 'p-2', claimsDeleted: 0 }])).toBe(
    'set p-2 removed: no CubeAssignment uses it; its data claims were retained (spec.storage.retainOnScaleIn: Retain)',
  );
});

test('with spec.autoscale, a spec.sets above maxSets or below minSets is rendered clamped', async () => {
  const above = fixture(5, [], { minSets: 1, maxSets: 2, targetLagPerSet: 10 });
  await above.reconcile();
  expect(above.calls).toEqual(['apply p-0', 'apply p-1']);
  expect(above.pool.status?.sets?.map((s) => [s.name, s.state])).toEqual([
    ['p-0', 'Active'],
    ['p-1', 'Active'],
  ]);
  const below = fixture(0, [], { minSets: 2, maxSets: 3, targetLagPerSet: 10 });
  await below.reconcile();
  expect(below.calls).toEqual(['apply p-0', 'apply p-1']);
});

test('setNames: the adopted sets keep their names and objects <pool>-<name>; past them <pool>-<index>; an adopted set drains and goes by its own name', async () => {
  const cube = (replicaSets: string[]): CubeAssignment => ({
    apiVersion: 'streamcube.io/v1alpha1',
    kind: 'CubeAssignment',
    metadata: { name: 'c', namespace: 'ns' },
    spec: { replicaSets } as CubeAssignment['spec'],
  });
  const cubes = [cube(['rs-a', 'rs-b', 'p-2'])];
  const f = fixture(3, cubes, undefined, ['rs-a', 'rs-b']);
  await f.reconcile();
  expect(f.calls).toEqual(['apply p-rs-a', 'apply p-rs-b', 'apply p-2']);
  expect(f.pool.status?.sets?.map((s) => `${s.name} ${s.index}`)).toEqual([
    'rs-a 0',
    'rs-b 1',
    'p-2 2',
  ]);
  // Down to one set: rs-b (index 1) and p-2 drain, held while the cube lists them.
  f.pool.spec.sets = 1;
  await f.reconcile();
  expect(f.pool.status?.sets?.map((s) => `${s.name} ${s.state}`)).toEqual([
    'rs-a Active',
    'rs-b Draining',
    'p-2 Draining',
  ]);
  expect(f.pool.status?.conditions?.find((c) => c.type === 'Degraded')?.message).toMatch(
    /^set rs-b is Draining but used by ns\/c \(listed\); set p-2 is Draining but used by ns\/c \(listed\)$/,
  );
  cubes[0] = cube(['rs-a']);
  await f.reconcile();
  expect(f.calls.filter((c) => c.startsWith('delete'))).toEqual([
    'delete p-rs-b (set rs-b)',
    'delete p-2 (set p-2)',
  ]);
  expect(f.pool.status?.sets?.map((s) => s.name)).toEqual(['rs-a']);
});
