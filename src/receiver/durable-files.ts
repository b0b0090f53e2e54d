// Crash-safe files: write to a temporary name, fsync, rename over the target, fsync the directory.
// A reader sees the old file or the new one, never a torn one.
import { closeSync, fsyncSync, openSync, renameSync, writeSync } from 'node:fs';
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

/**
 * Test hook for crash tests: with STREAMCUBE_FAULT=<point>[:<n>] the process kills itself with
 * SIGKILL the n-th time (default first) it reaches `point`. Inert when the variable is unset.
 */
const faultCounts = new Map<string, number>();
export function faultPoint(point: string): void {
  const spec = process.env.STREAMCUBE_FAULT;
  if (!spec) return;
  const [name, nth] = spec.split(':');
  if (name !== point) return;
  const count = (faultCounts.get(point) ?? 0) + 1;
  faultCounts.set(point, count);
  if (count >= Number(nth ?? '1')) process.kill(process.pid, 'SIGKILL');
}
