// Deep storage in a directory: a hand-off is written into `<key>.tmp` and renamed to `<key>`, so
// a reader sees a hand-off directory whole or not at all.
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { faultPoint } from '../observability/fault-injection.ts';
import type { DeepStorage, HandOffFile } from './deep-storage.ts';
import { fsyncDirectory, writeFileDurably } from './durable-files.ts';

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

  writeHandOff(key: string, files: HandOffFile[], manifest: string): Promise<void> {
    const dir = this.locationOf(key);
    const tmp = `${dir}.tmp`;
    rmSync(tmp, { recursive: true, force: true });
    mkdirSync(tmp, { recursive: true });
    for (const file of files) writeFileDurably(join(tmp, file.name), file.body, false);
    faultPoint('after-hand-off-data');
    writeFileDurably(join(tmp, 'manifest.json'), manifest, false);
    fsyncDirectory(tmp);
    mkdirSync(join(dir, '..'), { recursive: true });
    renameSync(tmp, dir);
    fsyncDirectory(join(dir, '..'));
    return Promise.resolve();
  }

  close(): void {}
}
