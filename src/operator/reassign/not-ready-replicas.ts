// Pausing and Sealing wait, up to the phase timeout, for replicas of the move's sets that are not
// Ready, so that each replica is brought to the move's end exactly.
import type { ReassignJournal } from '../../api/cube-assignment.ts';
import { cubeKey, inPhaseMs, recordEvent, type ReassignContext } from './context.ts';
import { replicaMissedMove, waitsForNotReady } from './messages.ts';
import { phaseUnderWay, requeueDelayMs, type PhaseRun } from './outcome.ts';

/**
 * A replica that misses a move is brought to its end exactly only while the move can still say
 * where it was: Pausing waits for the sources' replicas that are not Ready (one paused late counts
 * in the stop offsets; one left out comes back consuming, and runs past them before it is reached,
 * its excess then fenced with the whole segments holding it), and Sealing for the targets' and
 * sources' (brought there with the journal's stop offsets before it is cleared). Each waits up to
 * the phase timeout; past it, the move goes on without them and a Warning says so.
 */
export function waitForNotReadyReplicas(
  ctx: ReassignContext,
  journal: ReassignJournal,
  sets: 'sources' | 'all',
): PhaseRun | undefined {
  // A set lost (no ready receiver for spec.failoverAfter) is not waited for: it is failed over.
  const named = new Set(
    journal.moves
      .flatMap((m) => [
        ...(m.from === undefined ? [] : [m.from]),
        ...(sets === 'all' ? [m.to] : []),
      ])
      .filter((rs) => !ctx.lostReplicaSets?.has(rs)),
  );
  const notReady = [...named].flatMap((rs) => ctx.notReady?.get(rs) ?? []);
  if (notReady.length === 0) return undefined;
  if (inPhaseMs(ctx, journal) <= ctx.phaseTimeoutMs) {
    return phaseUnderWay(
      waitsForNotReady(journal.phase, notReady, ctx.phaseTimeoutMs),
      requeueDelayMs.replicaNotReady,
    );
  }
  if (ctx.entries.isFirstReport(cubeKey(ctx), journal, `not Ready in ${journal.phase}`))
    recordEvent(ctx, replicaMissedMove(journal, notReady, ctx.phaseTimeoutMs));
  return undefined;
}
