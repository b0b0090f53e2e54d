// How a receiver gives up a cube it is to keep nothing of: seal its segments, wait for them to be
// HANDED_OFF (committed to deep storage), then unassign the cube. Dropping before the hand-off
// would lose the data only that receiver holds, so a pending hand-off drops nothing.
import type { ReceiverClient } from '../protocol/client.ts';

/** The receiver calls a seal-and-drop makes. */
export type SealingReceiver = Pick<ReceiverClient, 'seal' | 'unassign'>;

/**
 * `dropped`: every segment was handed off and the cube unassigned. `handOffPending`: a segment was
 * not HANDED_OFF within the seal's wait; nothing was dropped, and the caller asks again later.
 */
export type SealAndDropOutcome = 'dropped' | 'handOffPending';

export async function sealAndDrop(
  receiver: SealingReceiver,
  cube: string,
  options: {
    /** How long the seal call waits on the receiver for the hand-off. */
    sealPollMs: number;
    signal?: AbortSignal | undefined;
    /** Called between the hand-off and the unassign (a fault point, a log line). */
    onHandedOff?: () => void;
  },
): Promise<SealAndDropOutcome> {
  const sealed = await receiver.seal(cube, options.sealPollMs, options.signal);
  if (sealed.segments.some((s) => s.state !== 'HANDED_OFF')) return 'handOffPending';
  options.onHandedOff?.();
  await receiver.unassign(cube, false, options.signal);
  return 'dropped';
}
