// BatchParser: a batch parsed on the worker thread reads exactly as parseEvent reads each record,
// rejects included, with dimension strings and row keys carried over between batches.
import type { CubeSchema } from '../../src/api/cube.ts';
import { packValues } from '../../src/kafka/record-values.ts';
import { BatchParser, type ParsedBatch, reasonOf } from '../../src/receiver/batch-parser.ts';
import { parseEvent, type ParseResult } from '../../src/receiver/event.ts';
import { keyOf } from '../../src/receiver/segments.ts';
import { schemaOf } from '../support/schemas.ts';

const schema: CubeSchema = schemaOf(
  ['country', 'device'],
  { events: 'count', revenue: 'sum(price)', heaviest: 'max(weight)' },
  { window: '1h' },
);

const T = Date.UTC(2026, 0, 15, 10, 30, 0);

function read(batch: ParsedBatch, i: number): ParseResult {
  const { columns, dictionary } = batch;
  const reason = columns.reasons[i]!;
  if (reason !== 0) return { ok: false, reason: reasonOf(reason) };
  return {
    ok: true,
    event: {
      time: columns.times[i]!,
      dimensions: [0, 1].map((j) => dictionary[columns.codes[i * 2 + j]!]!),
      values: [0, 1, 2].map((j) => columns.values[i * 3 + j]!),
    },
  };
}

const values = (seed: number): (Buffer | null)[] => [
  ...Array.from({ length: 200 }, (_, i) =>
    Buffer.from(
      JSON.stringify({
        ts: T + i * 1000 + seed,
        country: ['de', 'fr', 'üñí', `c${(i + seed) % 7}`][i % 4],
        device: i % 5 === 0 ? null : i % 3,
        price: i / 3 - seed,
        weight: -0,
      }),
    ),
  ),
  null,
  Buffer.from('{"ts": '),
  Buffer.from('[1, 2]'),
  Buffer.from(JSON.stringify({ ts: '2026-01-15T10:00:00+01:00', country: 'de', price: 1 })),
  Buffer.from(JSON.stringify({ ts: T, country: {}, price: 1, weight: 1 })),
  Buffer.from(JSON.stringify({ ts: T, country: 'de', weight: 1 })),
  Buffer.from(JSON.stringify({ country: 'de', price: 1, weight: 1 })),
];

test('batches parsed on the worker read as parseEvent reads each record', async () => {
  const parser = new BatchParser(schema);
  try {
    for (const seed of [0, 1, 2]) {
      const batch = values(seed);
      const parsed = await parser.parse(packValues(batch));
      expect(parsed.columns.count).toBe(batch.length);
      const got = batch.map((_, i) => read(parsed, i));
      expect(got).toEqual(batch.map((v) => parseEvent(schema, v)));
      got.forEach((r, i) => {
        if (r.ok) {
          const key = parsed.keyDictionary[parsed.columns.keys[i]!];
          expect(key).toBe(keyOf(r.event.dimensions));
        }
      });
      // Each string crosses the thread once: a later batch adds only what is new.
      if (seed > 0) expect(parsed.columns.added.length).toBeLessThan(5);
    }
  } finally {
    await parser.close();
  }
  expect(parser.available).toBe(false);
  await expect(parser.parse(packValues([Buffer.from('{}')]))).rejects.toThrow('closed');
});

test('batches sent together are answered in order', async () => {
  const parser = new BatchParser(schema);
  try {
    const batches = [0, 1, 2, 3, 4].map(values);
    const parsed = await Promise.all(batches.map((b) => parser.parse(packValues(b))));
    parsed.forEach((p, n) =>
      expect(batches[n]!.map((_, i) => read(p, i))).toEqual(
        batches[n]!.map((v) => parseEvent(schema, v)),
      ),
    );
  } finally {
    await parser.close();
  }
});

test('packed values read back byte for byte, however they share buffers', () => {
  // Slices of one buffer in order with small and large gaps, out of order, overlapping and
  // repeated, beside nulls, Node's pooled small buffers and buffers of their own.
  const big = Buffer.from(
    Array.from({ length: 4000 }, (_, i) => String.fromCharCode(33 + (i % 90))).join(''),
  );
  const slice = (from: number, to: number): Buffer => big.subarray(from, to);
  const values: (Buffer | null)[] = [
    slice(0, 10),
    slice(12, 30),
    null,
    slice(30, 31),
    slice(700, 720),
    slice(5, 15),
    slice(5, 15),
    Buffer.from('{"pooled":1}'),
    slice(3990, 4000),
    Buffer.alloc(0),
    Buffer.from('x'.repeat(5000)),
    slice(0, 0),
  ];
  const { count, buffer } = packValues(values);
  const starts = new Int32Array(buffer, 0, count);
  const lengths = new Int32Array(buffer, count * 4, count);
  const bytes = Buffer.from(buffer, count * 8);
  const read = values.map((_, i) =>
    lengths[i]! < 0 ? null : bytes.toString('latin1', starts[i], starts[i]! + lengths[i]!),
  );
  expect(read).toEqual(values.map((v) => (v === null ? null : v.toString('latin1'))));
  // Spans, not the whole of `big`: about the bytes of the values.
  expect(bytes.length).toBeLessThan(5000 + 200);
});
