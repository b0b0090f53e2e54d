// Which Draining sets of a pool may go: only those no CubeAssignment uses in any way.
import type { CubeAssignment, CubeAssignmentStatus } from '../../src/api/cube-assignment.ts';
import { decideScaleIn, setsInUseMessage, usesOfSet } from '../../src/operator/pool/scale-in.ts';

function cube(name: string, replicaSets: string[], status?: CubeAssignmentStatus): CubeAssignment {
  return {
    apiVersion: 'streamcube.io/v1alpha1',
    kind: 'CubeAssignment',
    metadata: { name, namespace: 'ns' },
    spec: { replicaSets } as CubeAssignment['spec'],
    ...(status ? { status } : {}),
  };
}

const journal = {
  id: 'r-1',
  phase: 'Draining' as const,
  startedAt: '2026-01-01T00:00:00Z',
};

test.each<[string, CubeAssignment, string[]]>([
  ['not named anywhere', cube('a', ['p-0'], { assignment: { 'p-0': [0, 1] } }), []],
  ['listed in spec.replicaSets', cube('a', ['p-0', 'p-2']), ['listed']],
  [
    'off the list but still holding partitions',
    cube('a', ['p-0'], { assignment: { 'p-0': [0], 'p-2': [1] } }),
    ['assigned'],
  ],
  [
    'an empty assignment entry holds nothing',
    cube('a', ['p-0'], { assignment: { 'p-2': [] } }),
    [],
  ],
  [
    'the source of a move in flight',
    cube('a', ['p-0'], {
      reassign: { ...journal, moves: [{ partition: 1, from: 'p-2', to: 'p-0' }] },
    }),
    ['moving'],
  ],
  [
    'the target of a move in flight',
    cube('a', ['p-0'], {
      reassign: { ...journal, moves: [{ partition: 1, from: 'p-0', to: 'p-2' }] },
    }),
    ['moving'],
  ],
  [
    'fenced by a failover in flight',
    cube('a', ['p-0'], {
      reassign: { ...journal, moves: [], failover: { replicaSets: ['p-2'] } },
    }),
    ['moving'],
  ],
  [
    'in a proposal awaiting approval',
    cube('a', ['p-0'], {
      proposal: {
        id: 'p-1-x',
        generation: 2,
        moves: [{ partition: 1, from: 'p-2', to: 'p-0' }],
        replicaSets: ['p-0', 'p-2'],
        createdAt: '2026-01-01T00:00:00Z',
      },
    }),
    ['proposed'],
  ],
  [
    'keeping uncommitted data of partitions moved away',
    cube('a', ['p-0'], { releasedUncommitted: { 'p-2': [3] } }),
    ['uncommitted'],
  ],
  [
    'listed and assigned',
    cube('a', ['p-2'], { assignment: { 'p-2': [0] } }),
    ['listed', 'assigned'],
  ],
])('a cube %s: uses of p-2 are %j', (_, c, uses) => {
  expect(usesOfSet(c, 'p-2')).toEqual(uses);
});

test('decideScaleIn removes the free sets and holds the used ones, naming every cube', () => {
  const cubes = [
    cube('a', ['p-0', 'p-2']),
    cube('b', ['p-0'], { assignment: { 'p-2': [4] } }),
    cube('c', ['p-0']),
  ];
  const decision = decideScaleIn(['p-2', 'p-3'], cubes);
  expect(decision.remove).toEqual(['p-3']);
  expect(decision.held).toEqual([
    {
      set: 'p-2',
      uses: [
        { cube: 'ns/a', how: 'listed' },
        { cube: 'ns/b', how: 'assigned' },
      ],
    },
  ]);
  expect(setsInUseMessage(decision.held)).toBe(
    'set p-2 is Draining but used by ns/a (listed), ns/b (assigned)',
  );
  expect(decideScaleIn(['p-2'], [])).toEqual({ remove: ['p-2'], held: [] });
});
