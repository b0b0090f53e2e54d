// A sum with a scale in the receiver's checkpoint: fragments hold its units as strings of digits,
// a restart answers the same exact decimal, and a checkpoint of before (version 2, the float sum
// in its fragments) restores as units, converted once: the next checkpoint holds them anew.
import { jest } from '@jest/globals';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CubeChannel } from '../../src/receiver/cube-channel.ts';
import { readCubeCheckpoint } from '../../src/receiver/cube-store.ts';
import { FakePartitionConsumer, fakeChannelOptions } from '../support/fake-partition-consumer.ts';
import { schemaOf } from '../support/schemas.ts';

const T0 = Date.UTC(2026, 11, 1, 12);
const schema = schemaOf(
  ['country'],
  { events: 'count', revenue: 'sum(price, 2)' },
  { window: '1h', allowedLateness: '0s' },
);
const prices = ['0.1', '0.2', ...Array.from({ length: 98 }, () => '360985.35')];
const exact = '35376564.60'; // 0.30 + 98 × 360985.35

let dir: string;
let channel: CubeChannel;
let consumer: FakePartitionConsumer;
const cubeDir = () => join(dir, 'data', 'cubes', 'default', 'orders');

async function openChannel(): Promise<void> {
  channel = new CubeChannel(fakeChannelOptions(dir, schema, (c) => (consumer = c)));
  await channel.open();
}

const revenue = () =>
  channel.query({ groupBy: [], filters: {}, measures: ['revenue'] }).rows[0]?.[0];

/** The fragment files the checkpoint names, and the lines of each. */
function fragments(): Map<string, string[]> {
  const named = readCubeCheckpoint(cubeDir())!.segments.flatMap((s) => s.fragments);
  return new Map(
    named.map((f) => [f, readFileSync(join(cubeDir(), 'fragments', f), 'utf8').split('\n')]),
  );
}

beforeEach(async () => {
  jest.useFakeTimers({ now: T0 });
  dir = mkdtempSync(join(tmpdir(), 'streamcube-scaled-'));
  await openChannel();
  await channel.assign([{ partition: 0, position: '0', epoch: 1, watermark: null }]);
  // In batches small enough to be parsed on this thread (larger ones go to a worker).
  const records = prices.map((p, i) => `{"ts":${T0 + i},"country":"de","price":${p}}`);
  for (let from = 0; from < records.length; from += 20)
    consumer.deliverValues(0, from, records.slice(from, from + 20));
  await jest.advanceTimersByTimeAsync(0);
  expect(revenue()).toBe(exact);
  await channel.close();
});

afterEach(async () => {
  await channel.close();
  jest.useRealTimers();
  rmSync(dir, { recursive: true, force: true });
});

test('fragments hold the units as strings; a restart answers the same decimal', async () => {
  expect(readCubeCheckpoint(cubeDir())!.version).toBe(3);
  // [dimensions, values, [partition, epoch] of the partitions that touched the row]
  expect([...fragments().values()].flat()).toEqual(['[["de"],[100,"3537656460"],[[0,1]]]']);
  await openChannel();
  expect(revenue()).toBe(exact);
});

test('a checkpoint of version 2, its fragments holding the float sum, restores as units once', async () => {
  // What the receiver of before wrote: version 2, and the float sum it had added.
  let floatSum = 0;
  for (const p of prices) floatSum += Number(p);
  expect(String(floatSum)).not.toBe(exact);
  const manifestFile = join(cubeDir(), 'checkpoint.json');
  const asVersion2 = (file: string) =>
    writeFileSync(file, readFileSync(file, 'utf8').replace('{"version":3,', '{"version":2,'));
  asVersion2(manifestFile);
  for (const record of readdirSync(join(cubeDir(), 'segments')))
    asVersion2(join(cubeDir(), 'segments', record));
  const [old] = [...fragments().keys()];
  writeFileSync(join(cubeDir(), 'fragments', old!), JSON.stringify([['de'], [100, floatSum]]));
  expect(readCubeCheckpoint(cubeDir())!.version).toBe(2);

  await openChannel();
  expect(revenue()).toBe(exact);
  // Written anew at once, as version 3: the converted rows in a fragment of their own.
  expect(readCubeCheckpoint(cubeDir())!.version).toBe(3);
  const now = fragments();
  expect([...now.keys()]).not.toContain(old);
  expect([...now.values()].flat()).toEqual(['[["de"],[100,"3537656460"]]']);
  expect(readdirSync(join(cubeDir(), 'fragments'))).not.toContain(old);
  // And a restart from it reads the units, without converting again.
  await channel.close();
  await openChannel();
  expect(revenue()).toBe(exact);
});
