// A cube on a pool: spec.replicaSets resolved from the pool's Active sets at the start of a pass.
import type { CubeAssignment } from '../../src/api/cube-assignment.ts';
import { resolvePoolSets } from '../../src/operator/cube/pool-sets.ts';
import { activeSets } from '../../src/operator/pool/set-names.ts';

const cube = (spec: Partial<CubeAssignment['spec']>): CubeAssignment => ({
  apiVersion: 'streamcube.io/v1alpha1',
  kind: 'CubeAssignment',
  metadata: { name: 'c', namespace: 'ns' },
  spec: spec as CubeAssignment['spec'],
  status: { assignment: { 'p-1': [1], 'p-0': [0] } },
});

test.each<
  [string, Partial<CubeAssignment['spec']>, string[] | undefined, string[], string | undefined]
>([
  ['a cube listing its sets is left as it is', { replicaSets: ['a'] }, ['p-0'], ['a'], undefined],
  [
    'a cube on a pool gets its Active sets',
    { pool: 'p' },
    ['p-0', 'p-1', 'p-2'],
    ['p-0', 'p-1', 'p-2'],
    undefined,
  ],
  ['a pool of zero sets leaves none', { pool: 'p' }, [], [], undefined],
  [
    'a missing pool keeps the sets holding partitions',
    { pool: 'p' },
    undefined,
    ['p-0', 'p-1'],
    'PoolNotFound',
  ],
])('%s', (_, spec, poolSets, resolved, problem) => {
  const object = cube(spec);
  const found = resolvePoolSets(object, () => poolSets, 'rx');
  expect(object.spec.replicaSets).toEqual(resolved);
  expect(found?.reason).toBe(problem);
  if (problem)
    expect(found?.message).toMatch(/^spec\.pool names ReceiverPool rx\/p, which does not exist/);
});

test('Active sets are <pool>-0 to <pool>-<sets-1>, the first ones by their setNames', () => {
  expect(activeSets({ metadata: { name: 'p' }, spec: { sets: 3 } })).toEqual(['p-0', 'p-1', 'p-2']);
  expect(activeSets({ metadata: { name: 'p' }, spec: { sets: 0 } })).toEqual([]);
  expect(
    activeSets({ metadata: { name: 'p' }, spec: { sets: 3, setNames: ['rs-a', 'rs-b'] } }),
  ).toEqual(['rs-a', 'rs-b', 'p-2']);
  expect(
    activeSets({ metadata: { name: 'p' }, spec: { sets: 1, setNames: ['rs-a', 'rs-b'] } }),
  ).toEqual(['rs-a']);
});
