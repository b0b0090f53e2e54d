// What a cube's sink answers the consumer for a batch: nothing to wait for when neither the
// ingest pipeline nor the hand-offs wait, else one promise settling once both have.
import { bothSettled } from '../../src/receiver/cube-consumer.ts';

test('no wait when neither waits; the one wait when one does', () => {
  const wait = Promise.resolve();
  expect(bothSettled(undefined, undefined)).toBeUndefined();
  expect(bothSettled(wait, undefined)).toBe(wait);
  expect(bothSettled(undefined, wait)).toBe(wait);
});

test('with two waits, settles once both have', async () => {
  let release: () => void = () => undefined;
  const slow = new Promise<void>((resolve) => (release = resolve));
  let settled = false;
  const both = bothSettled(Promise.resolve(), slow)!.then(() => (settled = true));
  await new Promise((r) => setImmediate(r));
  expect(settled).toBe(false);
  release();
  await both;
  expect(settled).toBe(true);
});
