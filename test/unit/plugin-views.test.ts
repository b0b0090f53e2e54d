// kubectl streamcube's pure parts: the status view of a cube, and the plan preview of a manifest
// computed with the operator's planner against the live assignment and the Ready replica sets.
import { ordersCube, drainingStatus } from '../support/cube-assignments.ts';
import { age, renderStatus, table } from '../../src/plugin/status-view.ts';
import { parseManifestSpec, previewPlan, renderPlan } from '../../src/plugin/plan-preview.ts';

const now = new Date('2026-11-30T10:01:00Z');

test('a table pads every column but the last to its widest cell', () => {
  expect(
    table([
      ['A', 'BB', 'C'],
      ['long', 'x', 'tail end'],
    ]),
  ).toBe('A     BB  C\nlong  x   tail end');
});

test.each([
  ['2026-11-30T10:00:58Z', '2s'],
  ['2026-11-30T09:56:50Z', '4m10s'],
  ['2026-11-30T08:00:00Z', '2h1m'],
  ['2026-11-20T10:01:00Z', '10d'],
  [undefined, '-'],
])('age of %s is %s', (iso, text) => expect(age(iso, now)).toBe(text));

test('status shows every partition with its owner, epoch and figures, and the move in flight', () => {
  const cube = ordersCube(['rs-a', 'rs-b'], {
    ...drainingStatus(3),
    partitions: [
      {
        partition: 0,
        replicaSet: 'rs-a',
        position: '120',
        highWatermark: '150',
        lag: '30',
        handedOffTo: '100',
      },
      { partition: 2, replicaSet: 'rs-b', position: '7', lostOffsets: '5' },
    ],
    totalLag: '30',
  });
  cube.metadata.generation = 3;
  const text = renderStatus(cube, now);
  expect(text).toContain(
    'CubeAssignment shop/orders: topic orders, replica sets rs-a, rs-b, approval auto',
  );
  expect(text).toContain('generation 3: applied');
  expect(text).toContain('A move is in flight: phase Draining, for 58s');
  const rows = text.split('\n').filter((l) => /^[0-9]/.test(l));
  expect(rows.map((r) => r.split(/\s+/))).toEqual([
    ['0', 'rs-a', '2', '120', '150', '30', '100', '-'],
    ['1', 'rs-a', '2', '-', '-', '-', '-', '-'],
    ['2', 'rs-b', '1', '7', '-', '-', '-', '5'],
    ['3', 'rs-b', '1', '-', '-', '-', '-', '-'],
  ]);
  expect(text).toContain('Total lag: 30 records.');
});

test('status shows a proposal waiting for approval with the command that approves it', () => {
  const cube = ordersCube(['rs-a', 'rs-b'], {
    observedGeneration: 4,
    assignment: { 'rs-a': [0, 1], 'rs-b': [2, 3] },
    proposal: {
      id: 'p-4-0123456789',
      generation: 4,
      moves: [{ partition: 1, from: 'rs-a', to: 'rs-b' }],
      replicaSets: ['rs-a', 'rs-b'],
      lag: { '1': '12' },
      uncommitted: { '1': '340' },
      createdAt: '2026-11-30T10:00:00Z',
    },
  });
  const text = renderStatus(cube, now);
  expect(text).toContain(
    'Proposal p-4-0123456789 waits for approval (for generation 4, made 1m ago): 1 partition would move, touching rs-a, rs-b.',
  );
  expect(text).toContain('1          rs-a  rs-b  12   340');
  expect(text).toContain('a failover of the source set during the move would read them again');
  expect(text).toContain('kubectl streamcube approve orders -n shop --id p-4-0123456789');
});

test('a cube not placed yet says so', () => {
  expect(renderStatus(ordersCube(['rs-a']), now)).toContain('No partition is placed yet.');
});

test('a manifest spec is validated with the field named, as the API server would', () => {
  const bad = parseManifestSpec({ ...ordersCube(['rs-a']).spec, replicaSets: ['Not A Name'] });
  expect(bad).toEqual({ errors: [expect.stringMatching(/^spec\.replicaSets\[0\]: /)] });
  expect(parseManifestSpec(ordersCube(['rs-a']).spec)).toHaveProperty('spec');
});

describe('plan preview', () => {
  const live = ordersCube(['rs-a', 'rs-b'], {
    observedGeneration: 1,
    assignment: { 'rs-a': [0, 1], 'rs-b': [2, 3] },
    partitions: [{ partition: 1, replicaSet: 'rs-a', lag: '40' }],
  });
  const specWith = (edit: Record<string, unknown>) => {
    const parsed = parseManifestSpec({ ...live.spec, ...edit });
    if ('errors' in parsed) throw new Error(parsed.errors.join());
    return parsed.spec;
  };

  test('adding a Ready replica set moves the fewest partitions to it, and nothing else changes', () => {
    const preview = previewPlan(
      specWith({ replicaSets: ['rs-a', 'rs-b', 'rs-c'] }),
      live,
      new Set(['rs-a', 'rs-b', 'rs-c']),
    );
    expect(preview.changes).toEqual(['replicaSets: [rs-a,rs-b] → [rs-a,rs-b,rs-c]']);
    expect(preview.moves).toHaveLength(1);
    expect(preview.moves[0]!.to).toBe('rs-c');
    const text = renderPlan('orders', 'shop', preview, live);
    expect(text).toContain('Plan for CubeAssignment shop/orders (nothing applied):');
    expect(text).toMatch(/1 partition would move, touching rs-(a|b), rs-c/);
  });

  test('a pin moves the pinned partition (and the strategy rebalances), with its lag', () => {
    const preview = previewPlan(
      specWith({ pins: { 'rs-b': [1] } }),
      live,
      new Set(['rs-a', 'rs-b']),
    );
    expect(preview.moves).toEqual([
      { partition: 1, from: 'rs-a', to: 'rs-b' },
      { partition: 3, from: 'rs-b', to: 'rs-a' },
    ]);
    expect(renderPlan('orders', 'shop', preview, live)).toMatch(/^1\s+rs-a\s+rs-b\s+40$/m);
  });

  test('a set without a Ready receiver gets nothing, and the problem is named', () => {
    const preview = previewPlan(
      specWith({ replicaSets: ['rs-a', 'rs-b', 'rs-c'] }),
      live,
      new Set(['rs-a', 'rs-b']),
    );
    expect(preview.moves).toEqual([]);
    expect(preview.problems.map((p) => p.reason)).toEqual(['ReplicaSetUnavailable']);
  });

  test('manual approval and a schema edit are explained', () => {
    const preview = previewPlan(
      specWith({
        approval: 'manual',
        pins: { 'rs-b': [1] },
        schema: { ...live.spec.schema, window: '2h' },
      }),
      live,
      new Set(['rs-a', 'rs-b']),
    );
    expect(preview.changes).toEqual([
      'approval: auto → manual',
      'pins: (unset) → {rs-b:[1]}',
      'schema: changed (rolled out to every receiver holding the cube; no partition moves for it)',
    ]);
    expect(preview.notes.join('\n')).toContain('spec.approval is manual');
  });

  test('a cube that does not exist is created by applying, and its first placement needs no approval', () => {
    const preview = previewPlan(specWith({}), undefined, new Set(['rs-a']));
    expect(preview.moves).toEqual([]);
    expect(preview.notes.join('\n')).toMatch(
      /does not exist.*No Ready receiver pod now in replica set\(s\) rs-b/s,
    );
  });
});
