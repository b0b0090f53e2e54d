// A query service request read against its cube's schema: what is refused names the field, and
// what is accepted becomes the rows users asked for (time buckets, filters, groups, top N).
import { buildAnswer, pieceRowsOfHandOff } from '../../src/query/answer.ts';
import { QueryError, resolveQuery } from '../../src/query/request.ts';
import { schemaOf } from '../support/schemas.ts';

const schema = schemaOf(
  ['country', 'device'],
  { events: 'count', revenue: 'sum(price)', cheapest: 'min(price)' },
  { window: '1m' },
);

test.each([
  { body: { groupBy: ['city'] }, field: 'groupBy.0', says: /no dimension 'city'/ },
  { body: { measures: ['events', 'profit'] }, field: 'measures.1', says: /no measure 'profit'/ },
  { body: { filters: { city: { in: ['x'] } } }, field: 'filters.city', says: /no dimension/ },
  { body: { filters: { country: { like: 'd%' } } }, field: 'filters.country', says: /./ },
  { body: { from: 2000, to: 1000 }, field: 'from', says: /after to/ },
  { body: { granularity: '90s' }, field: 'granularity', says: /multiple of the cube's window/ },
  { body: { granularity: 'hourly' }, field: 'granularity', says: /multiple/ },
  { body: { orderBy: [{ field: 'price' }] }, field: 'orderBy.0.field', says: /not in the answer/ },
  { body: { limit: 0 }, field: 'limit', says: /./ },
  { body: { from: 'yesterday' }, field: 'from', says: /./ },
  { body: { groupBy: ['country'], sql: 'SELECT 1' }, field: undefined, says: /sql/ },
  { body: [], field: undefined, says: /./ },
])('refused: $body → 400 naming $field', ({ body, field, says }) => {
  let error: unknown;
  try {
    resolveQuery(body, schema);
  } catch (e) {
    error = e;
  }
  expect(error).toBeInstanceOf(QueryError);
  expect((error as QueryError).status).toBe(400);
  expect((error as QueryError).field).toBe(field);
  expect((error as QueryError).message).toMatch(says);
});

test.each([
  { granularity: 'all', ms: undefined },
  { granularity: '1m', ms: 60_000 },
  { granularity: '1h', ms: 3_600_000 },
  { granularity: '1d', ms: 86_400_000 },
])('granularity $granularity', ({ granularity, ms }) => {
  expect(resolveQuery({ granularity }, schema).granularityMs).toBe(ms);
});

const M = 60_000;
const handOffRows = [
  { dimensions: ['de', 'ios'], values: [2, 10, 4] },
  { dimensions: ['de', 'web'], values: [1, 3, 3] },
  { dimensions: ['fr', 'ios'], values: [5, 20, 1] },
  { dimensions: ['us', 'web'], values: [1, 7, 7] },
];

test('filters in / not in, group, time buckets, order by a measure, top N', () => {
  const q = resolveQuery(
    {
      from: 0,
      to: 3 * M,
      granularity: '2m',
      filters: { country: { notIn: ['us'] }, device: { in: ['ios', 'web'] } },
      groupBy: ['country'],
      measures: ['revenue', 'events', 'cheapest'],
      orderBy: [{ field: 'revenue', direction: 'desc' }],
      limit: 3,
    },
    schema,
  );
  const rows = pieceRowsOfHandOff(handOffRows, schema, q);
  const pieces = [0, 1, 2, 5].map((w) => ({ windowStart: w * M, windowEnd: (w + 1) * M, rows }));
  expect(buildAnswer(pieces, schema, q, 100)).toEqual({
    columns: ['time', 'country', 'revenue', 'events', 'cheapest'],
    rows: [
      ['1970-01-01T00:00:00.000Z', 'fr', 40, 10, 1],
      ['1970-01-01T00:00:00.000Z', 'de', 26, 6, 3],
      ['1970-01-01T00:02:00.000Z', 'fr', 20, 5, 1],
    ],
  });
});

test('more rows than the bound: 400 naming limit', () => {
  const q = resolveQuery({ groupBy: ['country', 'device'] }, schema);
  const rows = pieceRowsOfHandOff(handOffRows, schema, q);
  expect(() => buildAnswer([{ windowStart: 0, windowEnd: M, rows }], schema, q, 3)).toThrow(
    expect.objectContaining({ status: 400, field: 'limit' }) as Error,
  );
  const limited = resolveQuery({ groupBy: ['country', 'device'], limit: 3 }, schema);
  expect(
    buildAnswer([{ windowStart: 0, windowEnd: M, rows }], schema, limited, 3).rows,
  ).toHaveLength(3);
});
