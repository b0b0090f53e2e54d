// How long a cube's reconcile waits on a receiver, and when a cube at rest is reconciled again
// after each outcome. Each figure says why it is what it is.

/** How long one drain call waits on a receiver; a drain not done by then is polled again. */
export const drainPollMs = 250;
/**
 * How long one seal call waits for the hand-off; one not done by then is polled again. The
 * receiver answers as soon as its segments are handed off, so a short wait costs nothing.
 */
export const sealPollMs = 250;
/**
 * How long one pass of Starting re-reads the sources' coverage while their released data is being
 * committed (a hand-off of what the release sealed, tens of milliseconds when deep storage is
 * well), before ending the pass to come back: a pass that ends runs the releases again first.
 */
export const commitWaitMs = 500;
/** How long a hand-off may stay pending in Sealing before it is reported (HandOffPending). */
export const handOffTimeoutMs = 30_000;

/**
 * When the cube runs again, by outcome. The short ones are capped by the resync (`atMostResync`)
 * where a test or an operator may set the resync shorter than them.
 */
export const requeueAfterMs = {
  /**
   * A deletion waits for a replica set that holds data of the cube and has no ready receiver:
   * a person brings it back or removes the finalizer; polled without spinning a worker.
   */
  finalizeBlocked: 2_000,
  /** A receiver does not run the spec yet (down, refused the call): asked again soon. */
  specNotRolledOut: 2_000,
  /**
   * A replica of the move in Sealing is still draining to stop offsets it missed: looked at again
   * after one drain poll's length, the time a drain call itself waits on a receiver.
   */
  sealingAwaitsDrain: drainPollMs,
  /** A replica repair under way (a drain, a hand-off) is looked at again soon. */
  repairPending: 1_000,
  /**
   * A replica set keeps data of partitions moved away that is not committed yet: its commit is
   * what lets the set be failed over, so it is read again soon, not at the resync.
   */
  releasedUncommitted: 2_000,
  /** Degraded: the problem (a pod back, a broker up) may clear well before the resync. */
  degraded: 5_000,
} as const;

/** `delayMs`, or the resync when that is shorter: a retry never comes later than a resync. */
export function atMostResync(resyncMs: number, delayMs: number): number {
  return Math.min(resyncMs, delayMs);
}
