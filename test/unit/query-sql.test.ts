// The SQL subset of the query service: a SELECT read into the JSON query body, every column named
// as the SELECT names it, anything outside the subset a 400 naming its clause.
import { cubeSchema } from '../../src/api/cube.ts';
import { QueryError } from '../../src/query/request.ts';
import { answerSql, bodyFor, parseSql, selectColumns } from '../../src/query/sql.ts';
import type { CubeAnswer } from '../../src/query/service.ts';

const schema = cubeSchema.parse({
  timestampField: 'ts',
  dimensions: ['country', 'device'],
  measures: [
    { name: 'events', function: 'count' },
    { name: 'revenue', function: 'sum', field: 'price' },
    { name: 'cheapest', function: 'min', field: 'price' },
    { name: 'dearest', function: 'max', field: 'price' },
  ],
  window: '1m',
});

const read = (sql: string) => bodyFor(parseSql(sql), schema);

test('a full question: columns, time bucket, filters, order and limit', () => {
  const { body, columns } = read(
    `SELECT country, time_bucket('1h', time) AS hour, SUM(revenue) AS total, MAX(dearest), events
       FROM shop.orders
      WHERE time >= '2026-01-01T00:00:00Z' AND time < 1767225600000
        AND country IN ('DE', 'FR') AND device <> 'tv'
      GROUP BY country, hour
      ORDER BY total DESC, country
      LIMIT 10`,
  );
  expect(body).toEqual({
    granularity: '1h',
    groupBy: ['country'],
    measures: ['revenue', 'dearest', 'events'],
    filters: { country: { in: ['DE', 'FR'] }, device: { notIn: ['tv'] } },
    from: '2026-01-01T00:00:00Z',
    to: 1767225600000,
    orderBy: [
      { field: 'revenue', direction: 'desc' },
      { field: 'country', direction: 'asc' },
    ],
    limit: 10,
  });
  expect(columns).toEqual([
    { name: 'country', answerColumn: 'country' },
    { name: 'hour', answerColumn: 'time' },
    { name: 'total', answerColumn: 'revenue' },
    { name: 'dearest', answerColumn: 'dearest' },
    { name: 'events', answerColumn: 'events' },
  ]);
  expect(parseSql('SELECT events FROM shop.orders')).toMatchObject({
    namespace: 'shop',
    cube: 'orders',
  });
  expect(parseSql('SELECT events FROM "my-cube"')).toMatchObject({
    namespace: undefined,
    cube: 'my-cube',
  });
});

test('totals of the whole cube: no GROUP BY, granularity all', () => {
  expect(read('SELECT SUM(events), SUM(revenue), MIN(cheapest) FROM orders').body).toMatchObject({
    granularity: 'all',
    groupBy: [],
    measures: ['events', 'revenue', 'cheapest'],
  });
});

// Each line: the field named, then the SQL refused.
const refusedSql = `
sql          | SELEC events FROM orders
sql.statement| SELECT events FROM orders; SELECT events FROM orders
sql.statement| INSERT INTO orders VALUES ('x')
sql.select   | SELECT DISTINCT country FROM orders
sql.select   | SELECT * FROM orders
sql.select   | SELECT colour FROM orders GROUP BY colour
sql.select   | SELECT MAX(revenue) FROM orders
sql.select   | SELECT COUNT(*) FROM orders
sql.select   | SELECT AVG(revenue) FROM orders
sql.select   | SELECT lower(country) FROM orders
sql.from     | SELECT events FROM orders JOIN other ON true
sql.from     | SELECT events FROM orders, other
sql.from     | SELECT events FROM (SELECT 1) AS x
sql.having   | SELECT country, SUM(events) FROM orders GROUP BY country HAVING SUM(events) > 1
sql.offset   | SELECT events FROM orders LIMIT 1 OFFSET 2
sql.group by | SELECT country, SUM(events) FROM orders
sql.group by | SELECT SUM(events) FROM orders GROUP BY country
sql.where    | SELECT events FROM orders WHERE country = 'DE' OR country = 'FR'
sql.where    | SELECT events FROM orders WHERE revenue > 1
sql.where    | SELECT events FROM orders WHERE country = 'DE' AND country <> 'FR'
sql.where    | SELECT events FROM orders WHERE time >= 'yesterday'
sql.order by | SELECT SUM(events) FROM orders ORDER BY revenue
sql.limit    | SELECT events FROM orders LIMIT 0
sql          | SELECT time_bucket('1h', time), time_bucket('1d', time) FROM orders GROUP BY 1
`
  .trim()
  .split('\n')
  .map((line) => line.split('|').map((x) => x.trim()) as [string, string]);

test.each(refusedSql)('%s: %s is refused with a 400', (field, sql) => {
  let error: unknown;
  try {
    read(sql);
  } catch (e) {
    error = e;
  }
  expect(error).toBeInstanceOf(QueryError);
  expect((error as QueryError).status).toBe(400);
  expect((error as QueryError).field).toMatch(new RegExp(`^${field.replace('.', '\\.')}`));
});

test('the answer is re-cut to the SELECT: its order, its names', () => {
  const answer = {
    columns: ['time', 'country', 'revenue', 'events'],
    rows: [['2026-01-01T00:00:00.000Z', 'DE', '10.50', 3]],
  };
  expect(
    selectColumns(answer, [
      { name: 'total', answerColumn: 'revenue' },
      { name: 'country', answerColumn: 'country' },
      { name: 'hour', answerColumn: 'time' },
    ]),
  ).toEqual({
    columns: ['total', 'country', 'hour'],
    rows: [['10.50', 'DE', '2026-01-01T00:00:00.000Z']],
  });
});

describe('answerSql', () => {
  const asked: unknown[] = [];
  const service = {
    schemaOf: (namespace: string, name: string) => {
      if (name !== 'orders') throw new QueryError(404, `no CubeAssignment ${namespace}/${name}`);
      return schema;
    },
    answer: (namespace: string, name: string, body: unknown) => {
      asked.push({ namespace, name, body });
      return Promise.resolve({ columns: ['events'], rows: [[7]] } as unknown as CubeAnswer);
    },
  };

  test('the namespace comes from FROM or from the path; requireComplete passes through', async () => {
    asked.splice(0);
    await answerSql(service, undefined, { query: 'SELECT events FROM shop.orders' });
    await answerSql(service, 'shop', { query: 'SELECT events FROM orders', requireComplete: true });
    expect(
      (asked as { namespace: string; name: string; body: { requireComplete: boolean } }[]).map(
        (a) => [a.namespace, a.name, a.body.requireComplete],
      ),
    ).toEqual([
      ['shop', 'orders', false],
      ['shop', 'orders', true],
    ]);
  });

  test.each([
    ['no namespace anywhere', undefined, { query: 'SELECT events FROM orders' }, 400, 'sql.from'],
    [
      'two namespaces that differ',
      'other',
      { query: 'SELECT events FROM shop.orders' },
      400,
      'sql.from',
    ],
    [
      'a cube that is no DNS label',
      'shop',
      { query: 'SELECT events FROM "Orders_1"' },
      400,
      'sql.from',
    ],
    ['an unknown cube', 'shop', { query: 'SELECT events FROM nothing' }, 404, undefined],
    ['no query', 'shop', {}, 400, 'query'],
    ['an unknown field', 'shop', { query: 'SELECT events FROM orders', sql: 'x' }, 400, undefined],
  ])('%s', async (_name, namespace, body, status, field) => {
    const error = await answerSql(service, namespace, body).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(QueryError);
    expect([(error as QueryError).status, (error as QueryError).field]).toEqual([status, field]);
  });
});
