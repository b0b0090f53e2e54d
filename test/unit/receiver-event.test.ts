// parseEvent: one Kafka record to an event of a cube (time, dimensions, measure inputs), or the
// reason it is rejected; timestamps as epoch millis or ISO-8601, decided alike on every machine.
import { spawnSync } from 'node:child_process';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { cubeSchema, type CubeSchema } from '../../src/api/cube.ts';
import { eventParser, parseEvent, type ParseResult } from '../../src/receiver/event.ts';
import { schemaOf } from '../support/schemas.ts';

const schema: CubeSchema = schemaOf(
  ['country', 'device'],
  { events: 'count', revenue: 'sum(price)', cheapest: 'min(price)', heaviest: 'max(weight)' },
  { window: '1h' },
);

const eventModule = resolve(import.meta.dirname, '../../src/receiver/event.ts');
const T = Date.UTC(2026, 0, 15, 10, 30, 0);
const base = { ts: T, country: 'de', device: 'ios', price: 2.5, weight: 7 };

const parse = (value: unknown, s: CubeSchema = schema): ParseResult =>
  parseEvent(s, Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)));

function timeOf(ts: unknown): number | string {
  const result = parse({ ...base, ts });
  return result.ok ? result.event.time : result.reason;
}

test('a well-formed event gives its time, dimensions in schema order and measure inputs', () => {
  expect(parse({ price: 2.5, device: 'ios', weight: 7, ts: T, country: 'de' })).toEqual({
    ok: true,
    event: { time: T, dimensions: ['de', 'ios'], values: [1, 2.5, 2.5, 7] },
  });
});

describe('timestamps', () => {
  test.each<[string, unknown, number]>([
    ['epoch millis', T, T],
    ['epoch millis zero', 0, 0],
    ['negative epoch millis (before 1970)', -86_400_000, -86_400_000],
    ['fractional millis are truncated', T + 0.9, T],
    ['epoch millis as a numeric string', String(T), T],
    ['numeric string with leading zeros', `000${T}`, T],
    ['ISO-8601 with Z', '2026-01-15T10:30:00Z', T],
    ['ISO-8601 with lower-case z', '2026-01-15t10:30:00z', T],
    ['ISO-8601 with milliseconds', '2026-01-15T10:30:00.123Z', T + 123],
    ['ISO-8601 with one fraction digit', '2026-01-15T10:30:00.5Z', T + 500],
    ['ISO-8601 with microseconds (truncated to millis)', '2026-01-15T10:30:00.123999Z', T + 123],
    ['ISO-8601 with a positive offset', '2026-01-15T12:30:00+02:00', T],
    ['ISO-8601 with a negative offset', '2026-01-15T05:00:00-05:30', T],
    ['ISO-8601 with a basic-format offset', '2026-01-15T12:30:00+0200', T],
    ['ISO-8601 without seconds', '2026-01-15T10:30Z', T],
    ['RFC 3339 space separator', '2026-01-15 10:30:00Z', T],
    ['ISO-8601 date only is midnight UTC', '2026-01-15', Date.UTC(2026, 0, 15)],
    // Without an offset the time is UTC, not the local time of the receiver's machine: two replicas
    // in different time zones must put the event in the same window.
    ['ISO-8601 without offset is UTC', '2026-01-15T10:30:00', T],
    ['leap day', '2024-02-29T00:00:00Z', Date.UTC(2024, 1, 29)],
    ['year below 100 is not shifted to the 1900s', '0050-06-01T00:00:00Z', -60_576_249_600_000],
  ])('%s: %j', (_, ts, expected) => expect(timeOf(ts)).toBe(expected));

  test('the time zone of the process does not matter', () => {
    // Date.parse reads a zone-less date-time as local time. The zone is fixed when a process
    // starts (jest's process.env is a copy), so ask a child process running in Tokyo.
    const script = `
      import { parseEvent } from ${JSON.stringify(pathToFileURL(eventModule).href)};
      const schema = { timestampField: 'ts', dimensions: [], measures: [{ name: 'n', function: 'count' }] };
      const time = (ts) => parseEvent(schema, Buffer.from(JSON.stringify({ ts }))).event?.time;
      console.log(JSON.stringify({
        offset: new Date(2026, 0, 15).getTimezoneOffset(),
        times: [time('2026-01-15T10:30:00'), time('2026-01-15'), time('2026-01-15 10:30')],
      }));`;
    const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
      env: { ...process.env, TZ: 'Asia/Tokyo' },
      encoding: 'utf8',
    });
    expect(child.stderr).toBe('');
    expect(JSON.parse(child.stdout)).toEqual({
      offset: -540,
      times: [T, Date.UTC(2026, 0, 15), T],
    });
  });

  test.each<[string, unknown]>([
    ['absent', undefined],
    ['null', null],
  ])('%s timestamp is missing_timestamp', (_, ts) => expect(timeOf(ts)).toBe('missing_timestamp'));

  test.each<[string, unknown]>([
    ['empty string', ''],
    ['boolean', true],
    ['object', { ms: T }],
    ['array', [T]],
    ['free text', 'yesterday'],
    ['decimal string', `${T}.5`],
    ['negative numeric string', '-1000'],
    ['date with trailing garbage', '2026-01-15garbage'],
    ['date-time with trailing garbage', '2026-01-15T10:30:00Z junk'],
    ['hour 25', '2026-01-15T25:00:00Z'],
    ['minute 60', '2026-01-15T10:60:00Z'],
    ['second 60', '2026-01-15T10:30:60Z'],
    ['month 13', '2026-13-01'],
    ['month 0', '2026-00-10'],
    ['day 0', '2026-01-00'],
    // Date.parse rolls 30 February over to 1 March; an impossible date is bad input.
    ['30 February', '2026-02-30T00:00:00Z'],
    ['29 February of a common year', '2026-02-29'],
    ['31 April', '2026-04-31'],
    ['offset hour 24', '2026-01-15T10:30:00+24:00'],
    ['non-ISO date format', '01/15/2026'],
    ['RFC 2822', 'Thu, 15 Jan 2026 10:30:00 GMT'],
    // Beyond ±8.64e15 ms a JavaScript Date is invalid: windows there could not even be named.
    ['epoch millis beyond the Date range', 8.64e15 + 1],
    ['epoch millis far beyond the Date range', 1e300],
    ['numeric string beyond the Date range', '99999999999999999999'],
  ])('%s (%j) is bad_timestamp', (_, ts) => expect(timeOf(ts)).toBe('bad_timestamp'));

  test('the edges of the Date range are accepted', () => {
    expect(timeOf(8.64e15)).toBe(8.64e15);
    expect(timeOf(-8.64e15)).toBe(-8.64e15);
  });

  test('NaN and Infinity cannot be written in JSON: such a record is bad_json', () => {
    expect(parse(`{"ts": NaN, "price": 1, "weight": 1}`)).toEqual({
      ok: false,
      reason: 'bad_json',
    });
    expect(parse(`{"ts": 1e400, "price": 1, "weight": 1}`)).toEqual({
      ok: false,
      reason: 'bad_timestamp',
    });
  });
});

test('a parser made once for a schema answers as parseEvent does', () => {
  const parser = eventParser(schema);
  for (const value of [base, { ...base, ts: 'x' }, { ...base, country: [] }, '[', 'null']) {
    const buffer = Buffer.from(typeof value === 'string' ? value : JSON.stringify(value));
    expect(parser(buffer)).toEqual(parseEvent(schema, buffer));
  }
  expect(parser(null)).toEqual({ ok: false, reason: 'bad_json' });
});

describe('records that are not events', () => {
  test.each<[string, Buffer | null, string]>([
    ['null value (tombstone)', null, 'bad_json'],
    ['empty value', Buffer.from(''), 'bad_json'],
    ['invalid JSON', Buffer.from('{"ts": 1,'), 'bad_json'],
    ['not UTF-8 JSON', Buffer.from([0xff, 0xfe, 0x00]), 'bad_json'],
    ['JSON array', Buffer.from('[1,2]'), 'not_an_object'],
    ['JSON string', Buffer.from('"event"'), 'not_an_object'],
    ['JSON number', Buffer.from('42'), 'not_an_object'],
    ['JSON null', Buffer.from('null'), 'not_an_object'],
  ])('%s is %s', (_, value, reason) => {
    expect(parseEvent(schema, value)).toEqual({ ok: false, reason });
  });
});

describe('dimensions', () => {
  test.each<[string, unknown, string]>([
    ['string', 'de', 'de'],
    ['empty string', '', ''],
    ['integer', 42, '42'],
    ['decimal', 1.5, '1.5'],
    ['negative zero', -0, '0'],
    ['true', true, 'true'],
    ['false', false, 'false'],
    ['null', null, ''],
    ['absent', undefined, ''],
    ['unicode', 'Zürich', 'Zürich'],
  ])('%s value (%j) becomes %j', (_, country, expected) => {
    const result = parse({ ...base, country });
    expect(result.ok && result.event.dimensions).toEqual([expected, 'ios']);
  });

  test.each<[string, unknown]>([
    ['object', { code: 'de' }],
    ['array', ['de']],
    ['empty object', {}],
  ])('%s value is bad_dimension', (_, country) => {
    expect(parse({ ...base, country })).toEqual({ ok: false, reason: 'bad_dimension' });
  });

  test('a cube without dimensions gives an empty dimension list', () => {
    const s = cubeSchema.parse({ ...schema, dimensions: [] });
    const result = parse(base, s);
    expect(result.ok && result.event.dimensions).toEqual([]);
  });

  test('names of Object.prototype members are read from the record only', () => {
    // `record.constructor` of an event lacking the field is Object, a function: that must read as
    // absent, not as a bad value, or every event of such a cube would be rejected.
    const s = schemaOf(
      ['constructor', 'toString'],
      { events: 'count', total: 'sum(hasOwnProperty)' },
      { window: '1h', timestampField: 'valueOf' },
    );
    expect(parse({ valueOf: T, hasOwnProperty: 3 }, s)).toEqual({
      ok: true,
      event: { time: T, dimensions: ['', ''], values: [1, 3] },
    });
    expect(parse({ valueOf: T, constructor: 'x', toString: 1 }, s)).toEqual({
      ok: false,
      reason: 'missing_measure',
    });
    expect(parse({ hasOwnProperty: 3 }, s)).toEqual({ ok: false, reason: 'missing_timestamp' });
  });

  test('a field named __proto__ in the JSON is an ordinary field', () => {
    const s = cubeSchema.parse({ ...schema, dimensions: ['__proto__'] });
    const result = parseEvent(
      s,
      Buffer.from(`{"ts": ${T}, "__proto__": "x", "price": 1, "weight": 2}`),
    );
    expect(result.ok && result.event.dimensions).toEqual(['x']);
  });
});

describe('measures', () => {
  test('count needs no field and counts 1; sum, min and max take the field value', () => {
    const s = schemaOf(
      undefined,
      { n: 'count', s: 'sum(a)', lo: 'min(a)', hi: 'max(b)' },
      { window: '1h' },
    );
    expect(parse({ ts: T, a: -4.25, b: 0 }, s)).toEqual({
      ok: true,
      event: { time: T, dimensions: [], values: [1, -4.25, -4.25, 0] },
    });
  });

  test('a count-only cube accepts events without any measure field', () => {
    const s = schemaOf(undefined, { n: 'count' }, { window: '1h' });
    expect(parse({ ts: T }, s)).toEqual({
      ok: true,
      event: { time: T, dimensions: [], values: [1] },
    });
  });

  test.each<[string, Record<string, unknown>, string]>([
    ['absent sum field', { price: undefined }, 'missing_measure'],
    ['null sum field', { price: null }, 'missing_measure'],
    ['absent max field', { weight: undefined }, 'missing_measure'],
    ['numeric string', { price: '2.5' }, 'bad_measure'],
    ['boolean', { price: true }, 'bad_measure'],
    ['object', { weight: { kg: 7 } }, 'bad_measure'],
    ['array', { weight: [7] }, 'bad_measure'],
    ['text', { weight: 'heavy' }, 'bad_measure'],
  ])('%s is %s', (_, fields, reason) => {
    expect(parse({ ...base, ...fields })).toEqual({ ok: false, reason });
  });

  test('a number literal too large for a double is bad_measure', () => {
    expect(parse(`{"ts": ${T}, "price": 1e400, "weight": 1}`)).toEqual({
      ok: false,
      reason: 'bad_measure',
    });
  });

  test('the timestamp is checked before dimensions, dimensions before measures', () => {
    expect(parse({ country: {}, price: 'x' })).toEqual({ ok: false, reason: 'missing_timestamp' });
    expect(parse({ ts: T, country: {}, price: 'x' })).toEqual({
      ok: false,
      reason: 'bad_dimension',
    });
  });
});
