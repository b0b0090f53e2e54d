// ReceiverCubes: one GET /v1/cubes per receiver per period for every cube, and a cube changed
// since (an assign, a pause, a seal) read alone until a listing begun after the change, so that
// placing 1,000 cubes does not read a receiver's whole listing 1,000 times.
import { ReceiverCubes } from '../../src/operator/receiver-cubes.ts';
import type { CubeSummary } from '../../src/protocol/admin-api.ts';
import type { CubeKey } from '../../src/protocol/cube-paths.ts';
import { ManualClock } from '../../src/operator/runtime/clock.ts';
import { cubeSummary as summary } from '../support/cube-summaries.ts';

/** A receiver whose listings and single reads the test answers one by one. */
function fakeReceiver() {
  const listings: ((cubes: CubeSummary[]) => void)[] = [];
  const singles: ((cube: CubeSummary | undefined) => void)[] = [];
  const calls: string[] = [];
  return {
    calls,
    source: {
      list: (baseUrl: string) => {
        calls.push(`list ${baseUrl}`);
        return new Promise<CubeSummary[]>((resolve) => listings.push(resolve));
      },
      one: (baseUrl: string, cube: CubeKey) => {
        calls.push(`one ${baseUrl} ${cube.namespace}/${cube.name}`);
        return new Promise<CubeSummary | undefined>((resolve) => singles.push(resolve));
      },
    },
    list: (cubes: CubeSummary[]) => listings.shift()!(cubes),
    one: (cube: CubeSummary | undefined) => singles.shift()!(cube),
  };
}

const url = 'http://127.0.0.1:8080';
const key = (name: string, namespace = 'default'): CubeKey => ({ namespace, name });
/** Lets the reads under way go as far as the fake's answers allow. */
const settle = () => new Promise((resolve) => setImmediate(resolve));

function setUp() {
  const clock = new ManualClock();
  const receiver = fakeReceiver();
  const cubes = new ReceiverCubes(receiver.source, { maxAgeMs: 1_000, clock });
  return { clock, receiver, cubes };
}

test('concurrent reads of many cubes make one listing, answered to each, by namespace and name', async () => {
  const { receiver, cubes } = setUp();
  const reads = [key('a'), key('b'), key('a', 'shop'), key('gone')].map((k) => cubes.get(url, k));
  receiver.list([summary('a'), summary('b'), summary('a', 'd9', 'shop')]);
  const answers = await Promise.all(reads);
  expect(answers.map((a) => a && `${a.namespace}/${a.cube}/${a.specDigest}`)).toEqual([
    'default/a/d1',
    'default/b/d1',
    'shop/a/d9',
    undefined,
  ]);
  expect(receiver.calls).toEqual([`list ${url}`]);
});

test('a change to one cube has that cube read alone; the others keep the listing', async () => {
  const { receiver, cubes } = setUp();
  const first = cubes.get(url, key('a'));
  receiver.list([summary('a'), summary('b')]);
  await first;
  cubes.changedOn(url, key('a'));
  expect((await cubes.get(url, key('b')))?.specDigest).toBe('d1');
  const changed = cubes.get(url, key('a'));
  await settle();
  receiver.one(summary('a', 'd2'));
  expect((await changed)?.specDigest).toBe('d2');
  // The single read serves until the cube changes again.
  expect((await cubes.get(url, key('a')))?.specDigest).toBe('d2');
  expect(receiver.calls).toEqual([`list ${url}`, `one ${url} default/a`]);
});

/** Cube a listed, then changed: the get after the change, its single read under way. */
async function readAfterChange({ receiver, cubes }: ReturnType<typeof setUp>) {
  const first = cubes.get(url, key('a'));
  receiver.list([summary('a')]);
  await first;
  cubes.changedOn(url, key('a'));
  const read = cubes.get(url, key('a'));
  await settle();
  return { read };
}

test('a cube the receiver no longer holds after a change reads as undefined, and stays so', async () => {
  const fixture = setUp();
  const { receiver, cubes } = fixture;
  const { read: gone } = await readAfterChange(fixture);
  receiver.one(undefined);
  expect(await gone).toBeUndefined();
  expect(await cubes.get(url, key('a'))).toBeUndefined();
  expect(receiver.calls).toHaveLength(2);
});

test('a listing begun before a change does not answer for the changed cube; one begun after does', async () => {
  const { clock, receiver, cubes } = setUp();
  const first = cubes.get(url, key('a'));
  cubes.changedOn(url, key('a')); // while the listing is under way
  await settle();
  receiver.list([summary('a', 'old')]);
  await settle();
  receiver.one(summary('a', 'new'));
  expect((await first)?.specDigest).toBe('new');
  clock.advance(1_000);
  const later = cubes.get(url, key('a'));
  receiver.list([summary('a', 'newer')]);
  expect((await later)?.specDigest).toBe('newer');
  expect(receiver.calls).toEqual([`list ${url}`, `one ${url} default/a`, `list ${url}`]);
});

test('a single read under way when the cube changes again is not kept', async () => {
  const fixture = setUp();
  const { receiver, cubes } = fixture;
  const { read: racing } = await readAfterChange(fixture);
  cubes.changedOn(url, key('a'));
  receiver.one(summary('a', 'd2'));
  await racing;
  const after = cubes.get(url, key('a'));
  await settle();
  receiver.one(summary('a', 'd3'));
  expect((await after)?.specDigest).toBe('d3');
  expect(receiver.calls.filter((c) => c.startsWith('one'))).toHaveLength(2);
});

test('a change to the whole receiver drops its listing', async () => {
  const { receiver, cubes } = setUp();
  const first = cubes.get(url, key('a'));
  receiver.list([summary('a')]);
  await first;
  cubes.changedOn(url);
  const again = cubes.get(url, key('a'));
  receiver.list([summary('a', 'd2')]);
  expect((await again)?.specDigest).toBe('d2');
  expect(receiver.calls).toEqual([`list ${url}`, `list ${url}`]);
});
