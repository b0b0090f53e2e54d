// Read-your-writes over an informer cache: the cache may not have the reconciler's last write yet
// when the key runs again, and a reconcile that read the older version would run a reassign phase
// again from a stale journal. resourceVersions are opaque (never compared for order), but a write
// made with a resourceVersion precondition proves that version superseded.
import type { KubernetesObject } from '@kubernetes/client-node';
import { objectKey } from './runtime/informer.ts';

export class OwnWrites<T extends KubernetesObject> {
  private readonly byKey = new Map<string, { superseded: Set<string>; latest: T }>();

  /** Records that `after` was written over `before` (with `before`'s resourceVersion); returns it. */
  wrote(before: T, after: T): T {
    const key = objectKey(before);
    const own = this.byKey.get(key) ?? { superseded: new Set<string>(), latest: after };
    if (before.metadata?.resourceVersion) own.superseded.add(before.metadata.resourceVersion);
    own.latest = after;
    this.byKey.set(key, own);
    return after;
  }

  /**
   * The object to reconcile: this process's last write when the cache still holds a version that
   * write superseded, else the cached object (the write itself or anything after it), after which
   * nothing is remembered for the key.
   */
  read(key: string, cached: T | undefined): T | undefined {
    const own = this.byKey.get(key);
    if (cached && own?.superseded.has(cached.metadata?.resourceVersion ?? '')) return own.latest;
    this.byKey.delete(key);
    return cached;
  }
}
