// A sum with a scale in a hand-off: an Int64 column of its units (format 2), the scale in the
// manifest and in the Arrow field's metadata, read back by the committed view as exact units;
// hand-offs of format 1 (Float64 sums, no format in the manifest) stay readable.
import { join } from 'node:path';
import { tableFromIPC } from 'apache-arrow';
import { readHandOffManifest, readHandOffRows } from '../../src/query/committed-view.ts';
import { FilesystemDeepStorage } from '../../src/receiver/deep-storage-filesystem.ts';
import { type HandOffTarget, handOffSegment } from '../../src/receiver/hand-off.ts';
import type { Row, Segment } from '../../src/receiver/segments.ts';
import { MemoryDeepStorage } from '../support/memory-deep-storage.ts';
import { schemaOf } from '../support/schemas.ts';

const schema = schemaOf(
  ['country'],
  { events: 'count', revenue: 'sum(price, 2)', dearest: 'max(price)' },
  { window: '1m' },
);
const target: HandOffTarget = {
  namespace: 'shop',
  cube: 'orders',
  replicaSet: 'rs-a',
  receiver: 'rs-a-0',
  schema,
};

const segmentOf = (rows: Row[]): Segment => ({
  key: 0,
  windowStart: 0,
  windowEnd: 60_000,
  state: 'IMMUTABLE',
  rows: new Map(rows.map((r) => [r.dimensions.join(), r])),
  delta: new Map(),
  ranges: new Map([[0, [{ from: 0n, to: 15n }]]]),
  epochs: new Map([[0, 1]]),
});

test('format 2: units in an Int64 column, the scale in the manifest and the Arrow metadata', async () => {
  const storage = new MemoryDeepStorage();
  const rows: Row[] = [
    { dimensions: ['de'], values: [10, 100, 0.1] },
    { dimensions: ['nl'], values: [3, 2n ** 60n + 7n, 360000] },
  ];
  const location = await handOffSegment(storage, target, segmentOf(rows));
  const key = location.replace('s3://lake/', '');
  const manifest = await readHandOffManifest(storage, key);
  expect(manifest).toMatchObject({ formatVersion: 2, scales: { revenue: 2 } });
  const table = tableFromIPC(storage.bytes.get(`${key}/data.arrow`));
  expect(String(table.schema.fields.find((f) => f.name === 'revenue')?.type)).toBe('Int64');
  expect(
    table.schema.fields.find((f) => f.name === 'revenue')?.metadata.get('streamcube.scale'),
  ).toBe('2');
  expect(table.schema.metadata.get('streamcube.formatVersion')).toBe('2');
  expect(await readHandOffRows(storage, key, schema)).toEqual([
    { dimensions: ['de'], values: [10, 100n, 0.1] },
    { dimensions: ['nl'], values: [3, 2n ** 60n + 7n, 360000] },
  ]);
});

test('a row past what an Int64 holds fails the hand-off, naming the measure', async () => {
  const rows: Row[] = [{ dimensions: ['de'], values: [1, 2n ** 63n, 1] }];
  await expect(handOffSegment(new MemoryDeepStorage(), target, segmentOf(rows))).rejects.toThrow(
    /the sum of revenue in a row of window 1970-01-01T00:00:00.000Z is 9223372036854775808 units/,
  );
});

// Written by the hand-off code of before units (format 1): window 0 of shop/orders, rows of ten
// events of 0.10 (0.9999999999999999 as floats), 0.1 + 0.2, and three of 360985.35000000003.
const fixture = new FilesystemDeepStorage(
  join(import.meta.dirname, '..', 'fixtures', 'hand-off-format-1'),
);
const fixtureKey = 'namespace=shop/orders/window=0/replicaSet=rs-a/rs-a-0.e1.4b4eed2ef29f';

test('format 1 (Float64 sums, no format in the manifest) still reads, its sums rounded to units', async () => {
  const manifest = await readHandOffManifest(fixture, fixtureKey);
  expect(manifest.formatVersion).toBeUndefined();
  const rows = await readHandOffRows(fixture, fixtureKey, schema);
  expect(rows.sort((a, b) => (a.dimensions[0]! < b.dimensions[0]! ? -1 : 1))).toEqual([
    { dimensions: ['de'], values: [10, 100n, 0.1] },
    { dimensions: ['fr'], values: [2, 30n, 0.2] },
    { dimensions: ['nl'], values: [3, 36098535n, 360000] },
  ]);
});

test('a format this reader does not know, or another scale than the cube has, is refused by name', async () => {
  const storage = new MemoryDeepStorage();
  const location = await handOffSegment(
    storage,
    target,
    segmentOf([{ dimensions: ['de'], values: [1, 1, 1] }]),
  );
  const key = location.replace('s3://lake/', '');
  const manifest = await readHandOffManifest(storage, key);
  await expect(
    readHandOffRows(storage, key, schema, { ...manifest, formatVersion: 3 }),
  ).rejects.toThrow(/has format 3; this reader reads formats up to 2/);
  await expect(
    readHandOffRows(storage, key, schema, { ...manifest, scales: { revenue: 3 } }),
  ).rejects.toThrow(/holds revenue at scale 3, the cube's is 2/);
});
