// Deep storage in a directory: a hand-off is written into `<key>.tmp` and renamed to `<key>`, so
// a reader sees a hand-off directory whole or not at all.
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { link, mkdir, readFile, readdir, rename, rm, unlink } from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';
import { faultPoint } from '../observability/fault-injection.ts';
import { type DeepStorage, type HandOffFile, checkDeepStorageKey } from './deep-storage.ts';
import { fsyncDirectoryAsync, writeFileDurablyAsync } from './durable-files.ts';

/** Listings of a tree whose directories keep going while it is walked, before the error stands. */
const listAttempts = 10;

/**
 * The files under `root` whose keys (relative, `/`-separated) sort after `startAfter`: a directory
 * all of whose keys sort before it is not read at all. Keys under `dir/` all sort after
 * `startAfter` when `dir/` does and is not a prefix of it, and all before when `dir/` sorts before
 * it and is not a prefix of it; only a directory that is a prefix of `startAfter` holds both.
 */
async function keysAfter(root: string, startAfter: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (dir: string): Promise<void> => {
    const entries = await readdir(dir === '' ? root : join(root, ...dir.split('/')), {
      withFileTypes: true,
    });
    for (const e of entries) {
      const key = dir === '' ? e.name : `${dir}/${e.name}`;
      if (!e.isDirectory()) {
        if (e.isFile() && key > startAfter) out.push(key);
        continue;
      }
      const under = `${key}/`;
      if (under > startAfter || startAfter.startsWith(under)) await walk(key);
    }
  };
  await walk('');
  return out;
}

export class FilesystemDeepStorage implements DeepStorage {
  readonly type = 'filesystem';
  private readonly dir: string;

  constructor(dir: string) {
    this.dir = dir;
  }

  locationOf(key: string): string {
    return join(this.dir, ...checkDeepStorageKey(key).split('/'));
  }

  readManifest(key: string): Promise<string | undefined> {
    const path = join(this.locationOf(key), 'manifest.json');
    return Promise.resolve(existsSync(path) ? readFileSync(path, 'utf8') : undefined);
  }

  /** Through node:fs/promises: the event loop (every cube's consumer) goes on while it writes. */
  async writeHandOff(key: string, files: HandOffFile[], manifest: string): Promise<void> {
    const dir = this.locationOf(key);
    const tmp = `${dir}.tmp`;
    await rm(tmp, { recursive: true, force: true });
    await mkdir(tmp, { recursive: true });
    await Promise.all(
      files.map((file) => writeFileDurablyAsync(join(tmp, file.name), file.body, false)),
    );
    faultPoint('after-hand-off-data');
    await writeFileDurablyAsync(join(tmp, 'manifest.json'), manifest, false);
    await fsyncDirectoryAsync(tmp);
    await mkdir(join(dir, '..'), { recursive: true });
    await rename(tmp, dir);
    await fsyncDirectoryAsync(join(dir, '..'));
  }

  /**
   * A recursive readdir fails with ENOENT when a directory under the root goes while it walks (a
   * hand-off's `<key>.tmp` renamed to `<key>`): that is listed again, and only a missing root is
   * an empty listing — taken for one, every commit record of the cube would read as absent.
   */
  async listKeys(prefix: string, _signal?: AbortSignal, startAfter?: string): Promise<string[]> {
    const root = this.locationOf(prefix);
    for (let attempt = 1; ; attempt++) {
      try {
        if (startAfter !== undefined) return await keysAfter(root, startAfter);
        const entries = await readdir(root, { recursive: true, withFileTypes: true });
        return entries
          .filter((e) => e.isFile())
          .map((e) => relative(root, join(e.parentPath, e.name)).split('\\').join('/'));
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
        if (!existsSync(root)) return [];
        if (attempt >= listAttempts) throw error;
      }
    }
  }

  async readObject(key: string): Promise<string | undefined> {
    try {
      return await readFile(this.locationOf(key), 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
  }

  async readBytes(key: string): Promise<Uint8Array | undefined> {
    try {
      return await readFile(this.locationOf(key));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
  }

  /**
   * Written durably under a name of its own, then linked to `key`: link() fails when `key` exists,
   * atomically (on NFS too), so of two writers exactly one wins and a reader never sees it torn.
   */
  async createObject(key: string, body: string): Promise<boolean> {
    const path = this.locationOf(key);
    await mkdir(dirname(path), { recursive: true });
    const tmp = `${path}.${process.pid}-${randomBytes(4).toString('hex')}.tmp`;
    await writeFileDurablyAsync(tmp, body, false);
    try {
      await link(tmp, path);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
      throw error;
    } finally {
      await unlink(tmp).catch(() => undefined);
    }
    await fsyncDirectoryAsync(dirname(path));
    return true;
  }

  close(): void {}
}
