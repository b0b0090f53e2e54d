// SharedReads as the operator reads receivers with it: one GET /v1/cubes per receiver per period,
// whatever the number of cubes asking; shared while in flight; dropped by a mutating call so that
// the next read is fresh.
import { SharedReads } from '../../src/operator/shared-reads.ts';
import type { CubeSummaries, CubeSummary } from '../../src/protocol/admin-api.ts';
import { ManualClock } from '../../src/operator/runtime/clock.ts';
import { cubeSummary as summary } from '../support/cube-summaries.ts';

/** A receiver whose answers the test releases one by one. */
function fakeReceiver() {
  const pending: { resolve: (a: CubeSummaries) => void; reject: (e: Error) => void }[] = [];
  const calls: string[] = [];
  const fetch = (baseUrl: string): Promise<CubeSummaries> => {
    calls.push(baseUrl);
    return new Promise((resolve, reject) => pending.push({ resolve, reject }));
  };
  const answer = (cubes: CubeSummary[]): void =>
    pending.shift()!.resolve({ receiver: 'rs-a-0', replicaSet: 'rs-a', cubes });
  const fail = (message: string): void => pending.shift()!.reject(new Error(message));
  return { fetch, calls, answer, fail };
}

const url = 'http://127.0.0.1:8080';

function setUp() {
  const clock = new ManualClock();
  const receiver = fakeReceiver();
  const reads = new SharedReads({
    fetch: async (baseUrl: string) =>
      new Map((await receiver.fetch(baseUrl)).cubes.map((c) => [c.cube, c])),
    maxAgeMs: 1_000,
    clock,
  });
  const cache = {
    cube: (baseUrl: string, cube: string, signal?: AbortSignal) =>
      reads.get(baseUrl, signal).then((cubes) => cubes.get(cube)),
    invalidate: (baseUrl: string) => reads.invalidate(baseUrl),
  };
  return { clock, receiver, cache };
}

test('concurrent reads of many cubes make one call, answered to each', async () => {
  const { receiver, cache } = setUp();
  const reads = ['a', 'b', 'c', 'gone'].map((cube) => cache.cube(url, cube));
  receiver.answer([summary('a'), summary('b'), summary('c')]);
  const answers = await Promise.all(reads);
  expect(answers.map((a) => a?.cube)).toEqual(['a', 'b', 'c', undefined]);
  expect(receiver.calls).toHaveLength(1);
});

test('an answer serves for the period, then the receiver is asked again', async () => {
  const { clock, receiver, cache } = setUp();
  const first = cache.cube(url, 'a');
  receiver.answer([summary('a', 'd1')]);
  await first;
  clock.advance(999);
  expect((await cache.cube(url, 'a'))?.specDigest).toBe('d1');
  clock.advance(1);
  const second = cache.cube(url, 'a');
  receiver.answer([summary('a', 'd2')]);
  expect((await second)?.specDigest).toBe('d2');
  expect(receiver.calls).toHaveLength(2);
});

test('a mutating call drops the answer, and an answer to a call started before it is not kept', async () => {
  const { receiver, cache } = setUp();
  const before = cache.cube(url, 'a');
  cache.invalidate(url); // e.g. a pause answered while the status call was in flight
  receiver.answer([summary('a', 'before the pause')]);
  expect((await before)?.specDigest).toBe('before the pause');
  const after = cache.cube(url, 'a');
  receiver.answer([summary('a', 'after the pause')]);
  expect((await after)?.specDigest).toBe('after the pause');
  expect(receiver.calls).toHaveLength(2);
});

test('a failure is shared by the cubes asking within a short while, then retried', async () => {
  const { clock, receiver, cache } = setUp();
  const reads = [cache.cube(url, 'a'), cache.cube(url, 'b')];
  receiver.fail('connect ECONNREFUSED');
  await expect(Promise.all(reads)).rejects.toThrow('ECONNREFUSED');
  await expect(cache.cube(url, 'c')).rejects.toThrow('ECONNREFUSED');
  expect(receiver.calls).toHaveLength(1);
  clock.advance(1_000);
  const retry = cache.cube(url, 'a');
  receiver.answer([summary('a')]);
  expect((await retry)?.cube).toBe('a');
  expect(receiver.calls).toHaveLength(2);
});

test('an aborted reader stops waiting; the others still get the answer', async () => {
  const { receiver, cache } = setUp();
  const abort = new AbortController();
  const aborted = cache.cube(url, 'a', abort.signal);
  const other = cache.cube(url, 'a');
  abort.abort(new Error('lease lost'));
  await expect(aborted).rejects.toThrow('lease lost');
  receiver.answer([summary('a')]);
  expect((await other)?.cube).toBe('a');
});
