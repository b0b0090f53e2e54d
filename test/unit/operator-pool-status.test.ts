// The status of a pool from a pass's findings: set states, counts, Ready and Degraded.
import {
  receiverPoolSpec,
  type ReceiverPool,
  type ReceiverPoolStatus,
} from '../../src/api/receiver-pool.ts';
import { poolStatus, type PoolFindings } from '../../src/operator/pool/pool-status.ts';

const now = new Date('2026-01-01T00:00:10Z');

function pool(sets: number, status?: ReceiverPoolStatus): ReceiverPool {
  return {
    apiVersion: 'streamcube.io/v1alpha1',
    kind: 'ReceiverPool',
    metadata: { name: 'p', namespace: 'ns', generation: 3 },
    spec: receiverPoolSpec.parse({
      sets,
      replicas: 2,
      image: 'i',
      storage: { size: '1Gi' },
      deepStorage: { claimName: 'd' },
      receiver: { adminToken: { name: 'a' }, readToken: { name: 'r' } },
    }),
    ...(status ? { status } : {}),
  };
}

const set = (index: number, ready: number) => ({
  name: `p-${index}`,
  index,
  replicas: 2,
  readyReplicas: ready,
});

test.each<[string, number, PoolFindings, object, object]>([
  [
    'every set ready',
    2,
    { sets: [set(0, 2), set(1, 2)], held: [], applyFailures: [] },
    { status: 'True', reason: 'SetsReady' },
    { status: 'False', reason: 'AsExpected' },
  ],
  [
    'a set not ready',
    2,
    { sets: [set(0, 2), set(1, 1)], held: [], applyFailures: [] },
    { status: 'False', reason: 'ReceiversNotReady', message: 'p-1: 1/2 Ready' },
    { status: 'False' },
  ],
  [
    'a Draining set held by a cube',
    1,
    {
      sets: [set(0, 2), set(1, 2)],
      held: [{ set: 'p-1', uses: [{ cube: 'ns/c', how: 'listed' }] }],
      applyFailures: [],
    },
    { status: 'True' },
    {
      status: 'True',
      reason: 'SetsInUse',
      message: 'set p-1 is Draining but used by ns/c (listed)',
    },
  ],
  [
    'a set refused by the API server',
    1,
    { sets: [], held: [], applyFailures: [{ set: 'p-0', message: 'forbidden' }] },
    { status: 'False', reason: 'ApplyFailed' },
    { status: 'True', reason: 'ApplyFailed', message: 'set p-0: forbidden' },
  ],
  [
    'no sets at all',
    0,
    { sets: [], held: [], applyFailures: [] },
    { status: 'True', reason: 'SetsReady' },
    { status: 'False' },
  ],
])('%s', (_, sets, findings, ready, degraded) => {
  const status = poolStatus(pool(sets), findings, now);
  expect(status.conditions?.find((c) => c.type === 'Ready')).toMatchObject(ready);
  expect(status.conditions?.find((c) => c.type === 'Degraded')).toMatchObject(degraded);
  expect(status.replicas).toBe(findings.sets.length);
  expect(status.observedGeneration).toBe(3);
  expect(status.selector).toBe('streamcube.io/pool=p');
});

test('sets past spec.sets are Draining; readySets counts Active sets only', () => {
  const status = poolStatus(
    pool(1),
    { sets: [set(1, 2), set(0, 2)], held: [], applyFailures: [] },
    now,
  );
  expect(status.sets?.map((s) => [s.name, s.state])).toEqual([
    ['p-0', 'Active'],
    ['p-1', 'Draining'],
  ]);
  expect(status.readySets).toBe(1);
});

test('a status computed again from the same findings is the same (no write between resyncs)', () => {
  const findings: PoolFindings = { sets: [set(0, 2)], held: [], applyFailures: [] };
  const first = poolStatus(pool(1), findings, now);
  const again = poolStatus(pool(1, first), findings, new Date('2026-01-01T00:05:00Z'));
  expect(again).toEqual(first);
});
