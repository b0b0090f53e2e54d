// Read-your-writes over an informer cache: the cache may not have the reconciler's last write yet
// when the key runs again, and a reconcile that read the older version would run a reassign phase
// again from a stale journal. resourceVersions are opaque (never compared for order), but a write
// made with a resourceVersion precondition proves that version superseded. It also tells the watch
// event of the reconciler's own write from anyone else's, so that its own writes do not wake it.
import type { KubernetesObject } from '@kubernetes/client-node';
import { objectKey, stripManagedFields } from './runtime/informer.ts';

/** Versions remembered per key: the watch delivers an own write soon after the write returns. */
const ownVersionsKept = 8;

export class OwnWrites<T extends KubernetesObject> {
  private readonly byKey = new Map<string, { superseded: Set<string>; latest: T }>();
  /** Per key, the resourceVersions this process's writes produced, oldest first. */
  private readonly written = new Map<string, string[]>();

  /** Records that `after` was written over `before` (with `before`'s resourceVersion); returns it. */
  wrote(before: T, after: T): T {
    stripManagedFields(after); // as the cache keeps it
    const key = objectKey(before);
    const own = this.byKey.get(key) ?? { superseded: new Set<string>(), latest: after };
    if (before.metadata?.resourceVersion) own.superseded.add(before.metadata.resourceVersion);
    own.latest = after;
    this.byKey.set(key, own);
    const version = after.metadata?.resourceVersion;
    if (version) {
      const versions = this.written.get(key) ?? [];
      versions.push(version);
      if (versions.length > ownVersionsKept) versions.shift();
      this.written.set(key, versions);
    }
    return after;
  }

  /**
   * True when `obj` is a version this process wrote: its watch event brings nothing the
   * reconciler does not know. A write that raced the event (the event came first) is not
   * recognised, and costs one reconcile that finds nothing to change.
   */
  isOwnWrite(obj: T): boolean {
    const version = obj.metadata?.resourceVersion;
    return version !== undefined && (this.written.get(objectKey(obj))?.includes(version) ?? false);
  }

  /**
   * The object to reconcile: this process's last write when the cache still holds a version that
   * write superseded, else the cached object (the write itself or anything after it), after which
   * nothing is remembered for the key.
   */
  read(key: string, cached: T | undefined): T | undefined {
    const own = this.byKey.get(key);
    if (!cached) this.written.delete(key);
    if (cached && own?.superseded.has(cached.metadata?.resourceVersion ?? '')) return own.latest;
    this.byKey.delete(key);
    return cached;
  }
}
