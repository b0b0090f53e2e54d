// Fencing, a failover's first phase: the lost sets are fenced and the journal says where their
// partitions restart (fences/failover.ts).
import type { ReassignJournal } from '../../../api/cube-assignment.ts';
import type { ReassignContext } from '../context.ts';
import { fenceFailedOverSets } from '../fences/failover.ts';
import { phaseDone, type PhaseRun } from '../outcome.ts';

export async function fencing(ctx: ReassignContext, journal: ReassignJournal): Promise<PhaseRun> {
  const { starts, above } = await fenceFailedOverSets(ctx, journal);
  return phaseDone({
    stopOffsets: starts,
    failover: { ...journal.failover!, committedAbove: above },
  });
}
