// The cube reconciler's dispatcher and its branches, driven through createCubeReconciler with fakes
// of its edges: the API server (merge patches applied to one stored object), receiver pods,
// receivers (every call logged), the topic's metadata and the Event recorder. Each test reads
// as: the cube and the pods as they are → what the reconcile called, wrote and answered.
import type { V1ObjectMeta, V1Pod } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import type {
  CubeAssignment,
  CubeAssignmentStatus,
  ReassignJournal,
} from '../../src/api/cube-assignment.ts';
import { cubeSpecDigest } from '../../src/api/cube.ts';
import type { Condition } from '../../src/api/conditions.ts';
import { createLogger } from '../../src/observability/logger.ts';
import {
  type CubeStatus,
  type PartitionStatus,
  cubeSummaryOf,
} from '../../src/protocol/admin-api.ts';
import { ReceiverApiError } from '../../src/protocol/client.ts';
import { createCubeReconciler, finalizer } from '../../src/operator/cube/index.ts';
import type { CubeReceiverClient } from '../../src/operator/cube/receiver-access.ts';
import type { CubeObjectsApi } from '../../src/operator/cube/status-writer.ts';
import { replicaSetLabel } from '../../src/operator/discovery.ts';
import { createOperatorMetrics } from '../../src/operator/metrics.ts';
import { OwnWrites } from '../../src/operator/own-writes.ts';
import { proposalId } from '../../src/operator/approval.ts';
import { assignRequest } from '../../src/operator/reassign/index.ts';
import { applyMergePatch, ordersCube } from '../support/cube-assignments.ts';

const resyncMs = 30_000;
const receiverPort = 8080;

/** What one fake receiver holds and how it answers. */
interface ReceiverState {
  /** Partitions of orders it holds, by state; undefined: it does not hold the cube. */
  partitions?: Record<number, PartitionStatus['state']>;
  /** The spec digest it reports (default: the cube's current one). */
  specDigest?: string;
  /** Calls (`assign`, `seal`...) that fail as an unreachable receiver would. */
  unreachable?: string[];
  /** Seal answers with a segment not handed off yet. */
  handOffPending?: boolean;
}

interface Scenario {
  object: CubeAssignment | undefined;
  /** Receiver pods by name (`rs-a-0`...): Ready unless listed in `notReady`. */
  receivers: Record<string, ReceiverState>;
  notReady?: string[];
  /** Since when those are not Ready (default: now). */
  notReadySince?: Date;
  /** The topic's partitions (default 0-3). */
  partitions?: number[];
}

function podOf(name: string, index: number, ready: boolean, since = new Date()): V1Pod {
  return {
    metadata: {
      name,
      namespace: 'shop',
      labels: { [replicaSetLabel]: name.replace(/-[0-9]+$/, '') },
    },
    status: {
      podIP: `10.0.0.${index + 1}`,
      conditions: [
        ready
          ? { type: 'Ready', status: 'True' }
          : { type: 'Ready', status: 'False', lastTransitionTime: since },
      ],
    },
  };
}

function harness(scenario: Scenario) {
  const store = { object: scenario.object ? structuredClone(scenario.object) : undefined };
  /** Receiver calls, status writes and finalizer writes, in order. */
  const log: string[] = [];
  const events: string[] = [];
  const statusWrites: Record<string, unknown>[] = [];
  const topicReads: string[] = [];
  const digest = () => cubeSpecDigest(assignRequest(store.object!, '', []));
  // Each test's own copy: the fake receivers change as they are called.
  const receivers = structuredClone(scenario.receivers);
  const names = Object.keys(receivers);
  const pods = names.map((name, i) =>
    podOf(name, i, !scenario.notReady?.includes(name), scenario.notReadySince),
  );
  const byUrl = new Map(names.map((name, i) => [`http://10.0.0.${i + 1}:${receiverPort}`, name]));

  let version = 1;
  const written = (patch: Record<string, unknown>): CubeAssignment => {
    const before = store.object!;
    store.object = {
      ...(applyMergePatch(before, patch) as CubeAssignment),
    };
    store.object.metadata = { ...store.object.metadata, resourceVersion: String(++version) };
    return structuredClone(store.object);
  };
  const api = {
    patchNamespacedCustomObjectStatus: ({
      body,
    }: {
      body: { status: Record<string, unknown> };
    }) => {
      statusWrites.push(body.status);
      log.push('write status');
      return Promise.resolve(written({ status: body.status }));
    },
    patchNamespacedCustomObject: ({
      body: { metadata },
    }: {
      body: { metadata: Pick<V1ObjectMeta, 'finalizers' | 'annotations'> };
    }) => {
      if (metadata.annotations) {
        log.push(`write annotations ${JSON.stringify(metadata.annotations)}`);
        return Promise.resolve(written({ metadata: { annotations: metadata.annotations } }));
      }
      log.push(`write finalizers [${metadata.finalizers!.join(',')}]`);
      return Promise.resolve(written({ metadata: { finalizers: metadata.finalizers } }));
    },
  } as unknown as CubeObjectsApi;

  const partitionStatus = (partition: number, state: PartitionStatus['state']) => ({
    partition,
    state,
    epoch: 1,
    position: '100',
    highWatermark: '100',
    lag: '0',
    stopOffset: null,
    watermark: null,
  });
  const statusOf = (name: string, state: ReceiverState, handOffPending = false): CubeStatus => ({
    namespace: 'shop',
    cube: 'orders',
    replicaSet: name.replace(/-[0-9]+$/, ''),
    receiver: name,
    topic: 'orders',
    specDigest: state.specDigest ?? digest(),
    partitions: Object.entries(state.partitions ?? {}).map(([p, s]) =>
      partitionStatus(Number(p), s),
    ),
    segments: [
      {
        windowStart: 0,
        windowEnd: 3_600_000,
        state: handOffPending ? 'IMMUTABLE' : 'HANDED_OFF',
        rowCount: 1,
        offsetRanges: {},
        epochs: {},
      },
    ],
    ingested: 0,
    rejected: {},
    consumer: { state: 'running', failures: 0 },
  });
  const receiverClient = (
    baseUrl: string,
    onMutation: (cube?: { namespace: string; name: string }) => void,
  ): CubeReceiverClient => {
    const name = byUrl.get(baseUrl)!;
    const state = receivers[name]!;
    const call = <T>(method: string, detail: string, answer: () => T): Promise<T> => {
      log.push(`${name} ${method}${detail ? ` ${detail}` : ''}`);
      if (state.unreachable?.includes(method))
        return Promise.reject(new TypeError(`fetch failed: ${name} unreachable`));
      let answered: T;
      try {
        answered = answer();
      } catch (error) {
        return Promise.reject(error instanceof Error ? error : new Error(String(error)));
      }
      // As the HTTP client does: a call that changes the cube has it read afresh.
      if (method !== 'status') onMutation({ namespace: 'shop', name: 'orders' });
      return Promise.resolve(answered);
    };
    const held = (): CubeStatus => {
      if (!state.partitions) throw new ReceiverApiError(404, `${name}: 404 cube orders not found`);
      return statusOf(name, state);
    };
    const list = (ps: number[]) => `[${ps.join(',')}]`;
    const client: CubeReceiverClient = {
      inNamespace: () => client,
      cubes: () =>
        Promise.resolve({
          receiver: name,
          replicaSet: name.replace(/-[0-9]+$/, ''),
          cubes: state.partitions
            ? [{ ...statusOf(name, state), segments: { active: 0, immutable: 0, handedOff: 1 } }]
            : [],
        }),
      cubeSummary: () => call('status', '', () => cubeSummaryOf(held())),
      assign: (_cube, request) =>
        call('assign', list(request.partitions.map((p) => p.partition)), () => {
          state.specDigest = undefined;
          state.partitions = {
            ...state.partitions,
            ...Object.fromEntries(request.partitions.map((p) => [p.partition, 'consuming'])),
          };
          return statusOf(name, state);
        }),
      release: (_cube, ps) =>
        call('release', list(ps), () => ({
          partitions: ps.map((p) => partitionStatus(p, 'released')),
        })),
      pause: (_cube, ps) =>
        call('pause', list(ps), () => ({
          partitions: ps.map((p) => partitionStatus(p, 'paused')),
        })),
      resume: (_cube, ps) =>
        call('resume', list(ps), () => ({
          partitions: ps.map((p) => partitionStatus(p, 'consuming')),
        })),
      drain: (_cube, request) =>
        call('drain', JSON.stringify(request.stopOffsets), () => ({ done: true, partitions: [] })),
      seal: () => call('seal', '', () => statusOf(name, state, state.handOffPending)),
      unassign: (cube) =>
        call('unassign', '', () => {
          delete state.partitions;
          return { namespace: 'shop', cube, unassigned: true as const };
        }),
      fence: () => call('fence', '', () => ({ committed: {}, records: 0 })),
    };
    return client;
  };

  const reconcile = createCubeReconciler({
    custom: api,
    getCube: () => (store.object ? structuredClone(store.object) : undefined),
    listPods: () => pods,
    receiverToken: () => ['token'],
    receiverPort,
    topics: {
      partitions: () => {
        topicReads.push('partitions');
        return Promise.resolve(scenario.partitions ?? [0, 1, 2, 3]);
      },
      startingOffsets: (_source, rules) => {
        topicReads.push('startingOffsets');
        return Promise.resolve(new Map([...rules.keys()].map((p) => [p, 0n])));
      },
      resetOffsets: () => {
        topicReads.push('resetOffsets');
        return Promise.resolve({ offsets: new Map() });
      },
    },
    events: {
      record: (_object, type, reason, message) => {
        events.push(`${type} ${reason}: ${message}`);
      },
    },
    metrics: createOperatorMetrics(new Registry()),
    logger: createLogger('test', 'error'),
    phaseTimeoutMs: 60_000,
    drainTimeoutMs: 20_000,
    resyncMs,
    receiverTimeoutMs: 1_000,
    rejectedEventsWindowMs: 300_000,
    ownWrites: new OwnWrites<CubeAssignment>(),
    receiverClient,
  });
  return {
    store,
    log,
    events,
    statusWrites,
    topicReads,
    run: () => reconcile('shop/orders', new AbortController().signal),
    condition: (type: string): Condition | undefined =>
      store.object?.status?.conditions?.find((c) => c.type === type),
  };
}

/** orders served by rs-a (partitions 0, 1) and rs-b (2, 3), with the finalizer and digest. */
function placedCube(extra: Partial<CubeAssignmentStatus> = {}): CubeAssignment {
  const object = ordersCube(['rs-a', 'rs-b']);
  object.metadata = { ...object.metadata, finalizers: [finalizer], generation: 1 };
  object.status = {
    assignment: { 'rs-a': [0, 1], 'rs-b': [2, 3] },
    epochs: { '0': 1, '1': 1, '2': 1, '3': 1 },
    specDigest: cubeSpecDigest(assignRequest(object, '', [])),
    ...extra,
  };
  return object;
}

/** A move of partition 1 from rs-a to rs-b, journaled and not started. */
function plannedMove(): ReassignJournal {
  const now = new Date().toISOString();
  return {
    id: 'r-1-abcdef',
    phase: 'Planned',
    moves: [{ partition: 1, from: 'rs-a', to: 'rs-b' }],
    startedAt: now,
    phaseStartedAt: now,
  };
}

const consumingAll = {
  'rs-a-0': { partitions: { 0: 'consuming', 1: 'consuming' } },
  'rs-b-0': { partitions: { 2: 'consuming', 3: 'consuming' } },
} satisfies Record<string, ReceiverState>;

describe('dispatch', () => {
  test('a cube no longer in the cache: nothing read, called or written', async () => {
    const h = harness({ object: undefined, receivers: consumingAll });
    await expect(h.run()).resolves.toBeUndefined();
    expect(h.log).toEqual([]);
    expect(h.topicReads).toEqual([]);
  });

  test('a cube seen for the first time gets the finalizer before anything else', async () => {
    const object = placedCube();
    object.metadata.finalizers = [];
    const h = harness({ object, receivers: consumingAll });
    await h.run();
    expect(h.log[0]).toBe(`write finalizers [${finalizer}]`);
    expect(h.store.object?.metadata?.finalizers).toEqual([finalizer]);
  });

  test('a journal in status runs one phase of it, and nothing of the cube at rest', async () => {
    const h = harness({ object: placedCube({ reassign: plannedMove() }), receivers: consumingAll });
    const result = await h.run();
    expect(h.topicReads).toEqual([]);
    expect(h.store.object?.status?.reassign?.phase).toBe('Pausing');
    expect(h.condition('Ready')).toBeUndefined();
    expect(result).toEqual({ requeueAfterMs: 1 });
  });

  test('at rest, every partition consumed: Ready, not Degraded, back at the resync', async () => {
    const h = harness({ object: placedCube(), receivers: consumingAll });
    const result = await h.run();
    expect(h.topicReads).toEqual(['partitions']);
    expect(h.condition('Ready')).toMatchObject({ status: 'True', reason: 'Consuming' });
    expect(h.condition('Degraded')).toMatchObject({ status: 'False', reason: 'AsExpected' });
    expect(h.condition('Progressing')).toMatchObject({ status: 'False', reason: 'Stable' });
    expect(h.store.object?.status?.partitions?.map((p) => [p.partition, p.replicaSet])).toEqual([
      [0, 'rs-a'],
      [1, 'rs-a'],
      [2, 'rs-b'],
      [3, 'rs-b'],
    ]);
    expect(h.statusWrites).toHaveLength(1);
    expect(result).toEqual({ requeueAfterMs: resyncMs });
  });
});

describe('Ready', () => {
  test('Ready=False while a replica set that holds partitions has no Ready pod', async () => {
    const h = harness({ object: placedCube(), receivers: consumingAll, notReady: ['rs-b-0'] });
    const result = await h.run();
    expect(h.condition('Ready')).toMatchObject({
      status: 'False',
      reason: 'ReplicaSetUnavailable',
    });
    expect(h.condition('Ready')?.message).toContain('replica set rs-b holds partitions 2, 3');
    expect(h.condition('Degraded')).toMatchObject({
      status: 'True',
      reason: 'ReplicaSetUnavailable',
    });
    expect(h.condition('Degraded')?.message).toContain(
      'partitions 2, 3 have no consuming receiver',
    );
    expect(h.events).toEqual([
      expect.stringMatching(/^Warning ReplicaSetUnavailable: replica set rs-b holds partitions/),
    ]);
    // Not a receiver of rs-b was called: it has none ready.
    expect(h.log.filter((l) => l.startsWith('rs-b'))).toEqual([]);
    expect(result).toEqual({ requeueAfterMs: 5_000 });
  });

  test('a replica set that holds no partition and has no Ready pod keeps the cube Ready', async () => {
    const object = placedCube({ assignment: { 'rs-a': [0, 1, 2, 3], 'rs-b': [] } });
    const h = harness({
      object,
      receivers: {
        'rs-a-0': {
          partitions: { 0: 'consuming', 1: 'consuming', 2: 'consuming', 3: 'consuming' },
        },
        'rs-b-0': {},
      },
      notReady: ['rs-b-0'],
    });
    await h.run();
    expect(h.condition('Ready')).toMatchObject({ status: 'True', reason: 'Consuming' });
    expect(h.condition('Degraded')).toMatchObject({
      status: 'True',
      reason: 'ReplicaSetUnavailable',
    });
  });
});

describe('replica repair', () => {
  /** rs-b taken out of the spec, its partitions moved to rs-a. */
  const allOnA = () => {
    const object = placedCube({ assignment: { 'rs-a': [0, 1, 2, 3], 'rs-b': [] } });
    object.spec.replicaSets = ['rs-a'];
    return object;
  };
  const aConsumesAll = {
    partitions: { 0: 'consuming', 1: 'consuming', 2: 'consuming', 3: 'consuming' },
  } satisfies ReceiverState;

  test('a replica of a set that owns nothing is sealed, handed off and dropped', async () => {
    const h = harness({
      object: allOnA(),
      receivers: { 'rs-a-0': aConsumesAll, 'rs-b-0': { partitions: { 2: 'released' } } },
    });
    await expect(h.run()).resolves.toEqual({ requeueAfterMs: resyncMs });
    expect(h.log.filter((l) => l.startsWith('rs-b-0'))).toEqual(['rs-b-0 seal', 'rs-b-0 unassign']);
    expect(h.events).toEqual([
      "Normal ReplicaRepaired: receiver rs-b-0 (rs-b) brought to its replica set's state: sealed, handed off and dropped the cube, of which its set owns nothing",
    ]);
  });

  test('its hand-off pending: kept, and looked at again soon', async () => {
    const h = harness({
      object: allOnA(),
      receivers: {
        'rs-a-0': aConsumesAll,
        'rs-b-0': { partitions: { 2: 'released' }, handOffPending: true },
      },
    });
    await expect(h.run()).resolves.toEqual({ requeueAfterMs: 1_000 });
    expect(h.log.filter((l) => l.startsWith('rs-b-0'))).toEqual(['rs-b-0 seal']);
    expect(h.events).toEqual([]);
  });

  test('a replica that lacks the cube is given its sibling positions', async () => {
    const h = harness({
      object: placedCube(),
      receivers: { ...consumingAll, 'rs-a-1': {} },
    });
    await h.run();
    expect(h.log.filter((l) => l.startsWith('rs-a-1'))).toEqual([
      'rs-a-1 status',
      'rs-a-1 assign [0,1]',
    ]);
    expect(h.events).toEqual([
      'Normal CubeRestoredOnReceiver: receiver rs-a-1 (rs-a) did not hold the cube: given partitions 0 at 100, 1 at 100, the positions of rs-a-0',
    ]);
    expect(h.condition('Ready')).toMatchObject({ status: 'True' });
  });
});

describe('finalize', () => {
  const deleting = (object: CubeAssignment): CubeAssignment => {
    object.metadata.deletionTimestamp = new Date();
    return object;
  };

  test('every receiver releases, seals, hands off and drops the cube; then the finalizer goes', async () => {
    const h = harness({ object: deleting(placedCube()), receivers: consumingAll });
    await expect(h.run()).resolves.toBeUndefined();
    expect(h.log).toEqual([
      'rs-a-0 status',
      'rs-a-0 release [0,1]',
      'rs-a-0 seal',
      'rs-a-0 unassign',
      'rs-b-0 status',
      'rs-b-0 release [2,3]',
      'rs-b-0 seal',
      'rs-b-0 unassign',
      'write finalizers []',
    ]);
    expect(h.events).toEqual([
      'Normal Finalized: sealed and handed off the cube on every receiver, then unassigned it',
    ]);
  });

  test('a hand-off still pending: nothing dropped there, the finalizer stays, asked again at once', async () => {
    const h = harness({
      object: deleting(placedCube()),
      receivers: { ...consumingAll, 'rs-b-0': { ...consumingAll['rs-b-0'], handOffPending: true } },
    });
    await expect(h.run()).resolves.toEqual({ requeueAfterMs: 1 });
    expect(h.log).not.toContain('rs-b-0 unassign');
    expect(h.log).toContain('rs-a-0 unassign');
    expect(h.store.object?.metadata?.finalizers).toEqual([finalizer]);
  });

  test('a set holding data with no ready receiver holds the deletion up, Degraded', async () => {
    const h = harness({
      object: deleting(placedCube()),
      receivers: consumingAll,
      notReady: ['rs-b-0'],
    });
    await expect(h.run()).resolves.toEqual({ requeueAfterMs: 2_000 });
    expect(h.log).toEqual(['write status']);
    expect(h.condition('Ready')).toMatchObject({ status: 'False', reason: 'FinalizeBlocked' });
    expect(h.condition('Degraded')?.message).toBe(
      `deletion waits for replica set rs-b: it holds data of the cube but has no ready receiver to hand it off (remove the finalizer ${finalizer} to delete without handing off)`,
    );
    expect(h.store.object?.metadata?.finalizers).toEqual([finalizer]);
  });

  test('being deleted without the finalizer: nothing to do', async () => {
    const object = deleting(placedCube());
    object.metadata.finalizers = ['someone-else'];
    const h = harness({ object, receivers: consumingAll });
    await expect(h.run()).resolves.toBeUndefined();
    expect(h.log).toEqual([]);
  });
});

describe('spec roll-out', () => {
  /** A cube whose status says digest `older`, which rs-a-0 runs; rs-b-0 is `rsB`. */
  const olderSpec = (rsB: ReceiverState) => {
    const object = placedCube({ specDigest: 'older' });
    const receivers = {
      'rs-a-0': { ...consumingAll['rs-a-0'], specDigest: 'older' },
      'rs-b-0': rsB,
    };
    return { object, h: harness({ object, receivers }) };
  };

  test('a receiver that cannot take the new spec: RollingOut, not Ready, asked again soon', async () => {
    const { h } = olderSpec({
      ...consumingAll['rs-b-0'],
      specDigest: 'older',
      unreachable: ['assign'],
    });
    await expect(h.run()).resolves.toEqual({ requeueAfterMs: 2_000 });
    expect(h.log).toEqual(['rs-a-0 assign []', 'rs-b-0 assign []', 'write status']);
    expect(h.condition('Progressing')).toMatchObject({ status: 'True', reason: 'RollingOut' });
    expect(h.condition('Ready')).toMatchObject({ status: 'False', reason: 'SpecNotRolledOut' });
    expect(h.store.object?.status?.specDigest).toBe('older');
    expect(h.topicReads).toEqual([]);
  });

  test('every receiver runs it: the digest is written with the status at rest', async () => {
    const { object, h } = olderSpec(consumingAll['rs-b-0']);
    await h.run();
    expect(h.log.filter((l) => l.includes('assign'))).toEqual(['rs-a-0 assign []']);
    expect(h.statusWrites).toHaveLength(1);
    expect(h.statusWrites[0]).toMatchObject({
      specDigest: cubeSpecDigest(assignRequest(object, '', [])),
    });
  });
});

describe('suspend', () => {
  test('every replica pauses its set partitions; Ready=False Suspended, back at the resync', async () => {
    const object = placedCube();
    object.spec.suspend = true;
    const h = harness({ object, receivers: consumingAll });
    await expect(h.run()).resolves.toEqual({ requeueAfterMs: resyncMs });
    expect(h.log).toEqual(['rs-a-0 pause [0,1]', 'rs-b-0 pause [2,3]', 'write status']);
    expect(h.condition('Ready')).toMatchObject({ status: 'False', reason: 'Suspended' });
    expect(h.topicReads).toEqual([]);
    // Not observed while suspended (what spec.suspend's description says).
    expect(h.store.object?.status?.partitions).toBeUndefined();
  });

  test('a move in flight runs on: its phase, not the pause, until it completes', async () => {
    const object = placedCube({ reassign: plannedMove() });
    object.spec.suspend = true;
    const h = harness({ object, receivers: consumingAll });
    await h.run();
    expect(h.store.object?.status?.reassign?.phase).toBe('Pausing');
    expect(h.log).toEqual(['write status']);
    expect(h.condition('Ready')).toBeUndefined();
  });
});

describe('plan', () => {
  test('a replica set added to the spec: a reassign planned and written, its phases run next', async () => {
    const object = placedCube();
    object.spec.replicaSets = ['rs-a', 'rs-b', 'rs-c'];
    const h = harness({ object, receivers: { ...consumingAll, 'rs-c-0': {} } });
    await expect(h.run()).resolves.toEqual({ requeueAfterMs: 1 });
    const journal = h.store.object?.status?.reassign;
    expect(journal?.phase).toBe('Pausing');
    expect(journal?.moves.map((m) => m.to)).toEqual(['rs-c']);
    expect(h.condition('Progressing')).toMatchObject({ status: 'True', reason: 'Reassigning' });
    expect(h.events).toEqual([expect.stringMatching(/^Normal ReassignPlanned: reassign r-1-/)]);
    // Nothing observed or repaired yet: the journal runs first.
    expect(h.log.filter((l) => !l.startsWith('write'))).toEqual([]);
  });

  test('a first placement is started at once, and completed with the first observation in one write', async () => {
    const object = ordersCube(['rs-a', 'rs-b']);
    object.metadata = { ...object.metadata, finalizers: [finalizer], generation: 1 };
    const h = harness({ object, receivers: { 'rs-a-0': {}, 'rs-b-0': {} } });
    await h.run();
    expect(h.log).toEqual([
      'write status',
      'rs-a-0 assign [0,2]',
      'rs-b-0 assign [1,3]',
      // Changed since their listing: each is read alone for the observation.
      'rs-a-0 status',
      'rs-b-0 status',
      'write status',
    ]);
    expect(h.store.object?.status?.reassign).toBeUndefined();
    expect(h.store.object?.status?.assignment).toEqual({ 'rs-a': [0, 2], 'rs-b': [1, 3] });
    expect(h.condition('Ready')).toMatchObject({ status: 'True', reason: 'Consuming' });
  });
});

describe('approval: manual', () => {
  /** orders at generation 2, approval manual, partition 1 pinned to rs-b: sticky swaps 1 and 3. */
  function editedCube(annotations?: Record<string, string>): CubeAssignment {
    const object = placedCube({ observedGeneration: 1 });
    object.metadata = {
      ...object.metadata,
      generation: 2,
      ...(annotations ? { annotations } : {}),
    };
    object.spec.approval = 'manual';
    object.spec.pins = { 'rs-b': [1] };
    return object;
  }
  const move = [
    { partition: 1, from: 'rs-a', to: 'rs-b' },
    { partition: 3, from: 'rs-b', to: 'rs-a' },
  ];

  test('a move an edit asks for is proposed, not journaled; the spec is not applied yet', async () => {
    const h = harness({ object: editedCube(), receivers: consumingAll });
    await expect(h.run()).resolves.toEqual({ requeueAfterMs: resyncMs });
    const status = h.store.object?.status;
    expect(status?.reassign).toBeUndefined();
    expect(status?.proposal).toMatchObject({ id: proposalId(2, move), generation: 2, moves: move });
    expect(status?.proposal?.replicaSets).toEqual(['rs-a', 'rs-b']);
    expect(status?.observedGeneration).toBe(1);
    expect(status?.assignment).toEqual({ 'rs-a': [0, 1], 'rs-b': [2, 3] });
    expect(h.condition('Progressing')).toMatchObject({
      status: 'False',
      reason: 'AwaitingApproval',
    });
    expect(h.condition('Progressing')?.message).toContain(
      `streamcube.io/approve=${proposalId(2, move)}`,
    );
    expect(h.condition('Ready')).toMatchObject({ status: 'True' });
    expect(h.events).toEqual([expect.stringMatching(/^Normal ReassignProposed: proposal p-2-/)]);
    // No receiver is paused, drained or assigned: only their status is read.
    expect(h.log.filter((l) => !l.startsWith('write') && !l.endsWith(' status'))).toEqual([]);

    // Again: the same proposal as written, nothing told.
    const proposal = h.store.object?.status?.proposal;
    await h.run();
    expect(h.store.object?.status?.proposal).toEqual(proposal);
    expect(h.events).toHaveLength(1);
  });

  test('an approval naming another id starts nothing: one Warning naming the current id', async () => {
    const h = harness({
      object: editedCube({ 'streamcube.io/approve': 'p-1-0123456789' }),
      receivers: consumingAll,
    });
    await h.run();
    await h.run();
    expect(h.store.object?.status?.reassign).toBeUndefined();
    expect(h.store.object?.metadata?.annotations).toEqual({
      'streamcube.io/approve': 'p-1-0123456789',
    });
    expect(h.events.filter((e) => e.startsWith('Warning'))).toEqual([
      `Warning ApprovalStale: streamcube.io/approve=p-1-0123456789 names no current proposal, so nothing was started: the current proposal is ${proposalId(2, move)} (generation 2: 1 rs-a→rs-b, 3 rs-b→rs-a)`,
    ]);
  });

  test('the current id approved: exactly that move journaled, the proposal and annotation gone', async () => {
    const object = editedCube({ 'streamcube.io/approve': proposalId(2, move) });
    const h = harness({ object, receivers: consumingAll });
    await h.run(); // proposed (first seen), and approved at once: the same id
    const status = h.store.object?.status;
    expect(status?.reassign).toMatchObject({ phase: 'Pausing', moves: move });
    expect(status?.reassign?.proposal).toBe(proposalId(2, move));
    expect(status?.proposal).toBeUndefined();
    expect(status?.observedGeneration).toBe(2);
    expect(h.store.object?.metadata?.annotations).toEqual({});
    expect(h.log).toEqual(['write status', `write annotations {"streamcube.io/approve":null}`]);
    expect(h.events).toEqual([
      expect.stringMatching(
        /^Normal ReassignPlanned: reassign r-2-\S+: 1 rs-a→rs-b, 3 rs-b→rs-a \(proposal p-2-/,
      ),
    ]);
  });

  test('a journal of an approved move in flight: its annotation removed by whoever runs it', async () => {
    const object = placedCube({ reassign: { ...plannedMove(), proposal: 'p-1-0123456789' } });
    object.metadata.annotations = { 'streamcube.io/approve': 'p-1-0123456789', team: 'data' };
    const h = harness({ object, receivers: consumingAll });
    await h.run();
    expect(h.store.object?.metadata?.annotations).toEqual({ team: 'data' });
    expect(h.store.object?.status?.reassign?.phase).toBe('Pausing');
  });

  test('a first placement never waits for approval', async () => {
    const object = ordersCube(['rs-a', 'rs-b']);
    object.metadata = { ...object.metadata, finalizers: [finalizer], generation: 1 };
    object.spec.approval = 'manual';
    const h = harness({ object, receivers: { 'rs-a-0': {}, 'rs-b-0': {} } });
    await h.run();
    expect(h.store.object?.status?.assignment).toEqual({ 'rs-a': [0, 2], 'rs-b': [1, 3] });
    expect(h.store.object?.status?.proposal).toBeUndefined();
  });

  test('a failover of a lost replica set never waits for approval', async () => {
    const object = placedCube({ unavailableSince: { 'rs-b': '2020-01-01T00:00:00.000Z' } });
    object.spec.approval = 'manual';
    const h = harness({
      object,
      receivers: consumingAll,
      notReady: ['rs-b-0'],
      notReadySince: new Date('2020-01-01T00:00:00.000Z'),
    });
    await h.run();
    const status = h.store.object?.status;
    expect(status?.proposal).toBeUndefined();
    expect(status?.reassign).toMatchObject({
      id: expect.stringMatching(/^f-1-/) as string,
      failover: { replicaSets: ['rs-b'] },
      moves: [
        { partition: 2, from: 'rs-b', to: 'rs-a' },
        { partition: 3, from: 'rs-b', to: 'rs-a' },
      ],
    });
  });

  test('back to auto: the proposal removed and the move journaled', async () => {
    const h = harness({ object: editedCube(), receivers: consumingAll });
    await h.run();
    h.store.object!.spec.approval = 'auto';
    await h.run();
    expect(h.store.object?.status?.proposal).toBeUndefined();
    expect(h.store.object?.status?.reassign).toMatchObject({ moves: move });
    expect(h.store.object?.status?.reassign?.proposal).toBeUndefined();
  });
});
