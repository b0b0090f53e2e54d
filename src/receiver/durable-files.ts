// Crash-safe files: write to a temporary name, fsync, rename over the target, fsync the directory.
// A reader sees the old file or the new one, never a torn one. The async versions do the same
// through node:fs/promises, in libuv's thread pool: an fsync then stalls no other work of the
// event loop (every cube's consumer shares it).
import { closeSync, fsyncSync, openSync, renameSync, writeSync } from 'node:fs';
import { open, rename } from 'node:fs/promises';
import { dirname } from 'node:path';

export function fsyncDirectory(dir: string): void {
  const fd = openSync(dir, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

export function writeFileDurably(path: string, data: string | Uint8Array, syncDir = true): void {
  const tmp = `${path}.tmp`;
  const fd = openSync(tmp, 'w');
  try {
    writeSync(fd, typeof data === 'string' ? Buffer.from(data) : data);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, path);
  if (syncDir) fsyncDirectory(dirname(path));
}

export async function fsyncDirectoryAsync(dir: string): Promise<void> {
  const handle = await open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** writeFileDurably off the event loop: durable (and renamed) when the promise resolves. */
export async function writeFileDurablyAsync(
  path: string,
  data: string | Uint8Array,
  syncDir = true,
): Promise<void> {
  const tmp = `${path}.tmp`;
  const handle = await open(tmp, 'w');
  try {
    await handle.writeFile(data);
    await handle.sync();
  } finally {
    await handle.close();
  }
  await rename(tmp, path);
  if (syncDir) await fsyncDirectoryAsync(dirname(path));
}
