// The event scanner reads a record exactly as eventTextParser does whenever it says it read it, and
// it does read the flat events producers send; everything else it leaves to eventTextParser.
import fc from 'fast-check';
import type { CubeSchema } from '../../src/api/cube.ts';
import { eventTextParser } from '../../src/receiver/event.ts';
import { eventScanner } from '../../src/receiver/event-scanner.ts';
import { schemaOf } from '../support/schemas.ts';

const schema: CubeSchema = schemaOf(
  ['country', 'device', 'x'],
  { events: 'count', revenue: 'sum(price)', top: 'max(price)', heaviest: 'max(x)' },
  { window: '1h' },
);

const parseText = eventTextParser(schema);
const scanner = eventScanner(schema)!;

/** The scanner's reading of `text`, or undefined when it leaves the record to eventTextParser. */
function scanned(text: string) {
  // Surrounded by other bytes, as a record is in a packed buffer.
  const bytes = Buffer.concat([Buffer.from('1.5e'), Buffer.from(text), Buffer.from('7}')]);
  if (!scanner.scan(bytes, 4, bytes.length - 2)) return undefined;
  const { time, dimensions, values } = scanner.event;
  return { time, dimensions: [...dimensions], values: [...values] };
}

function expectSame(text: string): boolean {
  const mine = scanned(text);
  if (mine === undefined) return false;
  const theirs = parseText(text);
  expect(theirs.ok).toBe(true);
  if (theirs.ok) expect(mine).toEqual(theirs.event);
  return true;
}

test.each([
  ['a typical event', '{"ts":1767225600000,"country":"de","device":"ios","x":1,"price":4.37}'],
  ['spaces everywhere', ' { "ts" : 1.5e3 ,\n"price":\t-0 , "x": 2 , "country" : "üñí" } '],
  ['dimensions of every kind', '{"ts":0,"price":1,"x":1,"country":null,"device":true}'],
  ['a number as a dimension', '{"ts":0,"price":1,"x":1.50,"country":1e2,"device":false}'],
  ['a duplicate field: the last wins', '{"ts":1,"price":1,"x":1,"price":2,"ts":3}'],
  [
    'numbers JSON.parse rounds',
    '{"ts":1234567890123456.7,"price":0.1000000000000000055511151231257827,"x":1e-7}',
  ],
  ['an unknown field of any simple kind', '{"ts":1,"price":1,"x":1,"y":"z","n":null,"b":true}'],
])('%s reads as eventTextParser reads it', (_, text) => {
  expect(expectSame(text)).toBe(true);
});

test.each([
  ['an escape', '{"ts":1,"price":1,"x":1,"country":"d\\u0065"}'],
  ['a nested object', '{"ts":1,"price":1,"x":1,"meta":{"a":1}}'],
  ['a time as a string', '{"ts":"2026-01-01T00:00:00Z","price":1,"x":1}'],
  ['a missing measure', '{"ts":1,"x":1}'],
  ['a huge measure', '{"ts":1,"price":1e999,"x":1}'],
  ['bad JSON', '{"ts":1,"price":1,"x":1,}'],
  ['a leading zero', '{"ts":01,"price":1,"x":1}'],
  ['trailing garbage', '{"ts":1,"price":1,"x":1} x'],
  ['an array', '[1]'],
  ['nothing', ''],
])('%s is left to eventTextParser', (_, text) => {
  expect(scanned(text)).toBeUndefined();
});

test('whatever the scanner reads, it reads as eventTextParser does', () => {
  const value = fc.oneof(
    fc.double({ noNaN: true }).map((n) => JSON.stringify(n)),
    fc.integer().map(String),
    fc.string().map((s) => JSON.stringify(s)),
    fc.constantFrom('null', 'true', 'false', '{}', '[]', '1e400', '-0', '0.1e-3', '"\\n"', '01'),
    fc.stringMatching(/^-?[0-9]{0,3}(\.[0-9]{0,3})?([eE][+-]?[0-9]{0,3})?$/),
  );
  const key = fc.constantFrom('ts', 'price', 'x', 'country', 'device', 'other', 't\\u0073', 'prix');
  const space = fc.constantFrom('', ' ', '\n', '\t ', '\u00a0');
  const member = fc
    .tuple(key, space, value, space)
    .map(([k, s, v, t]) => `${s}"${k}"${t}:${s}${v}${t}`);
  const number = fc.oneof(
    fc.integer({ min: -1e15, max: 1e15 }).map(String),
    fc.double({ noNaN: true, min: -1e15, max: 1e15 }).map((n) => JSON.stringify(n)),
  );
  const needed = fc
    .tuple(number, number, number, space)
    .map(([t, p, x, s]) => [`"ts":${t}`, `${s}"price":${p}`, `"x"${s}:${x}`]);
  let read = 0;
  fc.assert(
    fc.property(
      needed,
      fc.array(member, { maxLength: 5 }),
      space,
      fc.boolean(),
      (base, extra, s, first) => {
        const members = first ? [...base, ...extra] : [...extra, ...base];
        const text = `${s}{${members.join(',')}}${s}`;
        if (expectSame(text)) read++;
        else {
          // Left to eventTextParser: never an event the scanner should have read as another.
          expect(scanned(text)).toBeUndefined();
        }
      },
    ),
    { numRuns: 3000 },
  );
  expect(read).toBeGreaterThan(300);
});

test('field names the scanner cannot match by bytes leave every record to eventTextParser', () => {
  const named = (field: string): CubeSchema =>
    schemaOf(['a'], { events: 'count' }, { window: '1h', timestampField: field });
  expect(eventScanner(named('constructor'))).toBeUndefined();
  expect(eventScanner(named('zeit-ü'))).toBeUndefined();
  expect(eventScanner(named('ts'))).toBeDefined();
});
