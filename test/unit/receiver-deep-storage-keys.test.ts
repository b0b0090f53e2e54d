// Names that become deep-storage keys cannot leave its root: the admin API refuses a fence or an
// assignment whose names are not DNS labels, and the storage layer refuses any key with `..`.
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { assignCubeRequest, fenceRequest } from '../../src/protocol/admin-api.ts';
import { DeepStorageKeyError, checkDeepStorageKey } from '../../src/receiver/deep-storage.ts';
import { FilesystemDeepStorage } from '../../src/receiver/deep-storage-filesystem.ts';
import { scratchDirs } from '../support/scratch-dirs.ts';

const scratchDir = scratchDirs();

test.each([
  'namespace=default/orders/window=2026-01-01T00:00:00.000Z/replicaSet=rs-a/commit.1.json',
  'orders/fences/replicaSet=rs-a/f-3-abcdef-stop.json',
  '',
])('%j is a key', (key) => {
  expect(checkDeepStorageKey(key)).toBe(key);
});

test.each([
  '../x',
  'a/../../x',
  'a/./b',
  'a//b',
  '/abs',
  'a/b/',
  'a\\..\\b',
  'a\0b',
  'orders/fences/replicaSet=../../../etc',
])('%j is refused', (key) => {
  expect(() => checkDeepStorageKey(key)).toThrow(DeepStorageKeyError);
});

test('a directory deep storage writes nothing outside its root for a key with ..', async () => {
  const parent = scratchDir('deep-keys-');
  const storage = new FilesystemDeepStorage(join(parent, 'root'));
  await expect(
    storage.createObject('cube/fences/replicaSet=../../../x.json', '{}'),
  ).rejects.toThrow(DeepStorageKeyError);
  await expect(storage.readObject('../outside')).rejects.toThrow(DeepStorageKeyError);
  expect(readdirSync(parent)).toEqual([]);
});

describe('the admin API names that become keys', () => {
  const fence = { replicaSet: 'rs-a', id: 'f-3-abcdef', partitions: { '0': 1 } };

  test('a fence of DNS labels is valid', () => {
    expect(fenceRequest.parse(fence).id).toBe('f-3-abcdef');
  });

  test.each([
    ['replicaSet', '..'],
    ['replicaSet', 'rs-a/../../x'],
    ['id', '../../escape'],
    ['id', 'F-1'],
    ['id', 'a b'],
  ])('a fence with %s %j is refused, naming the field', (field, value) => {
    const result = fenceRequest.safeParse({ ...fence, [field]: value });
    expect(result.success).toBe(false);
    expect(result.error?.issues[0]?.path).toEqual([field]);
  });

  test('an assignment whose replica set is not a DNS label is refused', () => {
    const result = assignCubeRequest.safeParse({ replicaSet: '../rs' });
    expect(result.success).toBe(false);
    expect(result.error?.issues.map((i) => i.path.join('.'))).toContain('replicaSet');
  });
});
