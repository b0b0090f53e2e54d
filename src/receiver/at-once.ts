// Runs asynchronous work on a list a few items at a time: a cube's files (cube-store.ts) and its
// hand-offs (hand-off-scheduler.ts). One by one, each item waits for its own thread-pool round
// trips and fsyncs; all at once, one cube would fill libuv's thread pool, which every cube shares.

/**
 * Runs `work` on every item, at most `atOnce` at a time. After a failure no item is started, and
 * the promise rejects once those under way have ended: no work of a failed call outlives it.
 */
export async function eachAtOnce<T>(
  items: readonly T[],
  atOnce: number,
  work: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  let failure: { error: unknown } | undefined;
  const worker = async (): Promise<void> => {
    while (next < items.length && !failure) {
      const item = items[next++]!;
      try {
        await work(item);
      } catch (error) {
        failure ??= { error };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(atOnce, items.length) }, worker));
  if (failure) throw failure.error;
}
