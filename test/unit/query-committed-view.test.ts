// The committed-view reader: of each window and replica set, the newest commit record and the
// hand-offs it lists — written here by the product's own hand-off and commit code — and the rows
// of those hand-offs read back from their Arrow files.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readCommittedView, readHandOffRows } from '../../src/query/committed-view.ts';
import { FilesystemDeepStorage } from '../../src/receiver/deep-storage-filesystem.ts';
import { type HandOffTarget, handOffSegment } from '../../src/receiver/hand-off.ts';
import { commitWindow, recordedHandOff } from '../../src/receiver/hand-off-commit.ts';
import type { Segment } from '../../src/receiver/segments.ts';
import { MemoryDeepStorage } from '../support/memory-deep-storage.ts';
import { schemaOf } from '../support/schemas.ts';

const H = 3_600_000;
const w0 = Date.UTC(2026, 0, 1, 10);
const schema = schemaOf(['country'], { events: 'count', revenue: 'sum(price)' }, { window: '1h' });

/** The hand-off target of `receiver` (`rs-a-0`), of its replica set. */
const target = (receiver: string): HandOffTarget => ({
  namespace: 'shop',
  cube: 'orders',
  replicaSet: receiver.replace(/-[0-9]+$/, ''),
  receiver,
  schema,
});

function segment(
  windowStart: number,
  p: number,
  from: bigint,
  to: bigint,
  rows: [string, number, number][],
): Segment {
  return {
    key: windowStart,
    windowStart,
    windowEnd: windowStart + H,
    state: 'IMMUTABLE',
    rows: new Map(rows.map(([c, n, r]) => [c, { dimensions: [c], values: [n, r] }])),
    delta: new Map(),
    ranges: new Map([[p, [{ from, to }]]]),
    epochs: new Map([[p, 1]]),
  };
}

async function handOffAndCommit(
  storage: FilesystemDeepStorage | MemoryDeepStorage,
  t: HandOffTarget,
  s: Segment,
): Promise<void> {
  await handOffSegment(storage, t, s);
  const outcome = await commitWindow({
    storage,
    target: t,
    windowStart: s.windowStart,
    mine: [recordedHandOff(t, s)],
  });
  expect(outcome.kind).toBe('committed');
}

let dir: string;
beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'streamcube-committed-view-'))));
afterEach(() => rmSync(dir, { recursive: true, force: true }));

test.each([
  ['a directory', () => new FilesystemDeepStorage(dir)],
  ['a bucket (in memory)', () => new MemoryDeepStorage()],
])(
  'in %s: the newest record of each window and set, its hand-offs and their rows',
  async (_, open) => {
    const storage = open();
    // rs-a: window 0 committed by replica 0, then more of it by replica 1 (version 2); window 1.
    await handOffAndCommit(storage, target('rs-a-0'), segment(w0, 0, 0n, 10n, [['de', 10, 5]]));
    await handOffAndCommit(
      storage,
      target('rs-a-1'),
      segment(w0, 0, 0n, 15n, [
        ['de', 12, 6],
        ['fr', 3, 1.5],
      ]),
    );
    await handOffAndCommit(storage, target('rs-a-0'), segment(w0 + H, 0, 15n, 20n, [['us', 5, 2]]));
    // rs-b: window 0, partition 1. A hand-off nobody committed is not in the view.
    await handOffAndCommit(storage, target('rs-b-0'), segment(w0, 1, 0n, 7n, [['jp', 7, 7]]));
    await handOffSegment(storage, target('rs-b-1'), segment(w0 + H, 1, 7n, 9n, [['jp', 2, 1]]));

    const view = await readCommittedView(storage, { namespace: 'shop', cube: 'orders' });
    expect(
      view.map((w) => [w.windowStart - w0, w.replicaSet, w.record.version, w.record.receiver]),
    ).toEqual([
      [0, 'rs-a', 2, 'rs-a-1'],
      [0, 'rs-b', 1, 'rs-b-0'],
      [H, 'rs-a', 1, 'rs-a-0'],
    ]);
    const rows = await Promise.all(
      view.flatMap((w) => w.handOffKeys.map((key) => readHandOffRows(storage, key, schema))),
    );
    expect(rows).toEqual([
      [
        { dimensions: ['de'], values: [12, 6] },
        { dimensions: ['fr'], values: [3, 1.5] },
      ],
      [{ dimensions: ['jp'], values: [7, 7] }],
      [{ dimensions: ['us'], values: [5, 2] }],
    ]);
    // Another namespace's cube of the same name is another cube.
    expect(await readCommittedView(storage, { namespace: 'other', cube: 'orders' })).toEqual([]);
  },
);
