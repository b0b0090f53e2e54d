// Observed state gathered per receiver, not per cube (DESIGN §2): one GET /v1/cubes per receiver
// per period answers for every cube it serves. Concurrent reconciles share one call in flight; a
// mutating call to the receiver invalidates its entry, so the next read (a reassign's next phase,
// the observation after Done) sees the receiver after the change.
import type { CubeSummaries, CubeSummary } from '../protocol/admin-api.ts';
import { systemClock, type Clock } from './runtime/clock.ts';

export interface ReceiverStatusCacheOptions {
  /** GET /v1/cubes of one receiver, by its base URL. */
  fetch: (baseUrl: string) => Promise<CubeSummaries>;
  /** An answer is reused for this long (the resync period). */
  maxAgeMs: number;
  /** A failed call is reused for this long, so a receiver that is down is not asked per cube. */
  failureMaxAgeMs?: number;
  clock?: Clock;
}

interface Entry {
  /** Bumped by every invalidation: an answer to a call started before it is not kept. */
  generation: number;
  settled?: { at: number; cubes?: Map<string, CubeSummary>; error?: Error };
  inFlight?: Promise<Map<string, CubeSummary>>;
}

export class ReceiverStatusCache {
  private readonly options: ReceiverStatusCacheOptions;
  private readonly clock: Clock;
  private readonly entries = new Map<string, Entry>();
  /** Calls made to receivers, for tests and the bench. */
  calls = 0;

  constructor(options: ReceiverStatusCacheOptions) {
    this.options = options;
    this.clock = options.clock ?? systemClock;
  }

  /**
   * The cube as the receiver last reported it, `undefined` when the receiver does not hold it.
   * Throws what the receiver call threw.
   */
  async cube(
    baseUrl: string,
    cube: string,
    signal?: AbortSignal,
  ): Promise<CubeSummary | undefined> {
    return (await this.receiver(baseUrl, signal)).get(cube);
  }

  /** Every cube of the receiver, by name; fetched when the last answer is too old. */
  receiver(baseUrl: string, signal?: AbortSignal): Promise<Map<string, CubeSummary>> {
    const entry = this.entries.get(baseUrl) ?? { generation: 0 };
    this.entries.set(baseUrl, entry);
    const { settled } = entry;
    if (settled) {
      const age = this.clock.now() - settled.at;
      if (settled.cubes && age < this.options.maxAgeMs) return Promise.resolve(settled.cubes);
      const failureMaxAgeMs =
        this.options.failureMaxAgeMs ?? Math.min(1_000, this.options.maxAgeMs);
      if (settled.error && age < failureMaxAgeMs) return Promise.reject(settled.error);
    }
    entry.inFlight ??= this.load(baseUrl, entry);
    return abortable(entry.inFlight, signal);
  }

  /** The receiver's state changed (or may have): the next read asks it again. */
  invalidate(baseUrl: string): void {
    const entry = this.entries.get(baseUrl);
    if (!entry) return;
    entry.generation += 1;
    entry.settled = undefined;
    entry.inFlight = undefined;
  }

  private async load(baseUrl: string, entry: Entry): Promise<Map<string, CubeSummary>> {
    const generation = entry.generation;
    this.calls += 1;
    const current = () => entry.generation === generation;
    try {
      const answer = await this.options.fetch(baseUrl);
      const cubes = new Map(answer.cubes.map((c) => [c.cube, c]));
      if (current()) entry.settled = { at: this.clock.now(), cubes };
      return cubes;
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
