// Time as the runtime sees it: a monotonic "now" in milliseconds and cancellable timers, so that
// queues, rate limiters and watchdogs can be driven by a manual clock in unit tests.
import { performance } from 'node:perf_hooks';

export interface Clock {
  /** Milliseconds on a monotonic scale; only differences are meaningful. */
  now(): number;
  /** Calls `callback` after `ms` milliseconds; the returned function cancels it. */
  setTimeout(callback: () => void, ms: number): () => void;
}

export const systemClock: Clock = {
  now: () => performance.now(),
  setTimeout: (callback, ms) => {
    const timer = setTimeout(callback, Math.max(0, ms));
    return () => clearTimeout(timer);
  },
};

interface ManualTimer {
  at: number;
  seq: number;
  callback: () => void;
}

/** A clock that moves only when told to; timers fire in order of their due time. */
export class ManualClock implements Clock {
  private current: number;
  private seq = 0;
  private timers: ManualTimer[] = [];

  constructor(start = 0) {
    this.current = start;
  }

  now(): number {
    return this.current;
  }

  setTimeout(callback: () => void, ms: number): () => void {
    const timer: ManualTimer = { at: this.current + Math.max(0, ms), seq: this.seq++, callback };
    this.timers.push(timer);
    return () => {
      this.timers = this.timers.filter((t) => t !== timer);
    };
  }

  /** Moves time forward by `ms`, firing every timer that falls due (also those set meanwhile). */
  advance(ms: number): void {
    const target = this.current + ms;
    for (;;) {
      const next = this.timers
        .filter((t) => t.at <= target)
        .sort((a, b) => a.at - b.at || a.seq - b.seq)[0];
      if (next === undefined) break;
      this.timers = this.timers.filter((t) => t !== next);
      this.current = next.at;
      next.callback();
    }
    this.current = target;
  }

  pendingTimers(): number {
    return this.timers.length;
  }
}
