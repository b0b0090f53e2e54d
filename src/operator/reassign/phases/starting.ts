// Starting: from here on the move only rolls forward. Its sub-steps run in this order on every
// pass; each either lets the next run or ends the pass (a wait, or a journal write first).
import type { ReassignJournal } from '../../../api/cube-assignment.ts';
import type { ReassignContext } from '../context.ts';
import { fenceLostSets } from '../fences/lost-sets.ts';
import { stopFence } from '../fences/stop-fence.ts';
import { phaseDone, type PhaseRun } from '../outcome.ts';
import { awaitReleasedCommit } from './starting/released-commit.ts';
import { releaseSources } from './starting/release-sources.ts';
import { startTargets } from './starting/start-targets.ts';

/** A sub-step of Starting: undefined lets the next one run. */
type StartingStep = (
  ctx: ReassignContext,
  journal: ReassignJournal,
) => Promise<PhaseRun | undefined>;

/**
 * 1. fenceLostSets: a set of the move lost before the targets start is fenced; its partitions
 *    restart from what it committed, on a live set (journal.lostSets).
 * 2. releaseSources: every live source releases at the stop offsets.
 * 3. stopFence: a source set with replicas that are not Ready is fenced from the stop offsets
 *    (journal.stopFence).
 * 4. awaitReleasedCommit: the sources' released data is committed, or the phase timeout passed
 *    (journal.startedUncommitted).
 * 5. startTargets: the targets take the partitions under the next epoch.
 * Steps 1, 3 and 4 (past the timeout) write their flag to the journal and end the pass; the flag
 * skips them on the next.
 */
export const startingSteps: readonly StartingStep[] = [
  fenceLostSets,
  releaseSources,
  stopFence,
  awaitReleasedCommit,
  startTargets,
];

export async function starting(ctx: ReassignContext, journal: ReassignJournal): Promise<PhaseRun> {
  for (const step of startingSteps) {
    const run = await step(ctx, journal);
    if (run) return run;
  }
  return phaseDone();
}
