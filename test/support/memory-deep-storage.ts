// Deep storage in memory for unit tests: objects in a map, with the create-if-absent of the real
// ones, and a switch that makes every call fail as a store that is down does.
import type { DeepStorage, HandOffFile } from '../../src/receiver/deep-storage.ts';

export class MemoryDeepStorage implements DeepStorage {
  readonly type = 's3';
  down = false;
  writes = 0;
  readonly objects = new Map<string, string>();
  /** The data files' bytes, by key (`objects` holds their sizes). */
  readonly bytes = new Map<string, Uint8Array>();

  private check(): Promise<void> {
    return this.down ? Promise.reject(new Error('connect ECONNREFUSED')) : Promise.resolve();
  }

  locationOf(key: string): string {
    return `s3://lake/${key}`;
  }

  async readManifest(key: string): Promise<string | undefined> {
    await this.check();
    return this.objects.get(`${key}/manifest.json`);
  }

  async writeHandOff(key: string, files: HandOffFile[], manifest: string): Promise<void> {
    this.writes += 1;
    await this.check();
    for (const f of files) {
      this.objects.set(`${key}/${f.name}`, String(f.body.byteLength));
      this.bytes.set(`${key}/${f.name}`, f.body);
    }
    this.objects.set(`${key}/manifest.json`, manifest);
  }

  async listKeys(prefix: string, _signal?: AbortSignal, startAfter?: string): Promise<string[]> {
    await this.check();
    return [...this.objects.keys()]
      .filter((k) => k.startsWith(`${prefix}/`))
      .map((k) => k.slice(prefix.length + 1))
      .filter((k) => startAfter === undefined || k > startAfter);
  }

  async readObject(key: string): Promise<string | undefined> {
    await this.check();
    return this.objects.get(key);
  }

  async readBytes(key: string): Promise<Uint8Array | undefined> {
    await this.check();
    return this.bytes.get(key);
  }

  async createObject(key: string, body: string): Promise<boolean> {
    await this.check();
    if (this.objects.has(key)) return false;
    this.objects.set(key, body);
    return true;
  }

  close(): void {}
}
