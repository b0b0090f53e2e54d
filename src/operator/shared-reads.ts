// A read shared by everything that needs it within a period: one call per key (a receiver's
// GET /v1/cubes, a Kafka cluster's topic metadata) per resync answers every cube, so the cost
// grows with receivers and clusters, not with cubes (DESIGN §2). Concurrent readers share the call
// in flight; a change made through the same key (a mutating receiver call) invalidates it, so
// the next read (a reassign's next phase, the observation after Done) sees the change.
import { systemClock, type Clock } from './runtime/clock.ts';

export interface SharedReadsOptions<T> {
  fetch: (key: string) => Promise<T>;
  /** An answer is reused for this long (the resync period). */
  maxAgeMs: number;
  /** A failure is reused for this long, so a source that is down is not asked per cube. */
  failureMaxAgeMs?: number;
  clock?: Clock;
}

interface Entry<T> {
  /** Bumped by every invalidation: an answer to a call started before it is not kept. */
  generation: number;
  settled?: { at: number; value?: T; error?: Error };
  inFlight?: Promise<T>;
}

export class SharedReads<T> {
  private readonly options: SharedReadsOptions<T>;
  private readonly clock: Clock;
  private readonly entries = new Map<string, Entry<T>>();

  constructor(options: SharedReadsOptions<T>) {
    this.options = options;
    this.clock = options.clock ?? systemClock;
  }

  /**
   * The last answer for `key` when it is younger than `maxAgeMs` (default: the period), else a
   * new one (shared with the readers asking meanwhile). Throws what the fetch threw.
   */
  get(key: string, signal?: AbortSignal, maxAgeMs = this.options.maxAgeMs): Promise<T> {
    const entry = this.entries.get(key) ?? { generation: 0 };
    this.entries.set(key, entry);
    const { settled } = entry;
    if (settled) {
      const age = this.clock.now() - settled.at;
      const failureMaxAgeMs =
        this.options.failureMaxAgeMs ?? Math.min(1_000, this.options.maxAgeMs);
      if (settled.error && age < failureMaxAgeMs) return Promise.reject(settled.error);
      if (!settled.error && age < maxAgeMs) return Promise.resolve(settled.value as T);
    }
    entry.inFlight ??= this.load(key, entry);
    return abortable(entry.inFlight, signal);
  }

  /** What `key` stands for changed (or may have): the next read fetches again. */
  invalidate(key: string): void {
    const entry = this.entries.get(key);
    if (!entry) return;
    entry.generation += 1;
    entry.settled = undefined;
    entry.inFlight = undefined;
  }

  private async load(key: string, entry: Entry<T>): Promise<T> {
    const generation = entry.generation;
    const current = (): boolean => entry.generation === generation;
    try {
      const value = await this.options.fetch(key);
      if (current()) entry.settled = { at: this.clock.now(), value };
      return value;
    } catch (error) {
      const failure = error instanceof Error ? error : new Error(String(error));
      if (current()) entry.settled = { at: this.clock.now(), error: failure };
      throw failure;
    } finally {
      if (current()) entry.inFlight = undefined;
    }
  }
}
/** `promise`, or the signal's reason as soon as it aborts (the shared call itself goes on). */
function abortable<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return promise;
  const reason = (): Error =>
    signal.reason instanceof Error ? signal.reason : new Error('aborted', { cause: signal.reason });
  if (signal.aborted) return Promise.reject(reason());
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(reason());
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error instanceof Error ? error : new Error(String(error)));
      },
    );
  });
}
