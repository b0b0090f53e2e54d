// Hand-off directories: one per segment content. A segment that regains a partition after a move
// may have the same highest epoch as the one handed off before it, in the same window; its
// hand-off must not collide with that one (issue 9: every retry failed, and Sealing waited
// forever). A repeated hand-off of one segment finds its own directory, whatever order its maps
// were built in (live, or restored from a checkpoint).
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cubeSchema } from '../../src/api/cube.ts';
import { FilesystemDeepStorage } from '../../src/receiver/deep-storage-filesystem.ts';
import { type HandOffTarget, handOffKey, handOffSegment } from '../../src/receiver/hand-off.ts';
import type { Segment } from '../../src/receiver/segments.ts';

const window = Date.UTC(2026, 0, 1, 10);
let deep: string;
let target: HandOffTarget;
let storage: FilesystemDeepStorage;

beforeEach(() => {
  deep = mkdtempSync(join(tmpdir(), 'streamcube-hand-off-'));
  storage = new FilesystemDeepStorage(deep);
  target = {
    cube: 'orders',
    replicaSet: 'rs-a',
    receiver: 'rs-a-0',
    schema: cubeSchema.parse({
      timestampField: 'ts',
      dimensions: ['country'],
      measures: [{ name: 'events', function: 'count' }],
      window: '1h',
    }),
  };
});
afterEach(() => rmSync(deep, { recursive: true, force: true }));

function segment(
  epochs: [number, number][],
  ranges: [number, [bigint, bigint][]][],
  rows = 1,
): Segment {
  return {
    key: window,
    windowStart: window,
    windowEnd: window + 3_600_000,
    state: 'IMMUTABLE',
    rows: new Map(
      Array.from({ length: rows }, (_, i) => [`c${i}`, { dimensions: [`c${i}`], values: [1] }]),
    ),
    delta: new Map(),
    ranges: new Map(ranges.map(([p, rs]) => [p, rs.map(([from, to]) => ({ from, to }))])),
    epochs: new Map(epochs),
  };
}

test('a later segment of the same window with the same highest epoch gets its own directory', async () => {
  // Before: partitions 0 (epoch 3) and 1 (epoch 7). Partition 0 moved away and back at epoch 5;
  // the new segment of the window holds offsets 40–60 of partition 0 and the same highest epoch.
  const first = segment(
    [
      [0, 3],
      [1, 7],
    ],
    [
      [0, [[0n, 40n]]],
      [1, [[0n, 25n]]],
    ],
  );
  const later = segment(
    [
      [0, 5],
      [1, 7],
    ],
    [[0, [[40n, 60n]]]],
  );
  const a = await handOffSegment(storage, target, first);
  const b = await handOffSegment(storage, target, later);
  expect(a).not.toBe(b);
  expect(readdirSync(join(deep, 'orders', `window=${window}`, 'replicaSet=rs-a')).sort()).toEqual(
    [a, b].map((dir) => dir.split('/').at(-1)).sort(),
  );
  for (const dir of [a, b]) expect(dir).toMatch(/rs-a-0\.e7\.[0-9a-f]{12}$/);
});

test('a repeated hand-off of one segment finds its directory, its maps built in any order', async () => {
  const live = segment(
    [
      [3, 2],
      [1, 2],
    ],
    [
      [3, [[10n, 20n]]],
      [1, [[0n, 5n]]],
    ],
  );
  const restored = segment(
    [
      [1, 2],
      [3, 2],
    ],
    [
      [1, [[0n, 5n]]],
      [3, [[10n, 20n]]],
    ],
  );
  expect(handOffKey(target, restored)).toBe(handOffKey(target, live));
  const dir = await handOffSegment(storage, target, live);
  expect(await handOffSegment(storage, target, restored)).toBe(dir);
  expect(readdirSync(join(deep, 'orders', `window=${window}`, 'replicaSet=rs-a'))).toHaveLength(1);
});
