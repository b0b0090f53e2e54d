// How long a failed key waits before it is retried, as client-go's workqueue decides it: per-key
// exponential backoff, an overall token bucket, and the larger of the two.
import { systemClock, type Clock } from './clock.ts';

export interface RateLimiter {
  /** The delay before `key` may run again; counts as one more failure of `key`. */
  when(key: string): number;
  /** Clears the failure history of `key` (it succeeded, or it is given up on). */
  forget(key: string): void;
  /** How many times `key` has been rate-limited since it was last forgotten. */
  numRequeues(key: string): number;
}

/** `baseDelayMs · 2^failures`, capped at `maxDelayMs` (client-go: 5 ms → 1000 s). */
export class ExponentialFailureRateLimiter implements RateLimiter {
  private readonly failures = new Map<string, number>();
  private readonly baseDelayMs: number;
  private readonly maxDelayMs: number;

  constructor(baseDelayMs = 5, maxDelayMs = 1_000_000) {
    this.baseDelayMs = baseDelayMs;
    this.maxDelayMs = maxDelayMs;
  }

  when(key: string): number {
    const exponent = this.failures.get(key) ?? 0;
    this.failures.set(key, exponent + 1);
    return Math.min(this.baseDelayMs * 2 ** exponent, this.maxDelayMs);
  }

  forget(key: string): void {
    this.failures.delete(key);
  }

  numRequeues(key: string): number {
    return this.failures.get(key) ?? 0;
  }
}

/**
 * A token bucket shared by all keys (client-go: 10 qps, burst 100), with the reservation
 * semantics of Go's `rate.Limiter`: every call takes a token, going into debt when the bucket is
 * empty, and the delay is the time until that debt is paid back.
 */
export class TokenBucketRateLimiter implements RateLimiter {
  private readonly qps: number;
  private readonly burst: number;
  private readonly clock: Clock;
  private tokens: number;
  private last: number;

  constructor(qps = 10, burst = 100, clock: Clock = systemClock) {
    this.qps = qps;
    this.burst = burst;
    this.clock = clock;
    this.tokens = burst;
    this.last = clock.now();
  }

  when(): number {
    const now = this.clock.now();
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.last) / 1000) * this.qps);
    this.last = now;
    this.tokens -= 1;
    return this.tokens >= 0 ? 0 : (-this.tokens / this.qps) * 1000;
  }

  forget(): void {}

  numRequeues(): number {
    return 0;
  }
}

/** Asks every limiter (so each keeps its own account) and waits for the slowest. */
export class MaxOfRateLimiter implements RateLimiter {
  private readonly limiters: readonly RateLimiter[];

  constructor(...limiters: RateLimiter[]) {
    this.limiters = limiters;
  }

  when(key: string): number {
    return Math.max(0, ...this.limiters.map((l) => l.when(key)));
  }

  forget(key: string): void {
    for (const l of this.limiters) l.forget(key);
  }

  numRequeues(key: string): number {
    return Math.max(0, ...this.limiters.map((l) => l.numRequeues(key)));
  }
}

/** client-go's DefaultControllerRateLimiter. */
export function defaultControllerRateLimiter(clock: Clock = systemClock): RateLimiter {
  return new MaxOfRateLimiter(
    new ExponentialFailureRateLimiter(5, 1_000_000),
    new TokenBucketRateLimiter(10, 100, clock),
  );
}
