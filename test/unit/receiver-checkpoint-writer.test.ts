// Fragment file names: the flush's sequence number, padded so that names sort in write order,
// then the segment's key.
import { fragmentName } from '../../src/receiver/checkpoint-writer.ts';

test('a fragment is named by its sequence number, padded, and its segment', () => {
  expect(fragmentName(7, 1_764_504_000_001)).toBe('0000000007-1764504000001.jsonl');
});

test('fragment names sort in the order they were written, whatever their segments', () => {
  const written = [
    fragmentName(9, 2_000),
    fragmentName(10, 1_000),
    fragmentName(11, 1_000),
    fragmentName(100, 3_000),
  ];
  expect([...written].sort()).toEqual(written);
});
