// The pure parts of a reassign: the journal it starts from, the assignment it ends with and how
// that is written as a merge patch, how moves read in Events; and which receiver pods it talks to.
import type { V1Pod } from '@kubernetes/client-node';
import {
  type CubeAssignment,
  reassignJournal,
  type ReassignJournal,
} from '../../src/api/cube-assignment.ts';
import {
  adminPortAnnotation,
  isPodReady,
  receiversByReplicaSet,
  replicaSetLabel,
} from '../../src/operator/discovery.ts';
import {
  assignRequest,
  completionStatus,
  describeMoves,
  finalAssignment,
  mapReplacement,
  newJournal,
} from '../../src/operator/reassign/index.ts';
import { applyMergePatch, ordersCube } from '../support/cube-assignments.ts';

const now = new Date('2026-11-30T10:00:00.250Z');

const cube = ordersCube;

function journal(moves: ReassignJournal['moves']): ReassignJournal {
  return { id: 'r-1', phase: 'Sealing', moves, startedAt: now.toISOString() };
}

describe('newJournal', () => {
  test('starts Planned, with the start time as the phase time, and valid for the CRD', () => {
    const j = newJournal(
      [
        { partition: 0, to: 'rs-a' },
        { partition: 2, from: 'rs-a', to: 'rs-b' },
      ],
      now,
      'r-3-abcdef',
    );
    expect(j).toEqual({
      id: 'r-3-abcdef',
      phase: 'Planned',
      moves: [
        { partition: 0, to: 'rs-a' },
        { partition: 2, from: 'rs-a', to: 'rs-b' },
      ],
      startedAt: '2026-11-30T10:00:00.250Z',
      phaseStartedAt: '2026-11-30T10:00:00.250Z',
    });
    expect(reassignJournal.safeParse(j).success).toBe(true);
  });

  test('a move without a source has no `from` key at all (a null would fail the schema)', () => {
    const j = newJournal([{ partition: 5, to: 'rs-a' }], now, 'r-1');
    expect(Object.keys(j.moves[0]!)).toEqual(['partition', 'to']);
    expect(JSON.parse(JSON.stringify(j))).toEqual(j);
  });

  test('no stop offsets yet: they are set when the pause is merged', () => {
    expect(newJournal([], now, 'r-1').stopOffsets).toBeUndefined();
  });
});

describe('finalAssignment', () => {
  test.each<[string, CubeAssignment, ReassignJournal['moves'], Record<string, number[]>]>([
    [
      'moves applied, every replica set of the spec present, partitions ascending',
      cube(['rs-a', 'rs-b', 'rs-c'], { assignment: { 'rs-a': [0, 1, 4], 'rs-b': [2, 3] } }),
      [
        { partition: 4, from: 'rs-a', to: 'rs-b' },
        { partition: 0, from: 'rs-a', to: 'rs-b' },
      ],
      { 'rs-a': [1], 'rs-b': [0, 2, 3, 4], 'rs-c': [] },
    ],
    [
      'the initial assignment starts from nothing',
      cube(['rs-a', 'rs-b']),
      [
        { partition: 1, to: 'rs-b' },
        { partition: 0, to: 'rs-a' },
      ],
      { 'rs-a': [0], 'rs-b': [1] },
    ],
    [
      'a replica set dropped from the spec disappears once it holds nothing',
      cube(['rs-b'], { assignment: { 'rs-a': [0, 1], 'rs-b': [2, 3] } }),
      [
        { partition: 0, from: 'rs-a', to: 'rs-b' },
        { partition: 1, from: 'rs-a', to: 'rs-b' },
      ],
      { 'rs-b': [0, 1, 2, 3] },
    ],
    [
      'a replica set dropped from the spec that still holds partitions keeps them',
      cube(['rs-b'], { assignment: { 'rs-a': [0, 1], 'rs-b': [2] } }),
      [{ partition: 1, from: 'rs-a', to: 'rs-b' }],
      { 'rs-a': [0], 'rs-b': [1, 2] },
    ],
  ])('%s', (_, object, moves, expected) => {
    expect(finalAssignment(object, journal(moves))).toEqual(expected);
  });
});

describe('completionStatus: where the cube began reading a partition', () => {
  test.each<[string, CubeAssignment, ReassignJournal['moves'], Record<string, string> | undefined]>(
    [
      [
        'a first placement: where it started, for good',
        cube(['rs-a', 'rs-b']),
        [
          { partition: 0, to: 'rs-a' },
          { partition: 1, to: 'rs-b' },
        ],
        { '0': '40', '1': '7' },
      ],
      [
        'a move of a placed partition: not written again',
        cube(['rs-a', 'rs-b'], { assignment: { 'rs-a': [0] }, epochs: { '0': 1 } }),
        [{ partition: 0, from: 'rs-a', to: 'rs-b' }],
        undefined,
      ],
      [
        'a partition added to the topic later: its own first placement',
        cube(['rs-a'], {
          assignment: { 'rs-a': [0] },
          epochs: { '0': 3 },
          firstOffsets: { '0': '40' },
        }),
        [{ partition: 1, to: 'rs-a' }],
        { '1': '7' },
      ],
    ],
  )('%s', (_, object, moves, expected) => {
    const patch = completionStatus(object, {
      ...journal(moves),
      stopOffsets: { '0': '40', '1': '7' },
    });
    expect(patch.firstOffsets).toEqual(expected);
    expect(
      (applyMergePatch(object.status ?? {}, patch) as CubeAssignment['status'])?.firstOffsets,
    ).toEqual(
      object.status?.firstOffsets || expected
        ? { ...object.status?.firstOffsets, ...expected }
        : undefined,
    );
  });
});

describe('mapReplacement', () => {
  test('keys the new map lacks are sent as null; empty lists stay lists', () => {
    expect(
      mapReplacement({ 'rs-a': [0, 1], 'rs-b': [2] }, { 'rs-b': [0, 1, 2], 'rs-c': [] }),
    ).toEqual({ 'rs-a': null, 'rs-b': [0, 1, 2], 'rs-c': [] });
  });

  test('without a previous map it is the new map', () => {
    expect(mapReplacement(undefined, { 'rs-a': [0] })).toEqual({ 'rs-a': [0] });
  });

  test.each<[Record<string, number[]> | undefined, Record<string, number[]>]>([
    [{ 'rs-a': [0, 1], 'rs-b': [2, 3] }, { 'rs-b': [0, 1, 2, 3] }],
    [{ 'rs-a': [0] }, { 'rs-a': [0] }],
    [{ 'rs-a': [0], 'rs-b': [] }, { 'rs-c': [0] }],
    [undefined, { 'rs-a': [0], 'rs-b': [1] }],
  ])('applied as a merge patch to %j it gives %j', (previous, next) => {
    expect(applyMergePatch(previous ?? {}, mapReplacement(previous, next))).toEqual(next);
  });
});

describe('describeMoves', () => {
  test('partition, source or (new), target, in journal order', () => {
    expect(
      describeMoves(
        journal([
          { partition: 0, to: 'rs-a' },
          { partition: 7, from: 'rs-a', to: 'rs-b' },
        ]),
      ),
    ).toBe('0 (new)→rs-a, 7 rs-a→rs-b');
  });

  test('no move, empty text', () => {
    expect(describeMoves(journal([]))).toBe('');
  });
});

describe('assignRequest', () => {
  test('namespace, source and schema from the cube, each start with the watermark left to the receiver', () => {
    const request = assignRequest(cube(['rs-a']), 'rs-a', [
      { partition: 3, position: '120', epoch: 2 },
    ]);
    expect(request).toEqual({
      namespace: 'shop',
      source: { brokers: ['kafka:9092'], topic: 'orders', startingOffsets: 'earliest' },
      schema: cube(['rs-a']).spec.schema,
      replicaSet: 'rs-a',
      partitions: [{ partition: 3, position: '120', epoch: 2, watermark: null }],
    });
  });
});

// ---- discovery -----------------------------------------------------------------------------

interface PodShape {
  name?: string;
  replicaSet?: string;
  ip?: string;
  ready?: 'True' | 'False';
  deleting?: boolean;
  annotations?: Record<string, string>;
}

function pod(shape: PodShape): V1Pod {
  return {
    metadata: {
      ...(shape.name === undefined ? {} : { name: shape.name }),
      labels: shape.replicaSet === undefined ? {} : { [replicaSetLabel]: shape.replicaSet },
      ...(shape.annotations ? { annotations: shape.annotations } : {}),
      ...(shape.deleting ? { deletionTimestamp: now } : {}),
    },
    status: {
      ...(shape.ip === undefined ? {} : { podIP: shape.ip }),
      conditions:
        shape.ready === undefined
          ? []
          : [
              { type: 'PodScheduled', status: 'True' },
              { type: 'Ready', status: shape.ready },
            ],
    },
  };
}

const urls = (pods: V1Pod[], port = 8080): Record<string, string[]> =>
  Object.fromEntries(
    [...receiversByReplicaSet(pods, port)].map(([rs, list]) => [
      rs,
      list.map((e) => `${e.name} ${e.baseUrl}`),
    ]),
  );

describe('isPodReady', () => {
  test.each<[string, PodShape, boolean]>([
    ['Ready=True', { ready: 'True' }, true],
    ['Ready=False', { ready: 'False' }, false],
    ['no conditions yet', {}, false],
    ['Ready=True but being deleted', { ready: 'True', deleting: true }, false],
  ])('%s', (_, shape, ready) => expect(isPodReady(pod(shape))).toBe(ready));

  test('a pod with no status at all is not ready', () => {
    expect(isPodReady({ metadata: { name: 'x' } })).toBe(false);
  });
});

describe('receiversByReplicaSet', () => {
  test('ready pods grouped by their label, sorted by name, addressed by IP and the default port', () => {
    expect(
      urls([
        pod({ name: 'rs-b-1', replicaSet: 'rs-b', ip: '10.1.0.4', ready: 'True' }),
        pod({ name: 'rs-a-0', replicaSet: 'rs-a', ip: '10.1.0.2', ready: 'True' }),
        pod({ name: 'rs-b-0', replicaSet: 'rs-b', ip: '10.1.0.3', ready: 'True' }),
      ]),
    ).toEqual({
      'rs-a': ['rs-a-0 http://10.1.0.2:8080'],
      'rs-b': ['rs-b-0 http://10.1.0.3:8080', 'rs-b-1 http://10.1.0.4:8080'],
    });
  });

  test.each<[string, PodShape]>([
    ['not ready', { ready: 'False' }],
    ['being deleted', { deleting: true }],
    ['without an IP yet', { ip: undefined }],
    ['without the replica-set label', { replicaSet: undefined }],
    ['with an empty replica-set label', { replicaSet: '' }],
    ['without a name', { name: undefined }],
  ])('a pod %s is left out', (_, change) => {
    const base: PodShape = { name: 'rs-a-1', replicaSet: 'rs-a', ip: '10.1.0.9', ready: 'True' };
    const kept = pod({ name: 'rs-a-0', replicaSet: 'rs-a', ip: '10.1.0.8', ready: 'True' });
    expect(urls([kept, pod({ ...base, ...change })])).toEqual({
      'rs-a': ['rs-a-0 http://10.1.0.8:8080'],
    });
  });

  /** The endpoints of pod rs-a-0 alone, at `ip` with Ready `ready`, on `port`. */
  const endpointsOfOnePod = (ip: string, ready: 'True' | 'False', port: number) =>
    receiversByReplicaSet([pod({ name: 'rs-a-0', replicaSet: 'rs-a', ip, ready })], port);

  test('a replica set whose pods are all away is absent, not an empty list', () => {
    expect(endpointsOfOnePod('10.1.0.2', 'False', 8080).has('rs-a')).toBe(false);
  });

  /** The URLs of pod rs-a-0, Ready at 10.1.0.2, with the admin-port annotation `value`. */
  const annotated = (value: string) =>
    urls([
      pod({
        name: 'rs-a-0',
        replicaSet: 'rs-a',
        ip: '10.1.0.2',
        ready: 'True',
        annotations: { [adminPortAnnotation]: value },
      }),
    ]);

  test('the admin-port annotation overrides the default port', () => {
    expect(annotated('9443')).toEqual({ 'rs-a': ['rs-a-0 http://10.1.0.2:9443'] });
  });

  test.each(['http', '', '0', '70000', '80.5', '-1'])(
    'an admin-port annotation %j that is no port falls back to the default',
    (value) => {
      expect(annotated(value)).toEqual({ 'rs-a': ['rs-a-0 http://10.1.0.2:8080'] });
    },
  );

  test('an IPv6 pod address is bracketed in the URL', () => {
    const [endpoint] = endpointsOfOnePod('fd00:10:1::2', 'True', 8080).get('rs-a') ?? [];
    expect(endpoint?.baseUrl).toBe('http://[fd00:10:1::2]:8080');
    expect(new URL(endpoint?.baseUrl ?? '').hostname).toBe('[fd00:10:1::2]');
  });

  test('endpoints carry their pod name and replica set', () => {
    expect(endpointsOfOnePod('127.0.0.41', 'True', 7000).get('rs-a')).toEqual([
      { name: 'rs-a-0', replicaSet: 'rs-a', baseUrl: 'http://127.0.0.41:7000' },
    ]);
  });
});
