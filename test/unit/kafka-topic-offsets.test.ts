// readTopicOffsets: a partition missing from kafkajs's cached metadata (added to the topic lately)
// makes the caller's client renew once and the read repeat; without leave to renew, what was read.
import type { Admin } from 'kafkajs';
import { readTopicOffsets } from '../../src/kafka/topic-offsets.ts';

/** A fake admin per "connection": the first knows partitions 0-1, any renewed one 0-2. */
function clients() {
  let generation = 0;
  let reads = 0;
  const admin = (): Promise<Admin> => {
    const known = generation === 0 ? [0, 1] : [0, 1, 2];
    return Promise.resolve({
      fetchTopicOffsets: () => {
        reads += 1;
        return Promise.resolve(
          known.map((partition) => ({
            partition,
            low: String(partition),
            high: String(10 + partition),
            offset: String(10 + partition),
          })),
        );
      },
    } as unknown as Admin);
  };
  const renew = (): Promise<void> => {
    generation += 1;
    return Promise.resolve();
  };
  return { admin, renew, reads: () => reads, renewals: () => generation };
}

test('every expected partition known: one read, no renewal', async () => {
  const c = clients();
  const offsets = await readTopicOffsets('t', [0, 1], c.admin, c.renew);
  expect(offsets.get(1)).toEqual({ low: 1n, high: 11n });
  expect([c.reads(), c.renewals()]).toEqual([1, 0]);
});

test('a partition missing: the client is renewed and the read repeated once', async () => {
  const c = clients();
  const offsets = await readTopicOffsets('t', [0, 1, 2], c.admin, c.renew);
  expect(offsets.get(2)).toEqual({ low: 2n, high: 12n });
  expect([c.reads(), c.renewals()]).toEqual([2, 1]);
});

test('a partition still missing after the renewal, or no leave to renew: left out', async () => {
  const c = clients();
  expect([...(await readTopicOffsets('t', [0, 5], c.admin, c.renew)).keys()]).toEqual([0, 1, 2]);
  expect(c.renewals()).toBe(1);
  const d = clients();
  expect([...(await readTopicOffsets('t', [0, 2], d.admin)).keys()]).toEqual([0, 1]);
  expect([d.reads(), d.renewals()]).toEqual([1, 0]);
});
