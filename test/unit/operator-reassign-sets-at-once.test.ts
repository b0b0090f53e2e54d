// eachSetAtOnce: every replica set's calls start together; the results come back in the sets'
// order, and a failure is the first in that order, thrown only once every set has ended.
import { eachSetAtOnce } from '../../src/operator/reassign/receivers.ts';

const tick = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('eachSetAtOnce', () => {
  test('starts every set before any has ended, and answers in the sets order', async () => {
    const started: string[] = [];
    const release = new Map<string, () => void>();
    const run = eachSetAtOnce(['rs-a', 'rs-b', 'rs-c'], async (rs) => {
      started.push(rs);
      await new Promise<void>((resolve) => release.set(rs, resolve));
      return `${rs} done`;
    });
    await tick();
    expect(started).toEqual(['rs-a', 'rs-b', 'rs-c']);
    for (const rs of ['rs-c', 'rs-a', 'rs-b']) release.get(rs)!();
    await expect(run).resolves.toEqual(['rs-a done', 'rs-b done', 'rs-c done']);
  });

  test.each([
    { name: 'one set fails', fails: ['rs-b'], expected: 'rs-b failed' },
    {
      name: 'two fail: the first in the sets order',
      fails: ['rs-c', 'rs-a'],
      expected: 'rs-a failed',
    },
  ])('$name, after every set has ended', async ({ fails, expected }) => {
    const ended: string[] = [];
    const run = eachSetAtOnce(['rs-a', 'rs-b', 'rs-c'], async (rs) => {
      await tick();
      ended.push(rs);
      if (fails.includes(rs)) throw new Error(`${rs} failed`);
      return rs;
    });
    await expect(run).rejects.toThrow(expected);
    expect(ended.sort()).toEqual(['rs-a', 'rs-b', 'rs-c']);
  });

  test('no set: no call', async () => {
    await expect(eachSetAtOnce([], () => Promise.resolve(1))).resolves.toEqual([]);
  });
});
