// The cube definition: durations, and the rules a cube schema must satisfy, with the field named.
import { parseDuration } from '../../src/api/duration.ts';
import { cubeSchema } from '../../src/api/cube.ts';
import { schemaInput } from '../support/schemas.ts';

test.each([
  ['1h', 3_600_000],
  ['10m', 600_000],
  ['1h30m', 5_400_000],
  ['500ms', 500],
  ['0s', 0],
  ['48h', 172_800_000],
])('parseDuration(%s) = %d', (text, ms) => expect(parseDuration(text)).toBe(ms));

test.each(['', '1', 'h', '1.5h', '-1h', '1H', '1h ', '2d', '1234567h'])(
  'parseDuration(%j) is undefined',
  (text) => expect(parseDuration(text)).toBeUndefined(),
);

const valid = schemaInput(
  ['country'],
  { events: 'count', revenue: 'sum(price)' },
  { window: '1h', allowedLateness: '10m' },
);

test('a valid schema parses with defaults', () => {
  expect(cubeSchema.parse({ ...valid, allowedLateness: undefined }).allowedLateness).toBe('0s');
});

test.each([
  [{ window: '0s' }, 'window'],
  [{ allowedLateness: '1h' }, 'allowedLateness'],
  [{ measures: [{ name: 'x', function: 'sum' }] }, 'measures.0.field'],
  [{ measures: [{ name: 'x', function: 'median', field: 'p' }] }, 'measures.0.function'],
  [{ dimensions: ['country', 'events'] }, 'measures'],
  [{ dimensions: ['bad-name'] }, 'dimensions.0'],
  [{ measures: [] }, 'measures'],
])('%j is refused at %s', (change, path) => {
  const result = cubeSchema.safeParse({ ...valid, ...change });
  expect(result.success).toBe(false);
  expect(result.error?.issues.map((i) => i.path.join('.'))).toContain(path);
});
