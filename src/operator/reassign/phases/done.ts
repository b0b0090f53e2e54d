// Done: the journal is cleared, with the final assignment when the step that ends it writes that
// too, and the move's Event is recorded.
import type {
  CubeAssignment,
  CubeAssignmentStatusPatch,
  ReassignJournal,
} from '../../../api/cube-assignment.ts';
import { cubeKey, recordEvent, type ReassignContext } from '../context.ts';
import { journalKind } from '../journal.ts';
import { offsetsReset } from '../../offset-reset/messages.ts';
import { failoverCompleted, reassignCompleted } from '../messages.ts';
import { requeueDelayMs, type StepOutcome } from '../outcome.ts';

/** The journal cleared (with `status`, the assignment and epochs when not written before). */
export async function completeJournal(
  ctx: ReassignContext,
  journal: ReassignJournal,
  status: CubeAssignmentStatusPatch,
): Promise<StepOutcome> {
  const patch: CubeAssignmentStatusPatch = { ...status, reassign: null };
  const object =
    ctx.holdPlacementCompletion && journalKind(journal) === 'placement'
      ? ctx.holdPlacementCompletion(patch)
      : await ctx.persist(patch);
  ctx.entries.forget(cubeKey(ctx));
  recordEvent(
    ctx,
    journal.reset
      ? resetDone(object, journal)
      : journal.failover
        ? failoverCompleted(journal)
        : reassignCompleted(journal),
  );
  return { kind: 'completed', object, journal, requeueAfterMs: requeueDelayMs.ended };
}

/**
 * A reset's Event, from the record its completion wrote (status.resets): `object` as that write
 * left it (the completion writes the record in the same write that ends the journal).
 */
function resetDone(object: CubeAssignment, journal: ReassignJournal) {
  const { id, to } = journal.reset!;
  const record = object.status?.resets?.find((r) => r.id === id);
  return offsetsReset(id, to, record?.partitions ?? []);
}
