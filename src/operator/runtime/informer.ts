// A cache of Kubernetes objects kept current by list+watch, supervised: client-node's informer
// (ListWatch) stops for good on any error but 410 and timeouts, so this one restarts it with
// jittered backoff, and restarts it too when the server has gone silent for too long.
//
// Handlers run synchronously inside the informer and should only enqueue keys; a reconciler then
// reads the cache. Cached objects are shared with every reader and with the cache itself: clone
// them (structuredClone) before changing anything. Objects from the initial list are what the
// `list` function returned (typed clients turn timestamps into Date), objects from the watch are
// plain JSON (timestamps are strings): read only fields that look the same either way, or make
// `list` return plain JSON too.
import {
  ListWatch,
  Watch,
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
} from '@kubernetes/client-node';
import type { Counter, Registry } from 'prom-client';
import { sharedCounter } from '../../observability/metrics.ts';
import { systemClock, type Clock } from './clock.ts';
import { describeError, silentLogger, type RuntimeLogger } from './logger.ts';

export interface InformerEventHandlers<T> {
  add?(obj: T): void;
  /** `old` is the cached object it replaces (never the same resourceVersion). */
  update?(obj: T, old: T): void;
  /** `obj` is the last state of the object (from the watch, or the cache when found missing on a relist). */
  delete?(obj: T): void;
}

export type RestartReason = 'error' | 'silence';

export interface SupervisedInformerOptions<T extends KubernetesObject> {
  /** The `informer` label of the metrics and logs, e.g. `cubeassignments`. */
  name: string;
  kubeConfig: KubeConfig;
  /** The collection's URL path, e.g. `/api/v1/namespaces/ns/configmaps`. */
  path: string;
  /** Lists the same collection (a plain list, no resourceVersion: it must be current). */
  list: () => Promise<KubernetesListObject<T>>;
  labelSelector?: string;
  fieldSelector?: string;
  registry: Registry;
  /** First delay before a restart after an error; doubles per failure up to `maxMs`. Default 1 s … 30 s. */
  restartBackoff?: { initialMs?: number; maxMs?: number };
  /**
   * Restart when nothing came from the server for this long: no list, no watch event or
   * bookmark, no watch (re)connection. client-node reconnects a quiet watch every 30 s, so keep
   * this well above that. Default 2 minutes.
   */
  silenceTimeoutMs?: number;
  logger?: RuntimeLogger;
  clock?: Clock;
}

/** client-go's MetaNamespaceKeyFunc: `namespace/name`, or `name` for cluster-scoped objects. */
export function objectKey(obj: KubernetesObject): string {
  const name = obj.metadata?.name ?? '';
  const namespace = obj.metadata?.namespace;
  return namespace ? `${namespace}/${name}` : name;
}

export function splitObjectKey(key: string): { namespace: string | undefined; name: string } {
  const slash = key.indexOf('/');
  return slash < 0
    ? { namespace: undefined, name: key }
    : { namespace: key.slice(0, slash), name: key.slice(slash + 1) };
}

/**
 * Drops what the cache never reads and the server sends with every object: managedFields, a
 * record of which manager set each field, often larger than the object's spec (controller-runtime's
 * TransformStripManagedFields). At 1,000 cubes it was a large part of the operator's heap.
 */
export function stripManagedFields(obj: unknown): void {
  const metadata = (obj as { metadata?: { managedFields?: unknown } } | null)?.metadata;
  if (metadata && 'managedFields' in metadata) delete metadata.managedFields;
}

/**
 * client-node's Watch with two changes: it asks for bookmarks (they keep the resourceVersion
 * fresh and prove the server alive), and it reports what it hears from the server. It also turns
 * a throw before the request (e.g. failing credentials) into `done(error)`: ListWatch hands
 * `done` to the watch without awaiting it, so such a throw would otherwise end the informer
 * without any 'error' event.
 */
class SupervisedWatch extends Watch {
  private readonly isCurrent: () => boolean;
  private readonly heardFromServer: () => void;

  constructor(kubeConfig: KubeConfig, isCurrent: () => boolean, heardFromServer: () => void) {
    super(kubeConfig);
    this.isCurrent = isCurrent;
    this.heardFromServer = heardFromServer;
  }

  override async watch(
    path: string,
    queryParams: Record<string, string | number | boolean | undefined>,
    callback: (phase: string, apiObj: unknown, watchObj?: unknown) => void,
    done: (err: unknown) => void,
  ): Promise<AbortController> {
    // A superseded ListWatch may still be on its way here (after a list or a reconnect delay).
    if (!this.isCurrent()) {
      done(new Error('informer restarted; watch of the old one not opened'));
      return new AbortController();
    }
    let failed = false;
    try {
      const controller = await super.watch(
        path,
        { ...queryParams, allowWatchBookmarks: true },
        (phase, apiObj, watchObj) => {
          this.heardFromServer();
          stripManagedFields(apiObj);
          callback(phase, apiObj, watchObj);
        },
        (err: unknown) => {
          if (err) failed = true;
          done(err);
        },
      );
      // Watch.watch returns once the server answered; without a failure that answer was 200.
      if (!failed) this.heardFromServer();
      return controller;
    } catch (error) {
      done(error);
      return new AbortController();
    }
  }
}

export class SupervisedInformer<T extends KubernetesObject> {
  readonly name: string;
  private readonly options: SupervisedInformerOptions<T>;
  private readonly logger: RuntimeLogger;
  private readonly clock: Clock;
  private readonly initialBackoffMs: number;
  private readonly maxBackoffMs: number;
  private readonly silenceTimeoutMs: number;
  private readonly restarts: Counter<'informer' | 'reason'>;

  private readonly cache = new Map<string, Map<string, T>>();
  private readonly handlers: InformerEventHandlers<T>[] = [];
  private running = false;
  private synced = false;
  private syncWaiters: { resolve: () => void; reject: (error: Error) => void }[] = [];
  /** Bumped on every (re)start and on stop; callbacks of older ListWatches are ignored. */
  private generation = 0;
  private current: ListWatch<T> | undefined;
  private lastHeard = 0;
  private failures = 0;
  private cancelRestart: (() => void) | undefined;
  private cancelWatchdog: (() => void) | undefined;

  constructor(options: SupervisedInformerOptions<T>) {
    this.name = options.name;
    this.options = options;
    this.logger = options.logger ?? silentLogger;
    this.clock = options.clock ?? systemClock;
    this.initialBackoffMs = options.restartBackoff?.initialMs ?? 1_000;
    this.maxBackoffMs = options.restartBackoff?.maxMs ?? 30_000;
    this.silenceTimeoutMs = options.silenceTimeoutMs ?? 120_000;
    this.restarts = sharedCounter(options.registry, {
      name: 'informer_restarts_total',
      help: 'Restarts of a supervised informer, by reason (error, silence)',
      labelNames: ['informer', 'reason'],
    });
    for (const reason of ['error', 'silence'] as const) {
      this.restarts.inc({ informer: this.name, reason }, 0);
    }
  }

  /**
   * Registers handlers and returns the function that removes them. They must be synchronous and
   * quick (enqueue keys, nothing more); a throwing handler is logged and does not disturb the
   * others. Registered after the first list, they are first called with `add` for every cached
   * object, as client-go does.
   */
  addEventHandler(handlers: InformerEventHandlers<T>): () => void {
    this.handlers.push(handlers);
    if (this.synced) {
      for (const obj of this.list()) this.call('add', () => handlers.add?.(obj));
    }
    return () => {
      const index = this.handlers.indexOf(handlers);
      if (index >= 0) this.handlers.splice(index, 1);
    };
  }

  /** Starts listing and watching; returns at once (see `waitForSync`). */
  start(): void {
    if (this.running) return;
    this.running = true;
    this.failures = 0;
    this.launch();
  }

  /** Stops watching for good; the cache keeps what it had. */
  async stop(): Promise<void> {
    if (!this.running) return;
    this.running = false;
    this.generation++;
    this.cancelRestart?.();
    this.cancelWatchdog?.();
    this.cancelRestart = this.cancelWatchdog = undefined;
    const stopped = new Error(`informer ${this.name} stopped before its first list`);
    for (const waiter of this.syncWaiters.splice(0)) waiter.reject(stopped);
    const current = this.current;
    this.current = undefined;
    await current?.stop();
  }

  /** True once the first list has been delivered to the cache and the handlers. */
  hasSynced(): boolean {
    return this.synced;
  }

  waitForSync(signal?: AbortSignal): Promise<void> {
    if (this.synced) return Promise.resolve();
    if (signal?.aborted) return Promise.reject(signal.reason as Error);
    return new Promise((resolve, reject) => {
      const onAbort = (): void => {
        this.syncWaiters = this.syncWaiters.filter((w) => w !== waiter);
        reject(signal?.reason as Error);
      };
      const waiter = {
        resolve: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
        reject: (error: Error) => {
          signal?.removeEventListener('abort', onAbort);
          reject(error);
        },
      };
      this.syncWaiters.push(waiter);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** The cached object (shared: clone before changing it). */
  get(name: string, namespace?: string): T | undefined {
    return this.cache.get(namespace ?? '')?.get(name);
  }

  /** Cached objects, of one namespace or all (shared: clone before changing them). */
  list(namespace?: string): T[] {
    if (namespace !== undefined) return [...(this.cache.get(namespace)?.values() ?? [])];
    return [...this.cache.values()].flatMap((objects) => [...objects.values()]);
  }

  private launch(): void {
    const generation = ++this.generation;
    const isCurrent = (): boolean => this.running && generation === this.generation;
    const watch = new SupervisedWatch(this.options.kubeConfig, isCurrent, () => {
      if (!isCurrent()) return;
      this.lastHeard = this.clock.now();
      // List and watch both work again: the next failure starts from the first delay.
      this.failures = 0;
    });
    const informer = new ListWatch<T>(
      this.options.path,
      watch,
      () => this.listFor(generation),
      false,
      this.options.labelSelector,
      this.options.fieldSelector,
    );
    informer.on('add', (obj) => isCurrent() && this.upsert(obj));
    informer.on('update', (obj) => isCurrent() && this.upsert(obj));
    informer.on('delete', (obj) => isCurrent() && this.remove(obj));
    informer.on('error', (error) => isCurrent() && this.restart('error', error));
    this.current = informer;
    this.lastHeard = this.clock.now();
    this.armWatchdog();
    informer.start().catch((error: unknown) => isCurrent() && this.restart('error', error));
  }

  /** The list of one ListWatch: delivers it to the cache (client-go's Replace) before returning it. */
  private async listFor(generation: number): Promise<KubernetesListObject<T>> {
    const list = await this.options.list();
    if (!this.running || generation !== this.generation) {
      // Throwing keeps a superseded ListWatch from going on to open a watch.
      throw new Error(`informer ${this.name}: list of a superseded watch dropped`);
    }
    this.lastHeard = this.clock.now();
    for (const obj of list.items) stripManagedFields(obj);
    this.replace(list.items);
    if (!this.synced) {
      this.synced = true;
      this.logger.info('informer synced', { informer: this.name, objects: list.items.length });
      for (const waiter of this.syncWaiters.splice(0)) waiter.resolve();
    }
    return list;
  }

  private replace(items: readonly T[]): void {
    const listed = new Set(items.map((obj) => objectKey(obj)));
    for (const obj of this.list()) {
      if (!listed.has(objectKey(obj))) this.remove(obj);
    }
    for (const obj of items) this.upsert(obj);
  }

  private upsert(obj: T): void {
    const namespace = obj.metadata?.namespace ?? '';
    const name = obj.metadata?.name ?? '';
    let objects = this.cache.get(namespace);
    if (objects === undefined) {
      objects = new Map();
      this.cache.set(namespace, objects);
    }
    const old = objects.get(name);
    const version = obj.metadata?.resourceVersion;
    if (old !== undefined && version !== undefined && old.metadata?.resourceVersion === version) {
      return;
    }
    objects.set(name, obj);
    if (old === undefined) this.dispatch('add', (h) => h.add?.(obj));
    else this.dispatch('update', (h) => h.update?.(obj, old));
  }

  private remove(obj: T): void {
    const namespace = obj.metadata?.namespace ?? '';
    const objects = this.cache.get(namespace);
    if (!objects?.delete(obj.metadata?.name ?? '')) return;
    if (objects.size === 0) this.cache.delete(namespace);
    this.dispatch('delete', (h) => h.delete?.(obj));
  }

  private dispatch(event: string, call: (handlers: InformerEventHandlers<T>) => void): void {
    // A copy: a handler may remove itself (or others) while being called.
    for (const handlers of [...this.handlers]) this.call(event, () => call(handlers));
  }

  private call(event: string, handler: () => void): void {
    try {
      handler();
    } catch (error) {
      this.logger.error('informer event handler failed', {
        informer: this.name,
        event,
        error: describeError(error),
      });
    }
  }

  private restart(reason: RestartReason, error?: unknown): void {
    if (!this.running) return;
    const stale = this.current;
    this.current = undefined;
    this.generation++;
    this.cancelWatchdog?.();
    this.cancelWatchdog = undefined;
    void stale?.stop();
    this.failures++;
    const exponential = this.initialBackoffMs * 2 ** Math.min(this.failures - 1, 30);
    const delayMs = Math.min(this.maxBackoffMs, exponential) * (1 + Math.random() * 0.5);
    this.restarts.inc({ informer: this.name, reason });
    this.logger.warn('informer restarting', {
      informer: this.name,
      reason,
      delayMs: Math.round(delayMs),
      ...(error === undefined ? {} : { error: describeError(error) }),
    });
    this.cancelRestart = this.clock.setTimeout(() => {
      this.cancelRestart = undefined;
      if (this.running) this.launch();
    }, delayMs);
  }

  private armWatchdog(): void {
    this.cancelWatchdog?.();
    const check = (): void => {
      this.cancelWatchdog = undefined;
      if (!this.running) return;
      const silentMs = this.clock.now() - this.lastHeard;
      if (silentMs >= this.silenceTimeoutMs) this.restart('silence');
      else this.cancelWatchdog = this.clock.setTimeout(check, this.silenceTimeoutMs - silentMs);
    };
    this.cancelWatchdog = this.clock.setTimeout(check, this.silenceTimeoutMs);
  }
}
