// Sealing: a source left without any partition of the cube seals, hands off and drops the cube;
// the final assignment and epochs are written with the journal's end, in the same write.
import type { ReassignJournal } from '../../../api/cube-assignment.ts';
import type { ReceiverEndpoint } from '../../discovery.ts';
import { completionStatus, finalAssignment } from '../completion.ts';
import { inPhaseMs, type ReassignContext } from '../context.ts';
import { journalKind } from '../journal.ts';
import { handOffPending } from '../messages.ts';
import { liveSources } from '../moves.ts';
import { waitForNotReadyReplicas } from '../not-ready-replicas.ts';
import {
  PhaseBlocked,
  phaseDone,
  phaseUnderWay,
  requeueDelayMs,
  type PhaseRun,
} from '../outcome.ts';
import { type SealAndDropOutcome, sealAndDrop } from '../../seal-and-drop.ts';
import {
  callReceiver,
  crashPointAfterReceiver,
  eachSetAtOnce,
  lacksCube,
  sourceEndpoints,
} from '../receivers.ts';

/** How one emptied source set's sealing ended: a hand-off under way, or the set unavailable. */
interface SetSealing {
  pending?: string;
  unavailable?: PhaseBlocked;
}

/**
 * A source left without any partition of the cube seals and hands off, then drops it. The seal
 * waits briefly for the hand-off; the sets are taken at once, the replicas of a set in order, and
 * a set's pass ends at its first replica whose hand-off is still pending, re-checked on the next
 * reconcile.
 */
export async function sealing(ctx: ReassignContext, journal: ReassignJournal): Promise<PhaseRun> {
  // A placement has no source, and a failover's sources are lost: nothing to wait for.
  if (journalKind(journal) === 'move') {
    const waiting = waitForNotReadyReplicas(ctx, journal, 'all');
    if (waiting) return waiting;
  }
  const assignment = finalAssignment(ctx.object, journal);
  // A source set with no ready receiver blocks Done, after the other sources are sealed. A
  // failover's are fenced: convergence releases them when back, and their committed data stays.
  // So are sources lost in Starting (fenceLostSets), and one lost since: all it had of the
  // cube was released, and committed before the targets started (awaitReleasedCommit), unless
  // they started without (startedUncommitted). The sets at once, the replicas of a set in turn.
  const emptied = [...(journal.failover ? [] : liveSources(journal).keys())].filter(
    (rs) => (assignment[rs] ?? []).length === 0,
  );
  const outcomes = await eachSetAtOnce(emptied, async (rs): Promise<SetSealing> => {
    let endpoints: ReceiverEndpoint[];
    try {
      endpoints = sourceEndpoints(ctx, journal, rs);
    } catch (error) {
      if (!(error instanceof PhaseBlocked)) throw error;
      if (ctx.lostReplicaSets?.has(rs) && !journal.startedUncommitted) return {};
      return { unavailable: error };
    }
    for (const endpoint of endpoints) {
      let outcome: SealAndDropOutcome;
      try {
        outcome = await sealAndDrop(
          {
            seal: (cube, waitMs, signal) =>
              callReceiver(ctx, endpoint, 'seal', 'SealFailed', (c) =>
                c.seal(cube, waitMs, signal),
              ),
            unassign: (cube, force, signal) =>
              callReceiver(ctx, endpoint, 'unassign', 'UnassignFailed', (c) =>
                c.unassign(cube, force, signal),
              ),
          },
          ctx.cube,
          {
            sealPollMs: ctx.sealPollMs,
            signal: ctx.signal,
            onHandedOff: () => crashPointAfterReceiver('Sealing'),
          },
        );
      } catch (error) {
        if (lacksCube(error)) continue; // unassigned already
        throw error;
      }
      if (outcome === 'handOffPending') {
        const message = handOffPending(endpoint, ctx.cube);
        if (inPhaseMs(ctx, journal) > ctx.handOffTimeoutMs) {
          throw new PhaseBlocked('HandOffPending', message);
        }
        return { pending: message };
      }
      crashPointAfterReceiver('Sealing');
    }
    return {};
  });
  const pending = outcomes.find((o) => o.pending)?.pending;
  if (pending) return phaseUnderWay(pending, requeueDelayMs.handOffPending);
  const unavailable = outcomes.find((o) => o.unavailable)?.unavailable;
  if (unavailable) throw unavailable;
  return phaseDone({}, completionStatus(ctx.object, journal));
}
