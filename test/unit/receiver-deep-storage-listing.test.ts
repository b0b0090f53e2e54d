// A directory's listing while receivers hand off into it: a hand-off directory renamed from its
// `.tmp` name while the walk runs never costs the listing the commit records beside it (the query
// server once read a cube's whole committed view as empty, every partition a gap from offset 0).
// A listing that resumes after a key lists exactly the keys after it, reading no directory whose
// keys all sort before it.
import { mkdir, rename, rm } from 'node:fs/promises';
import { FilesystemDeepStorage } from '../../src/receiver/deep-storage-filesystem.ts';
import { scratchDirs } from '../support/scratch-dirs.ts';

const scratchDir = scratchDirs();

const record = (w: number): string => `orders/window=${w}/replicaSet=rs-a/commit.1.json`;

test('a listing taken while hand-off directories are renamed holds every commit record', async () => {
  const storage = new FilesystemDeepStorage(scratchDir('deep-listing-'));
  const windows = [...Array(20).keys()];
  for (const w of windows) await storage.createObject(record(w), '{}');
  // A hand-off's last step, again and again: `<key>.tmp` renamed to `<key>` (then removed, so
  // that the tree stays small).
  let handingOff = true;
  const handOffs = (async () => {
    for (let n = 0; handingOff; n++) {
      const dir = storage.locationOf(`orders/window=${n % windows.length}/replicaSet=rs-a/h-${n}`);
      await mkdir(`${dir}.tmp/a/b`, { recursive: true });
      await rename(`${dir}.tmp`, dir);
      await rm(dir, { recursive: true });
    }
  })();
  const short: string[] = [];
  try {
    for (let i = 0; i < 100; i++) {
      const keys = new Set(await storage.listKeys('orders'));
      const lacking = windows.filter((w) => !keys.has(`window=${w}/replicaSet=rs-a/commit.1.json`));
      if (lacking.length > 0)
        short.push(`listing ${i} lacks the records of windows ${lacking.join(', ')}`);
    }
  } finally {
    handingOff = false;
    await handOffs;
  }
  expect(short).toEqual([]);
});

test('a prefix with nothing under it lists nothing', async () => {
  const storage = new FilesystemDeepStorage(scratchDir('deep-listing-'));
  expect(await storage.listKeys('orders')).toEqual([]);
});

test.each([
  ['', 'every key'],
  ['window=1', 'a window directory itself: it and all after'],
  ['window=1/replicaSet=rs-a/commit.1.json', 'a key: those after it, in its directory too'],
  ['window=1/replicaSet=rs-a/h', 'inside a directory name'],
  ['window=3', 'past the last: nothing'],
  ['a', 'before every key'],
])('listing after %j (%s): exactly the keys after it', async (startAfter) => {
  const storage = new FilesystemDeepStorage(scratchDir('deep-listing-'));
  for (const w of [0, 1, 2, 10, 12])
    for (const set of ['rs-a', 'rs-b']) {
      await storage.createObject(`orders/window=${w}/replicaSet=${set}/commit.1.json`, '{}');
      await storage.createObject(`orders/window=${w}/replicaSet=${set}/h-1/data.arrow`, '{}');
    }
  const all = await storage.listKeys('orders');
  expect(all).toHaveLength(20);
  expect((await storage.listKeys('orders', undefined, startAfter)).sort()).toEqual(
    all.filter((k) => k > startAfter).sort(),
  );
});
