// A cube's flush writes off the event loop: it takes what it writes in one step, so records
// ingested while its files are written wait for the next checkpoint, and the checkpoint's positions
// cover exactly the rows of the fragments it names. Flushes of a cube run one at a time, requests
// made while one runs share the next; a failed write is written again, every segment's record
// with it. Real files; a fake consumer stands in for Kafka.
import { jest } from '@jest/globals';
import { mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CheckpointManifest } from '../../src/receiver/checkpoint.ts';
import { CubeChannel } from '../../src/receiver/cube-channel.ts';
import { CubeStore, readCubeCheckpoint } from '../../src/receiver/cube-store.ts';
import {
  type FakePartitionConsumer,
  countsByCountry,
  fakeChannelOptions,
} from '../support/fake-partition-consumer.ts';

const MINUTE = 60_000;
const T0 = Date.UTC(2026, 10, 30, 12, 0, 0);

let dir: string;
let channel: CubeChannel;
let consumer: FakePartitionConsumer;

/** Cube `orders`, one-minute windows, no lateness; no periodic flush (1 h): the tests flush. */
async function openChannel(): Promise<void> {
  const schema = countsByCountry('1m', '0s');
  const options = { flushIntervalMs: 3_600_000 };
  channel = new CubeChannel(fakeChannelOptions(dir, schema, (c) => (consumer = c), options));
  await channel.open();
}

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'streamcube-async-flush-'));
  await openChannel();
  await channel.assign([{ partition: 0, position: '0', epoch: 1, watermark: null }]);
});

afterEach(async () => {
  jest.restoreAllMocks();
  await channel.close();
  rmSync(dir, { recursive: true, force: true });
});

const cubeDir = () => join(dir, 'data', 'cubes', 'default', 'orders');
const turn = () => new Promise((resolve) => setImmediate(resolve));

/**
 * What the checkpoint on disk holds: partition 0's position, the events counted by the fragments
 * it names (each event is one row count), and the record file of each segment.
 */
function onDisk(): { position: string; events: number; records: string[] } {
  const checkpoint = readCubeCheckpoint(cubeDir())!;
  const store = new CubeStore(cubeDir());
  const events = checkpoint.segments
    .flatMap((s) => s.fragments)
    .flatMap((f) => store.readFragment(f))
    .reduce((sum, row) => sum + Number(row.values[0]), 0);
  const manifest = JSON.parse(
    readFileSync(join(cubeDir(), 'checkpoint.json'), 'utf8'),
  ) as CheckpointManifest;
  return {
    position: checkpoint.partitions.find((p) => p.partition === 0)!.position,
    events,
    records: manifest.segments.map((s) => s.record),
  };
}

/** Makes a directory of the cube's unwritable (a file in its place) until the returned call. */
function breakDirectory(name: string): () => void {
  const path = join(cubeDir(), name);
  renameSync(path, `${path}.away`);
  writeFileSync(path, '');
  return () => {
    rmSync(path);
    renameSync(`${path}.away`, path);
  };
}

test('ingest goes on while a flush writes; the checkpoint holds what the flush took, no more', async () => {
  consumer.deliver(0, 0, 3, T0);
  let done = false;
  const flushed = channel.flush().then(() => {
    done = true;
  });
  // The event loop turns while the flush's files are written: records keep coming in.
  await turn();
  expect(done).toBe(false);
  consumer.deliver(0, 3, 4, T0 + MINUTE);
  expect(channel.status().partitions[0]!.position).toBe('7');
  await flushed;
  expect(onDisk()).toMatchObject({ position: '3', events: 3 });
  await channel.flush();
  expect(onDisk()).toMatchObject({ position: '7', events: 7 });
});

test('flushes run one at a time; those asked for while one runs share the next, which holds all they saw', async () => {
  let inFlight = 0;
  let most = 0;
  let commits = 0;
  for (const method of ['writeFragments', 'commit'] as const) {
    const original = Object.getOwnPropertyDescriptor(CubeStore.prototype, method)!.value as (
      this: CubeStore,
      ...args: unknown[]
    ) => Promise<void>;
    jest.spyOn(CubeStore.prototype, method).mockImplementation(async function (
      this: CubeStore,
      ...args: unknown[]
    ) {
      inFlight += 1;
      most = Math.max(most, inFlight);
      if (method === 'commit') commits += 1;
      try {
        await original.apply(this, args);
      } finally {
        inFlight -= 1;
      }
    });
  }
  consumer.deliver(0, 0, 3, T0);
  const first = channel.flush();
  await turn();
  consumer.deliver(0, 3, 2, T0 + MINUTE);
  const second = channel.flush();
  expect(second).not.toBe(first); // the first took its snapshot already
  consumer.deliver(0, 5, 1, T0 + 2 * MINUTE);
  const third = channel.flush();
  expect(third).toBe(second); // not started yet: shared
  await first;
  expect(onDisk()).toMatchObject({ position: '3', events: 3 });
  await third;
  expect(onDisk()).toMatchObject({ position: '6', events: 6 });
  expect(commits).toBe(2);
  expect(most).toBe(1);
});

test('a request that changes nothing answers once what the same request before it changed is durable', async () => {
  consumer.deliver(0, 0, 3, T0);
  const first = channel.pause([0]);
  const again = await channel.pause([0]);
  expect(again).toMatchObject([{ state: 'paused', position: '3' }]);
  expect(readCubeCheckpoint(cubeDir())!.partitions[0]).toMatchObject({
    state: 'paused',
    position: '3',
  });
  await first;
});

test('a flush whose writes fail is retried by the next one, with its fragments and every record', async () => {
  // Three segments, checkpointed.
  for (let w = 0; w < 3; w++) consumer.deliver(0, 2 * w, 2, T0 + w * MINUTE);
  await channel.flush();
  const before = onDisk();
  expect(before).toMatchObject({ position: '6', events: 6 });
  expect(before.records).toHaveLength(3);

  // Records cannot be written: the flush fails after taking the changes of the last segment.
  consumer.deliver(0, 6, 1, T0 + 2 * MINUTE + 10);
  const restoreRecords = breakDirectory('segments');
  await expect(channel.flush()).rejects.toThrow(/ENOTDIR/);
  restoreRecords();
  expect(onDisk()).toEqual(before);
  // Nothing changed since: the next flush still writes, every segment's record anew.
  await channel.flush();
  const retried = onDisk();
  expect(retried).toMatchObject({ position: '7', events: 7 });
  expect(retried.records.filter((r) => before.records.includes(r))).toEqual([]);

  // Fragments cannot be written: the rows the flush took are written by the next one.
  consumer.deliver(0, 7, 2, T0 + 3 * MINUTE);
  const restoreFragments = breakDirectory('fragments');
  await expect(channel.flush()).rejects.toThrow(/ENOTDIR/);
  restoreFragments();
  expect(onDisk()).toEqual(retried);
  consumer.deliver(0, 9, 1, T0 + 3 * MINUTE + 10);
  await channel.flush();
  expect(onDisk()).toMatchObject({ position: '10', events: 10 });

  // A restart restores exactly that.
  await channel.close();
  await openChannel();
  expect(channel.status()).toMatchObject({ ingested: 10, partitions: [{ position: '10' }] });
  expect(channel.status().segments.map((s) => s.rowCount)).toEqual([1, 1, 1, 1]);
});
