// Lost offsets as the operator shows them: the replicas' reports of a partition merged, and each
// range told once — a range a status written before names is not told again.
import {
  mergeLostOffsets,
  newlyLostRanges,
  offsetsLostMessage,
} from '../../src/operator/lost-offsets.ts';

test('no replica lost anything: no field at all', () => {
  expect(mergeLostOffsets([{}, {}])).toEqual({});
});

test('replicas of one set: the largest total, the union of their ranges in order', () => {
  expect(
    mergeLostOffsets([
      { lostOffsets: '15', lostRanges: [['5', '20']] },
      {
        lostOffsets: '27',
        lostRanges: [
          ['30', '40'],
          ['3', '20'],
        ],
      },
      {},
    ]),
  ).toEqual({
    lostOffsets: '27',
    lostRanges: [
      { from: '3', to: '20' },
      { from: '5', to: '20' },
      { from: '30', to: '40' },
    ],
  });
});

test('the latest ranges only, as many as a status lists', () => {
  const ranges = Array.from({ length: 12 }, (_, i): [string, string] => [
    `${i * 10}`,
    `${i * 10 + 1}`,
  ]);
  const merged = mergeLostOffsets([{ lostOffsets: '12', lostRanges: ranges }]);
  expect(merged.lostRanges).toHaveLength(10);
  expect(merged.lostRanges?.[0]).toEqual({ from: '20', to: '21' });
});

test('a range is told once: what the written status names is not new', () => {
  const row = (partition: number, ranges: [string, string][]) => ({
    partition,
    replicaSet: 'rs-a',
    lostOffsets: '1',
    lostRanges: ranges.map(([from, to]) => ({ from, to })),
  });
  const observed = [
    row(0, [
      ['5', '20'],
      ['40', '50'],
    ]),
    row(1, [['5', '20']]),
  ];
  expect(newlyLostRanges(undefined, observed)).toHaveLength(3);
  expect(newlyLostRanges([row(0, [['5', '20']])], observed)).toEqual([
    { partition: 0, replicaSet: 'rs-a', range: ['40', '50'] },
    { partition: 1, replicaSet: 'rs-a', range: ['5', '20'] },
  ]);
  expect(newlyLostRanges(observed, observed)).toEqual([]);
});

test('the Event names the partition, the range, its size and the replica set', () => {
  expect(offsetsLostMessage({ partition: 2, replicaSet: 'rs-b', range: ['100', '250'] })).toBe(
    'partition 2: offsets [100, 250) (150 records) were deleted by Kafka (retention) before replica set rs-b read them; the cube does not contain them, and consumption goes on from offset 250',
  );
});
