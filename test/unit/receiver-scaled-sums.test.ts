// A sum with a scale on the receiver: each event's value read as integer units from the digits the
// producer wrote (never through a float), added exactly in any order (a bigint past 2^53), and
// answered as the decimal the producer's values add up to.
import fc from 'fast-check';
import { addUnits, formatUnits, unitsFromText, unitsOfJsonText } from '../../src/api/scaled-sum.ts';
import { consumedRecords } from '../../src/kafka/partition-consumer.ts';
import { InlineBatchParser } from '../../src/receiver/batch-parser.ts';
import { eventTextParser, rejectReasons } from '../../src/receiver/event.ts';
import { eventScanner } from '../../src/receiver/event-scanner.ts';
import { querySegments } from '../../src/receiver/query.ts';
import { SegmentManager } from '../../src/receiver/segments.ts';
import { schemaOf } from '../support/schemas.ts';

const T0 = Date.UTC(2026, 11, 1);
const schema = schemaOf(
  ['country'],
  { events: 'count', revenue: 'sum(price, 2)', dearest: 'max(price)' },
  { window: '1h' },
);

test.each([
  ['360985.35', 2, 36098535],
  ['0.1', 2, 10],
  ['7', 2, 700],
  ['1.500', 2, 150],
  ['-0.07', 2, -7],
  ['-0', 2, 0],
  ['1e2', 2, 10000],
  ['1.5E-1', 2, 15],
  ['25e-1', 0, 2],
  // Past the scale: half to even.
  ['0.30000000000000004', 2, 30],
  ['360985.35000000003', 2, 36098535],
  ['0.125', 2, 12],
  ['0.135', 2, 14],
  ['0.1251', 2, 13],
  ['-0.125', 2, -12],
  ['-0.135', 2, -14],
  ['0.005', 2, 0],
  ['0.015', 2, 2],
  ['0.0049999', 2, 0],
  ['2.5', 0, 2],
  ['3.5', 0, 4],
  ['1e-400', 2, 0],
  ['0e400', 2, 0],
  // The safe range: ±(2^53 − 1) units.
  ['90071992547409.91', 2, Number.MAX_SAFE_INTEGER],
  ['-90071992547409.91', 2, -Number.MAX_SAFE_INTEGER],
  ['90071992547409.92', 2, NaN],
  ['1e400', 2, NaN],
  ['12345678901234567890', 0, NaN],
  // Not JSON numbers.
  ['01', 2, NaN],
  ['.5', 2, NaN],
  ['1.', 2, NaN],
  ['+1', 2, NaN],
  ['1e', 2, NaN],
])('%s at scale %p is %p units', (text, scale, units) => {
  expect(unitsOfJsonText(text, scale)).toBe(units);
});

const parseText = eventTextParser(schema);
const scanner = eventScanner(schema)!;

/** The scanner's values for `text`, or undefined when it leaves the record to eventTextParser. */
function scannedValues(text: string): number[] | undefined {
  const bytes = Buffer.from(text);
  return scanner.scan(bytes, 0, bytes.length) ? [...scanner.event.values] : undefined;
}

test('both readers of an event take the units from the digits: the fast scanner and eventTextParser', () => {
  const flat = '{"ts":1,"country":"de","price":0.30000000000000004}';
  // An escape in a dimension leaves the record to eventTextParser (JSON.parse).
  const escaped = '{"ts":1,"country":"d\\u0065","price":0.30000000000000004}';
  const nested = '{"ts":1,"country":"de","price":360985.35000000003,"x":{"price":1.11}}';
  expect(scannedValues(flat)).toEqual([1, 30, 0.30000000000000004]);
  expect(scannedValues(escaped)).toBeUndefined();
  expect(scannedValues(nested)).toBeUndefined();
  expect(parseText(flat)).toMatchObject({
    ok: true,
    event: { values: [1, 30, 0.30000000000000004] },
  });
  expect(parseText(escaped)).toMatchObject({
    ok: true,
    event: { values: [1, 30, 0.30000000000000004] },
  });
  expect(parseText(nested)).toMatchObject({
    ok: true,
    event: { values: [1, 36098535, 360985.35000000003] },
  });
});

test('eventTextParser reads the digits, not the float JSON.parse made of them', () => {
  // As a float, 0.125000000000000000001 is 0.125: a tie, rounded to even (12). Its digits are not.
  const text = '{"ts":1,"country":"d\\u0065","price":0.125000000000000000001}';
  expect(scannedValues(text)).toBeUndefined();
  expect(parseText(text)).toMatchObject({ ok: true, event: { values: [1, 13, 0.125] } });
  const flat = '{"ts":1,"country":"de","price":0.125000000000000000001}';
  expect(scannedValues(flat)).toEqual([1, 13, 0.125]);
});

test('a value past ±(2^53 − 1) units is a bad measure on both paths', () => {
  const big = '{"ts":1,"country":"de","price":90071992547409.92}';
  expect(scannedValues(big)).toBeUndefined();
  expect(parseText(big)).toEqual({ ok: false, reason: 'bad_measure' });
  const parsed = new InlineBatchParser(schema).parse(
    consumedRecords([{ offset: 0n, value: Buffer.from(big) }]).values,
  );
  expect(parsed.columns.reasons[0]).toBe(1 + rejectReasons.indexOf('bad_measure'));
});

test('whatever the scanner reads of a scaled sum, it reads as eventTextParser does', () => {
  const decimal = fc.oneof(
    fc.stringMatching(/^-?(0|[1-9][0-9]{0,12})(\.[0-9]{1,6})?([eE][+-]?[0-9]{1,2})?$/),
    fc.double({ noNaN: true, noDefaultInfinity: true }).map((n) => JSON.stringify(n)),
  );
  let read = 0;
  fc.assert(
    fc.property(decimal, fc.boolean(), (price, escape) => {
      const country = escape ? 'd\\u0065' : 'de';
      const text = `{"ts":${T0},"country":"${country}","price":${price}}`;
      const theirs = parseText(text);
      const mine = scannedValues(text);
      if (mine === undefined) return;
      read++;
      expect(theirs).toMatchObject({ ok: true, event: { values: mine } });
    }),
    { numRuns: 2000 },
  );
  expect(read).toBeGreaterThan(500);
});

/** A record of the price's text as the producer wrote it. */
const record = (offset: number, price: string, country = 'de') => ({
  offset: BigInt(offset),
  value: Buffer.from(`{"ts":${T0 + offset},"country":"${country}","price":${price}}`),
});

/** Feeds the prices through the batch path (parse, ingest) in batches of `batch` records. */
function ingested(prices: string[], batch: number): SegmentManager {
  const m = new SegmentManager(schema);
  const parser = new InlineBatchParser(schema);
  let position = 0n;
  for (let from = 0; from < prices.length; from += batch) {
    const consumed = consumedRecords(
      prices.slice(from, from + batch).map((p, i) => record(from + i, p)),
    );
    position = m.ingest(
      0,
      1,
      position,
      null,
      consumed.offsets,
      parser.parse(consumed.values),
    ).position;
  }
  return m;
}

const revenueOf = (m: SegmentManager): string | number =>
  querySegments('orders', schema, m.segments.values(), {
    filters: {},
    groupBy: [],
    measures: ['revenue'],
  }).rows[0]![0]!;

/** A seeded shuffle: the same prices in another order. */
function shuffled<T>(items: T[], seed: number): T[] {
  const out = [...items];
  let s = seed;
  for (let i = out.length - 1; i > 0; i--) {
    s = (s * 1_103_515_245 + 12_345) % 2 ** 31;
    const j = s % (i + 1);
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

test('0.1 + 0.2 and 360985.35 over many events come back exact, in every order and batching', () => {
  const prices = [
    '0.1',
    '0.2',
    ...Array.from({ length: 997 }, (_, i) => ['360985.35', '19.99', '-0.07', '0.01'][i % 4]!),
  ];
  // 0.30 + 250 × 360985.35 + 249 × 19.99 − 249 × 0.07 + 249 × 0.01
  const exact = formatUnits(30n + 250n * 36098535n + 249n * 1999n - 249n * 7n + 249n * 1n, 2);
  let floats = 0;
  for (const p of prices) floats += Number(p);
  expect(floats.toFixed(2)).toBe(exact); // the float sum rounds right here, but is not it:
  expect(String(floats)).not.toBe(exact);
  for (const [seed, batch] of [
    [1, 1000],
    [2, 7],
    [3, 1],
    [4, 64],
  ] as const) {
    expect(revenueOf(ingested(shuffled(prices, seed), batch))).toBe(exact);
  }
});

test('a sum past 2^53 units goes on as a bigint, in the same form whatever the order', () => {
  const max = '90071992547409.91'; // 2^53 − 1 units
  const prices = [max, max, '-0.01', max, '-90071992547409.91', '0.02'];
  const units = [1, 2, 3, 4].map((seed) => {
    const m = ingested(shuffled(prices, seed), 2);
    return [...m.segments.values()][0]!.rows.get('de')!.values[1];
  });
  const exact = 2n * BigInt(Number.MAX_SAFE_INTEGER) + 1n;
  expect(units).toEqual([exact, exact, exact, exact]);
  // Back within the safe range: a Number again, whatever the path there.
  expect(addUnits(exact, -exact + 5n)).toBe(5);
  expect(addUnits(Number.MAX_SAFE_INTEGER, 1)).toBe(2n ** 53n);
  expect(addUnits(-Number.MAX_SAFE_INTEGER, -1)).toBe(-(2n ** 53n));
  expect(unitsFromText('9007199254740991')).toBe(Number.MAX_SAFE_INTEGER);
  expect(unitsFromText('9007199254740992')).toBe(2n ** 53n);
});

test('events of two partitions, in any order, add to the same units, add to the same units', () => {
  fc.assert(
    fc.property(
      fc.array(
        fc.tuple(
          fc.integer({ min: -99_999_999, max: 99_999_999 }),
          fc.constantFrom('de', 'fr'),
          fc.nat(1),
        ),
        { minLength: 1, maxLength: 60 },
      ),
      fc.nat(),
      (events, seed) => {
        const answer = (order: typeof events): (string | number)[][] => {
          const m = new SegmentManager(schema);
          const parse = eventTextParser(schema);
          order.forEach(([cents, country, partition], i) => {
            const price = formatUnits(BigInt(cents), 2);
            const parsed = parse(`{"ts":${T0},"country":"${country}","price":${price}}`);
            if (!parsed.ok) throw new Error(price);
            m.accept(partition, 1, BigInt(i), parsed.event);
          });
          return querySegments('orders', schema, m.segments.values(), {
            filters: {},
            groupBy: ['country'],
            measures: ['revenue'],
          }).rows;
        };
        const expected = ['de', 'fr'].flatMap((c) => {
          const mine = events.filter((e) => e[1] === c);
          return mine.length === 0
            ? []
            : [
                [
                  c,
                  formatUnits(
                    mine.reduce((n, e) => n + BigInt(e[0]), 0n),
                    2,
                  ),
                ],
              ];
        });
        expect(answer(events)).toEqual(expected);
        expect(answer(shuffled(events, seed))).toEqual(expected);
      },
    ),
    { numRuns: 200 },
  );
});
