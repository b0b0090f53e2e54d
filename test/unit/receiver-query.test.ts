// The receiver's query: without bySegment its answer is what it always was; with it, each live
// segment comes apart with its offsets and epochs (and the offsets lost right before them), and
// `held` says how far each partition goes.
import { querySegments } from '../../src/receiver/query.ts';
import type { Segment, SegmentState } from '../../src/receiver/segments.ts';
import { schemaOf } from '../support/schemas.ts';

const M = 60_000;
const schema = schemaOf(['country'], { events: 'count' }, { window: '1m' });

function segment(
  w: number,
  state: SegmentState,
  p: number,
  from: bigint,
  to: bigint,
  rows: [string, number][],
): Segment {
  return {
    key: w * M,
    windowStart: w * M,
    windowEnd: (w + 1) * M,
    state,
    rows: new Map(rows.map(([c, n]) => [c, { dimensions: [c], values: [n] }])),
    delta: new Map(),
    ranges: new Map([[p, [{ from, to }]]]),
    epochs: new Map([[p, 2]]),
  };
}

const segments = [
  segment(0, 'HANDED_OFF', 0, 0n, 10n, []),
  segment(1, 'IMMUTABLE', 0, 10n, 15n, [['de', 5]]),
  segment(2, 'ACTIVE', 0, 15n, 18n, [
    ['de', 1],
    ['fr', 2],
  ]),
];

test('without bySegment: the answer of before, handed-off segments left out', () => {
  expect(querySegments('orders', schema, segments, { filters: {}, groupBy: [] })).toEqual({
    columns: ['events'],
    rows: [[8]],
    offsetRanges: { '0': [['10', '18']] },
    segments: 2,
  });
});

test('bySegment: each live segment apart, out-of-range ones with their offsets only; held to the end', () => {
  const answer = querySegments(
    'orders',
    schema,
    segments,
    { from: 2 * M, filters: {}, groupBy: ['country'], bySegment: true },
    new Map([[0, { pending: [{ from: 18n, to: 19n }] }]]),
  );
  expect(answer.rows).toEqual([
    ['de', 1],
    ['fr', 2],
  ]);
  expect(answer.pieces).toEqual([
    {
      windowStart: M,
      windowEnd: 2 * M,
      epochs: { '0': 2 },
      offsetRanges: { '0': [['10', '15']] },
      inRange: false,
      rows: [],
    },
    {
      windowStart: 2 * M,
      windowEnd: 3 * M,
      epochs: { '0': 2 },
      offsetRanges: { '0': [['15', '18']] },
      inRange: true,
      rows: [
        ['de', 1],
        ['fr', 2],
      ],
    },
  ]);
  expect(answer.held).toEqual({ '0': { to: '19', pending: [['18', '19']] } });
});

test('bySegment: a segment names the offsets Kafka deleted right before its ranges', () => {
  const lost = new Map([[0, [{ from: 12n, to: 15n }]]]);
  const answer = querySegments(
    'orders',
    schema,
    segments,
    { filters: {}, groupBy: [], bySegment: true },
    undefined,
    (s) => (s.windowStart === 2 * M ? lost : new Map()),
  );
  expect(answer.pieces?.map((p) => [p.windowStart, p.lostRanges])).toEqual([
    [M, undefined],
    [2 * M, { '0': [['12', '15']] }],
  ]);
});
