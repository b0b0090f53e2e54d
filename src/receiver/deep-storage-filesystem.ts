// Deep storage in a directory: a hand-off is written into `<key>.tmp` and renamed to `<key>`, so
// a reader sees a hand-off directory whole or not at all.
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { faultPoint } from '../observability/fault-injection.ts';
import type { DeepStorage, HandOffFile } from './deep-storage.ts';
import { fsyncDirectoryAsync, writeFileDurablyAsync } from './durable-files.ts';

export class FilesystemDeepStorage implements DeepStorage {
  readonly type = 'filesystem';
  private readonly dir: string;

  constructor(dir: string) {
    this.dir = dir;
  }

  locationOf(key: string): string {
    return join(this.dir, ...key.split('/'));
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

  close(): void {}
}
