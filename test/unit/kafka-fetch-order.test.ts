// fetchOrder: partitions served longest ago (or never) first, so that a broker filling a fetch's
// byte budget in request order does not starve the partitions listed last.
import { fetchOrder } from '../../src/kafka/fetch-order.ts';

const topic = (name: string, ...partitions: number[]) => ({
  topic: name,
  partitions: partitions.map((partition) => ({ partition })),
});
const flat = (topics: ReturnType<typeof fetchOrder<{ partition: number }>>) =>
  topics.map((t) => `${t.topic}:${t.partitions.map((p) => p.partition).join(',')}`);

describe('fetchOrder', () => {
  test.each([
    {
      name: 'none served yet: the order given',
      topics: [topic('a', 0, 1, 2, 3)],
      served: {},
      expected: ['a:0,1,2,3'],
    },
    {
      name: 'the partitions just served go last, in the order given among equals',
      topics: [topic('a', 0, 1, 2, 3)],
      served: { 'a:0': 5, 'a:1': 5 },
      expected: ['a:2,3,0,1'],
    },
    {
      name: 'served longest ago first',
      topics: [topic('a', 0, 1, 2, 3)],
      served: { 'a:0': 7, 'a:1': 3, 'a:2': 9, 'a:3': 1 },
      expected: ['a:3,1,0,2'],
    },
    {
      name: 'topics by their longest-waiting partition',
      topics: [topic('a', 0, 1), topic('b', 0, 1)],
      served: { 'a:0': 4, 'a:1': 4, 'b:0': 2, 'b:1': 6 },
      expected: ['b:0,1', 'a:0,1'],
    },
    {
      name: 'a topic with a partition never served comes first',
      topics: [topic('a', 0), topic('b', 0, 1)],
      served: { 'a:0': 1, 'b:0': 8 },
      expected: ['b:1,0', 'a:0'],
    },
  ])('$name', ({ topics, served, expected }) => {
    const lastServed = (t: string, p: number): number | undefined =>
      (served as Record<string, number>)[`${t}:${p}`];
    expect(flat(fetchOrder(topics, lastServed))).toEqual(expected);
  });

  test('keeps what each partition carries', () => {
    const [t] = fetchOrder(
      [
        {
          topic: 'a',
          partitions: [
            { partition: 0, fetchOffset: '10' },
            { partition: 1, fetchOffset: '20' },
          ],
        },
      ],
      (_, p) => (p === 0 ? 1 : undefined),
    );
    expect(t!.partitions).toEqual([
      { partition: 1, fetchOffset: '20' },
      { partition: 0, fetchOffset: '10' },
    ]);
  });
});
