// The chart's ReceiverPool as the operator reads it from its ConfigMap and decides what to apply
// (src/operator/pool/chart-pool.ts): a pool made takes the chart's spec.sets; an applied one keeps
// the count it was scaled to until the chart's value changes; the same ConfigMap is not applied
// twice; a ConfigMap without a usable pool says why.
import type { ReceiverPool } from '../../src/api/receiver-pool.ts';
import {
  chartDigestAnnotation,
  chartPoolApplication,
  chartSetsAnnotation,
  poolOfConfigMap,
} from '../../src/operator/pool/chart-pool.ts';

const manifest = (sets: number, flush = '1s') => ({
  apiVersion: 'streamcube.io/v1alpha1',
  kind: 'ReceiverPool',
  metadata: { name: 'sc', labels: { 'app.kubernetes.io/instance': 'sc' } },
  spec: { sets, replicas: 2, receiver: { extraArgs: [`--flush-interval=${flush}`] } },
});
const configMap = (pool: unknown) => ({ data: { 'pool.json': JSON.stringify(pool) } });
const owner = { apiVersion: 'v1', kind: 'ConfigMap', name: 'sc-receiver-pool', uid: 'cm-uid' };

function parsed(pool: unknown): { manifest: ReceiverPool; digest: string } {
  const result = poolOfConfigMap(configMap(pool));
  if ('error' in result) throw new Error(result.error);
  return result;
}

/** The live pool after `body` was applied, then scaled to `sets` (kubectl scale), if given. */
function live(body: ReceiverPool, sets?: number): ReceiverPool {
  return {
    ...body,
    metadata: { ...body.metadata, resourceVersion: '7' },
    spec: { ...body.spec, sets: sets ?? body.spec.sets },
  };
}

test('a pool made: the chart spec.sets, the digest and the chart sets noted, owned by the ConfigMap', () => {
  const { manifest: m, digest } = parsed(manifest(2));
  const application = chartPoolApplication({ manifest: m, digest, live: undefined, owner });
  expect(application?.sets).toBe('chart');
  expect(application?.body.spec.sets).toBe(2);
  expect(application?.body.metadata).toEqual({
    name: 'sc',
    labels: { 'app.kubernetes.io/instance': 'sc' },
    annotations: { [chartDigestAnnotation]: digest, [chartSetsAnnotation]: '2' },
    ownerReferences: [owner],
  });
});

test('the same ConfigMap again: nothing to apply', () => {
  const first = parsed(manifest(2));
  const made = chartPoolApplication({ ...first, live: undefined, owner })!.body;
  expect(chartPoolApplication({ ...parsed(manifest(2)), live: live(made), owner })).toBeUndefined();
  // ...even after a scale: the count is the pool's own.
  expect(
    chartPoolApplication({ ...parsed(manifest(2)), live: live(made, 4), owner }),
  ).toBeUndefined();
});

test('another value, receivers.sets unchanged: the scaled count kept, applied only if the pool is unchanged since read', () => {
  const made = chartPoolApplication({ ...parsed(manifest(2)), live: undefined, owner })!.body;
  const next = chartPoolApplication({ ...parsed(manifest(2, '3s')), live: live(made, 4), owner });
  expect(next?.sets).toBe('kept');
  expect(next?.body.spec).toMatchObject({
    sets: 4,
    receiver: { extraArgs: ['--flush-interval=3s'] },
  });
  expect(next?.body.metadata.resourceVersion).toBe('7');
  expect(next?.body.metadata.annotations?.[chartSetsAnnotation]).toBe('2');
});

test("receivers.sets changed: the chart's count, whatever the pool was scaled to", () => {
  const made = chartPoolApplication({ ...parsed(manifest(2)), live: undefined, owner })!.body;
  const next = chartPoolApplication({ ...parsed(manifest(3)), live: live(made, 4), owner });
  expect(next?.sets).toBe('chart');
  expect(next?.body.spec.sets).toBe(3);
  expect(next?.body.metadata.annotations?.[chartSetsAnnotation]).toBe('3');
});

test('a pool of that name the chart did not apply (no annotations): taken over, its count kept', () => {
  const { manifest: m, digest } = parsed(manifest(2));
  const existing = live({ ...m, metadata: { name: 'sc' } }, 5);
  const next = chartPoolApplication({ manifest: m, digest, live: existing, owner });
  expect(next?.sets).toBe('kept');
  expect(next?.body.spec.sets).toBe(5);
});

test.each([
  [{}, 'it has no key pool.json'],
  [{ data: { 'pool.json': '{' } }, 'pool.json is not JSON'],
  [configMap([1]), 'pool.json is not an object'],
  [
    configMap({ ...manifest(2), kind: 'CubeAssignment' }),
    'is a streamcube.io/v1alpha1 CubeAssignment, not a streamcube.io/v1alpha1 ReceiverPool',
  ],
  [configMap({ ...manifest(2), metadata: {} }), 'pool.json has no metadata.name'],
  [configMap({ ...manifest(2), spec: { replicas: 2 } }), 'pool.json has no integer spec.sets'],
])('a ConfigMap without a usable pool: %j says why', (cm, reason) => {
  const result = poolOfConfigMap(cm);
  expect('error' in result && result.error).toContain(reason);
});

test('the same pool owned by a ConfigMap of that name deleted since: applied again, to the new owner', () => {
  const made = chartPoolApplication({ ...parsed(manifest(2)), live: undefined, owner })!.body;
  const newOwner = { ...owner, uid: 'cm-uid-2' };
  const next = chartPoolApplication({ ...parsed(manifest(2)), live: live(made), owner: newOwner });
  expect(next?.body.metadata.ownerReferences).toEqual([newOwner]);
});
