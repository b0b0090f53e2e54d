// Exact sums: a `sum` with a scale travels as a decimal string from the receiver, is added as
// bigint units wherever pieces meet (committed hand-offs, live segments, the answer's groups) and
// is answered as the decimal a person wrote, however the float sums of the pieces came out.
import { cubeSchema } from '../../src/api/cube.ts';
import { formatUnits, parseUnits, toUnits } from '../../src/api/scaled-sum.ts';
import { buildAnswer } from '../../src/query/answer.ts';
import { resolveQuery } from '../../src/query/request.ts';
import { querySegments } from '../../src/receiver/query.ts';
import type { Row, Segment } from '../../src/receiver/segments.ts';
import { MemoryDeepStorage } from '../support/memory-deep-storage.ts';
import {
  commitSegments,
  oneReceiverService,
  oneSetCube,
  receiverOver,
} from '../support/query-fixtures.ts';
import { schemaOf } from '../support/schemas.ts';

const M = 60_000;
const schema = schemaOf(
  ['country'],
  { events: 'count', revenue: 'sum(price, 2)', dearest: 'max(price)' },
  { window: '1m' },
);

test.each([
  [0.1 + 0.2, 2, 30n, '0.30'],
  [360985.35000000003, 2, 36098535n, '360985.35'],
  [-0.07, 2, -7n, '-0.07'],
  [12, 0, 12n, '12'],
  [0.5, 3, 500n, '0.500'],
  [1e22, 2, 10n ** 24n, '10000000000000000000000.00'],
])('toUnits(%p, %p) = %p, printed %p', (value, scale, units, text) => {
  expect(toUnits(value, scale)).toBe(units);
  expect(formatUnits(units, scale)).toBe(text);
  expect(parseUnits(text, scale)).toBe(units);
});

test('parseUnits: a number from a receiver of before is rounded; more digits than the scale are refused', () => {
  expect(parseUnits(0.1 + 0.2, 2)).toBe(30n);
  expect(parseUnits('7', 2)).toBe(700n);
  expect(() => parseUnits('0.001', 2)).toThrow(/at most 2 digits/);
  expect(() => parseUnits('1e3', 2)).toThrow(/not a decimal/);
});

test('a scale on another function than sum is refused', () => {
  const bad = cubeSchema.safeParse({
    timestampField: 'ts',
    measures: [{ name: 'm', function: 'max', field: 'x', scale: 2 }],
    window: '1m',
  });
  expect(bad.error?.issues[0]).toMatchObject({ path: ['measures', 0, 'scale'] });
});

const segment = (w: number, p: number, from: bigint, to: bigint, rows: Segment['rows']) => ({
  key: w * M,
  windowStart: w * M,
  windowEnd: (w + 1) * M,
  state: 'IMMUTABLE' as const,
  rows,
  delta: new Map(),
  ranges: new Map([[p, [{ from, to }]]]),
  epochs: new Map([[p, 1]]),
});

/** A row of ten events of 0.10 each: 100 units of revenue (as floats, 0.9999999999999999). */
const tenDimes = (country: string): [string, Row] => [
  country,
  { dimensions: [country], values: [10, 100, 0.1] },
];

test('the receiver answers a scaled sum as a decimal string, its rows added in units', () => {
  // 2^60 + 200 units: past what a Number holds exactly.
  const past2to53: Row = { dimensions: ['us'], values: [1, 2n ** 60n, 1] };
  const s = segment(1, 0, 0n, 21n, new Map([tenDimes('de'), tenDimes('fr'), ['us', past2to53]]));
  const answer = querySegments('orders', schema, [s], { filters: {}, groupBy: [] });
  expect(answer.rows).toEqual([[21, '11529215046068471.76', 1]]);
  expect(answer.columns).toEqual(['events', 'revenue', 'dearest']);
});

test('the service adds committed and live pieces in units: the exact decimal, ordered as numbers', async () => {
  const storage = new MemoryDeepStorage();
  // Window 0, committed: 0.1 + 0.2 as the receiver added it, in units.
  await commitSegments(storage, schema, [
    segment(0, 0, 0n, 10n, new Map([['de', { dimensions: ['de'], values: [2, 30, 0.2] }]])),
  ]);
  // Windows 1 to 3, live: ten dimes per country each, answered by the real receiver query.
  const live = [1, 2, 3].map((w) =>
    segment(
      w,
      0,
      BigInt(10 + (w - 1) * 20),
      BigInt(10 + w * 20),
      new Map([tenDimes('de'), tenDimes('fr')]),
    ),
  );
  live.push(
    segment(4, 0, 70n, 71n, new Map([['nl', { dimensions: ['nl'], values: [1, 950, 9.5] }]])),
  );
  const service = oneReceiverService({
    cube: oneSetCube(schema, { partitions: [{ partition: 0, position: '71' }] }),
    storage,
    answer: receiverOver(schema, live),
  });
  const total = await service.answer('shop', 'orders', {});
  expect(total.complete).toBe(true);
  // Floats would say 0.30000000000000004 + 6 × 0.9999999999999999 + 9.5.
  expect(total.rows).toEqual([[63, '15.80', 9.5]]);
  const byCountry = await service.answer('shop', 'orders', {
    groupBy: ['country'],
    measures: ['revenue'],
    orderBy: [{ field: 'revenue', direction: 'desc' }],
  });
  // As numbers: 9.50 is below 3.30 as text, above it as a sum.
  expect(byCountry.rows).toEqual([
    ['nl', '9.50'],
    ['de', '3.30'],
    ['fr', '3.00'],
  ]);
});

test('buildAnswer adds bigint units and prints them with the scale', () => {
  const q = resolveQuery({ measures: ['revenue'] }, schema);
  const rows = [{ dims: [], values: [1n] }];
  const answer = buildAnswer(
    [
      { windowStart: 0, windowEnd: M, rows },
      { windowStart: M, windowEnd: 2 * M, rows: [{ dims: [], values: [-1001n] }] },
    ],
    schema,
    q,
    10,
  );
  expect(answer.rows).toEqual([['-10.00']]);
});
