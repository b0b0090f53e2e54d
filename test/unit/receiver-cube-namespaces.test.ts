// Cubes known by namespace and name on a receiver: the admin paths that name them (one definition
// for client and server, the routes of before read as namespace `default`), and the data
// directories of before namespaces moved into their namespace at start with nothing lost.
import { jest } from '@jest/globals';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cubePath, parseCubePath, type CubeKey } from '../../src/protocol/cube-paths.ts';
import { CubeChannel } from '../../src/receiver/cube-channel.ts';
import {
  cubeDirectory,
  listCubeDirectories,
  migrateCubeDirectories,
} from '../../src/receiver/cube-directories.ts';
import { readCubeCheckpoint } from '../../src/receiver/cube-store.ts';
import {
  type FakePartitionConsumer,
  countsByCountry,
  fakeChannelOptions,
} from '../support/fake-partition-consumer.ts';

describe('cube paths', () => {
  test.each([
    {
      name: 'a cube of a namespace',
      path: '/v1/namespaces/team-a/cubes/orders',
      parsed: {
        namespace: 'team-a',
        name: 'orders',
        action: undefined,
        route: '/v1/namespaces/:namespace/cubes/:cube',
      },
    },
    {
      name: 'an action of a cube of a namespace',
      path: '/v1/namespaces/team-a/cubes/orders/drain',
      parsed: {
        namespace: 'team-a',
        name: 'orders',
        action: 'drain',
        route: '/v1/namespaces/:namespace/cubes/:cube/drain',
      },
    },
    {
      name: 'the route of before: namespace default',
      path: '/v1/cubes/orders/query',
      parsed: {
        namespace: 'default',
        name: 'orders',
        action: 'query',
        route: '/v1/cubes/:cube/query',
      },
    },
    {
      name: 'a cube named like a namespace, in a namespace named cubes',
      path: '/v1/namespaces/cubes/cubes/namespaces',
      parsed: {
        namespace: 'cubes',
        name: 'namespaces',
        action: undefined,
        route: '/v1/namespaces/:namespace/cubes/:cube',
      },
    },
    {
      name: 'escaped names are decoded (the server then refuses them as no DNS label)',
      path: '/v1/namespaces/Team%20A/cubes/orders',
      parsed: {
        namespace: 'Team A',
        name: 'orders',
        action: undefined,
        route: '/v1/namespaces/:namespace/cubes/:cube',
      },
    },
  ])('$name', ({ path, parsed }) => {
    expect(parseCubePath(path)).toEqual(parsed);
  });

  test.each([
    '/v1/cubes',
    '/v1/status',
    '/v1/namespaces/team-a/cubes',
    '/v1/namespaces/team-a',
    '/v1/cubes/orders/drain/now',
    '/v1/namespaces/team-a/cubes/orders/drain/now',
    '/v1/namespaces//cubes/orders',
  ])('%s names no cube', (path) => {
    expect(parseCubePath(path)).toBeUndefined();
  });

  test('what the client builds, the server reads back', () => {
    const key: CubeKey = { namespace: 'team-b', name: 'orders' };
    expect(cubePath(key)).toBe('/v1/namespaces/team-b/cubes/orders');
    for (const action of ['pause', 'resume', 'release', 'drain', 'seal', 'query'] as const) {
      expect(parseCubePath(cubePath(key, action))).toMatchObject({ ...key, action });
    }
  });
});

describe('data directories of before namespaces', () => {
  const T0 = Date.UTC(2026, 10, 30, 12, 0, 0);
  const schema = countsByCountry('1m', '0s');
  let dir: string;
  let dataDir: string;

  beforeEach(() => {
    jest.useFakeTimers({ now: T0 });
    dir = mkdtempSync(join(tmpdir(), 'streamcube-dirs-'));
    dataDir = join(dir, 'data');
  });
  afterEach(() => {
    jest.useRealTimers();
    rmSync(dir, { recursive: true, force: true });
  });

  /** A channel of `cube` in `namespace` (undefined: unknown), with partition 0 consumed to 3. */
  async function cubeWithData(cube: string, namespace?: string): Promise<void> {
    let consumer: FakePartitionConsumer | undefined;
    const channel = new CubeChannel(
      fakeChannelOptions(dir, schema, (c) => (consumer = c), {
        cube,
        ...(namespace ? { namespace } : {}),
      }),
    );
    await channel.open();
    await channel.assign([{ partition: 0, position: '0', epoch: 1, watermark: null }]);
    consumer!.deliver(0, 0, 3, T0);
    await jest.advanceTimersByTimeAsync(0);
    await channel.close();
  }

  /** Puts a cube's directory where receivers before namespaces kept it: cubes/<cube>. */
  function asBefore(key: CubeKey, dropNamespace = false): string {
    const legacy = join(dataDir, 'cubes', key.name);
    renameSync(cubeDirectory(dataDir, key), `${legacy}.tmp`);
    renameSync(`${legacy}.tmp`, legacy);
    if (dropNamespace) {
      const file = join(legacy, 'checkpoint.json');
      const manifest = JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
      delete manifest.namespace;
      writeFileSync(file, JSON.stringify(manifest));
    }
    return legacy;
  }

  const positionsAt = (key: CubeKey): string[] | undefined =>
    readCubeCheckpoint(cubeDirectory(dataDir, key))?.partitions.map(
      (p) => `${p.partition}@${p.position}`,
    );

  test.each([
    { name: 'a cube whose checkpoint names its namespace', cube: 'orders', namespace: 'team-a' },
    { name: 'a cube named like its namespace', cube: 'orders', namespace: 'orders' },
  ])('$name moves into it, data and positions intact', async ({ cube, namespace }) => {
    await cubeWithData(cube, namespace);
    const key = { namespace, name: cube };
    const before = positionsAt(key);
    expect(before).toEqual(['0@3']);
    asBefore(key);
    expect(listCubeDirectories(dataDir)).not.toContainEqual(key);

    const { moved, problems } = migrateCubeDirectories(dataDir);
    expect(problems).toEqual([]);
    expect(moved.map((m) => m.to)).toEqual([key]);
    expect(listCubeDirectories(dataDir)).toEqual([key]);
    expect(positionsAt(key)).toEqual(before);
    // A second start finds nothing left to move.
    expect(migrateCubeDirectories(dataDir)).toEqual({ moved: [], problems: [] });
  });

  test('a cube whose checkpoint names no namespace waits under `default`, its namespace still unknown', async () => {
    await cubeWithData('orders');
    asBefore({ namespace: 'default', name: 'orders' }, true);
    expect(migrateCubeDirectories(dataDir).moved.map((m) => m.to)).toEqual([
      { namespace: 'default', name: 'orders' },
    ]);
    const spec = CubeChannel.readSpec(dataDir, { namespace: 'default', name: 'orders' });
    expect(spec?.replicaSet).toBe('rs-a');
    expect(spec?.namespace).toBeUndefined();
  });

  test('a move cut short between its two renames is finished at the next start', async () => {
    await cubeWithData('orders', 'team-a');
    const legacy = asBefore({ namespace: 'team-a', name: 'orders' });
    renameSync(legacy, join(dataDir, 'cubes', '.moving-orders'));
    const { moved, problems } = migrateCubeDirectories(dataDir);
    expect(problems).toEqual([]);
    expect(moved.map((m) => m.to)).toEqual([{ namespace: 'team-a', name: 'orders' }]);
    expect(positionsAt({ namespace: 'team-a', name: 'orders' })).toEqual(['0@3']);
    expect(existsSync(join(dataDir, 'cubes', '.moving-orders'))).toBe(false);
  });

  test('a place holding no checkpoint (a first open cut short) is taken over', async () => {
    await cubeWithData('orders', 'team-a');
    asBefore({ namespace: 'team-a', name: 'orders' });
    const place = cubeDirectory(dataDir, { namespace: 'team-a', name: 'orders' });
    mkdirSync(join(place, 'fragments'), { recursive: true });
    expect(migrateCubeDirectories(dataDir).problems).toEqual([]);
    expect(positionsAt({ namespace: 'team-a', name: 'orders' })).toEqual(['0@3']);
  });

  test('a directory whose place holds a checkpoint, or whose checkpoint is unreadable, stays where it is and is reported', async () => {
    await cubeWithData('orders', 'team-a');
    const legacy = asBefore({ namespace: 'team-a', name: 'orders' });
    await cubeWithData('orders', 'team-a');
    mkdirSync(join(dataDir, 'cubes', 'broken'));
    writeFileSync(join(dataDir, 'cubes', 'broken', 'checkpoint.json'), '{"version":');

    const { moved, problems } = migrateCubeDirectories(dataDir);
    expect(moved).toEqual([]);
    expect(problems.map((p) => p.dir).sort()).toEqual([join(dataDir, 'cubes', 'broken'), legacy]);
    expect(problems.find((p) => p.dir === legacy)?.error).toMatch(/exists already/);
    expect(existsSync(join(legacy, 'checkpoint.json'))).toBe(true);
  });
});
