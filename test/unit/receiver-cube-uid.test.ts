// The cube's uid on a receiver (issue 27): taken from the assign that names it, kept in the
// checkpoint so that a restart comes back with it (a checkpoint without one: not known), and
// written into the cube's hand-off manifests and commit records.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readCommittedView, readHandOffManifest } from '../../src/query/committed-view.ts';
import { CubeChannel } from '../../src/receiver/cube-channel.ts';
import { readCubeCheckpoint } from '../../src/receiver/cube-store.ts';
import { FilesystemDeepStorage } from '../../src/receiver/deep-storage-filesystem.ts';
import {
  type FakePartitionConsumer,
  countsByCountry,
  fakeChannelOptions,
} from '../support/fake-partition-consumer.ts';

const T0 = Date.UTC(2026, 10, 30, 12, 0, 0);
const schema = countsByCountry('1m', '0s');
const key = { namespace: 'default', name: 'orders' };

let dir: string;
let consumer: FakePartitionConsumer | undefined;
const channels: CubeChannel[] = [];

beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'streamcube-cube-uid-'))));
afterEach(async () => {
  for (const c of channels.splice(0)) await c.close();
  rmSync(dir, { recursive: true, force: true });
});

async function open(cubeUid?: string): Promise<CubeChannel> {
  const channel = new CubeChannel(
    fakeChannelOptions(dir, schema, (c) => (consumer = c), cubeUid ? { cubeUid } : {}),
  );
  channels.push(channel);
  await channel.open();
  return channel;
}

const checkpoint = () => readCubeCheckpoint(join(dir, 'data', 'cubes', 'default', 'orders'))!;

test('a channel without a uid takes the one an assign names; its checkpoint keeps it across a restart', async () => {
  const first = await open();
  expect(first.cubeUid).toBeUndefined();
  expect(checkpoint().cubeUid).toBeUndefined();
  expect(CubeChannel.readSpec(join(dir, 'data'), key)?.cubeUid).toBeUndefined();

  first.adoptCubeUid('uid-1');
  await first.flush();
  expect(first.cubeUid).toBe('uid-1');
  expect(checkpoint().cubeUid).toBe('uid-1');
  await first.close();
  channels.splice(0);

  // A restart: the receiver opens the cube with what its checkpoint says.
  const spec = CubeChannel.readSpec(join(dir, 'data'), key)!;
  expect(spec.cubeUid).toBe('uid-1');
  const again = await open(spec.cubeUid);
  expect(again.cubeUid).toBe('uid-1');
  await again.flush();
  expect(checkpoint().cubeUid).toBe('uid-1');
});

test("the uid is written into the cube's hand-off manifests and commit records", async () => {
  const channel = await open('uid-2');
  await channel.assign([{ partition: 0, position: '0', epoch: 1, watermark: null }]);
  consumer!.deliver(0, 0, 5, T0);
  await channel.seal(10_000);
  expect(channel.allHandedOff()).toBe(true);
  const storage = new FilesystemDeepStorage(join(dir, 'deep'));
  const view = await readCommittedView(storage, { cube: 'orders' });
  expect(view).toHaveLength(1);
  expect(view[0]!.record.cubeUid).toBe('uid-2');
  expect((await readHandOffManifest(storage, view[0]!.handOffKeys[0]!)).cubeUid).toBe('uid-2');
});

test('a cube holding segments handed off without a uid keeps writing without one when an assign names it: every commit record lists directories that exist', async () => {
  const channel = await open();
  await channel.assign([{ partition: 0, position: '0', epoch: 1, watermark: null }]);
  consumer!.deliver(0, 0, 5, T0);
  await channel.flush();
  // The window's first generation handed off (a release seals it) before the uid is known.
  await channel.release([0], { '0': '5' });
  await channel.seal(10_000);
  expect(channel.allHandedOff()).toBe(true);
  // The upgraded operator's next assign names the uid; the cube takes the partition back.
  channel.adoptCubeUid('uid-3');
  expect(channel.cubeUid).toBeUndefined();
  await channel.assign([{ partition: 0, position: '5', epoch: 2, watermark: null }]);
  consumer!.deliver(0, 5, 3, T0);
  await channel.seal(10_000);
  expect(channel.allHandedOff()).toBe(true);
  const storage = new FilesystemDeepStorage(join(dir, 'deep'));
  const view = await readCommittedView(storage, { cube: 'orders' });
  expect(view).toHaveLength(1);
  expect(view[0]!.record.cubeUid).toBeUndefined();
  expect(view[0]!.handOffKeys).toHaveLength(2);
  for (const k of view[0]!.handOffKeys) await readHandOffManifest(storage, k);
});
