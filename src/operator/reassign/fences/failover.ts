// A failover's fence: the lost replica sets are fenced in deep storage under their current epochs,
// and each of their partitions restarts at the end of what they committed.
import type { CubeAssignment, ReassignJournal } from '../../../api/cube-assignment.ts';
import { recordEvent, type ReassignContext } from '../context.ts';
import { failoverStarted } from '../messages.ts';
import { byTarget, bySource } from '../moves.ts';
import { crashPointAfterReceiver } from '../receivers.ts';
import { epochStartOf } from '../start-offsets.ts';
import { fenceSets, restartsPastCommitted } from './fence-loop.ts';

type CommittedAbove = Record<string, { from: string; to: string }[]>;

/**
 * The lost sets are fenced through a receiver of a target set, which then reads what each had
 * committed of its partitions. Each partition restarts at its first offset not committed since its
 * epoch began, and the targets read over what the lost set committed past that (late events of a
 * window it committed): nothing is counted twice, and of its uncommitted data nothing is lost.
 * Returns the restarts (the journal's stop offsets) and the ranges to read over.
 */
export async function fenceFailedOverSets(
  ctx: ReassignContext,
  journal: ReassignJournal,
): Promise<{ starts: Record<string, string>; above: CommittedAbove }> {
  const epochs = ctx.object.status?.epochs ?? {};
  const startOf = await epochStartOf(
    ctx,
    journal.moves.map((m) => m.partition),
  );
  const committed = await fenceSets(
    ctx,
    [...byTarget(journal).keys()],
    [...bySource(journal)].map(([rs, partitions]) => ({
      replicaSet: rs,
      epochs: Object.fromEntries(partitions.map((p) => [String(p), epochs[String(p)] ?? 0])),
    })),
    { id: journal.id, why: 'for a failover' },
  );
  crashPointAfterReceiver('Fencing');
  const { starts, above } = restartsPastCommitted(
    journal.moves,
    (m) => startOf(m.partition),
    committed,
  );
  recordEvent(
    ctx,
    failoverStarted(
      journal,
      ctx.object.spec.failoverAfter,
      starts,
      offsetsReread(ctx.object, journal, starts, above),
      above,
    ),
  );
  return { starts, above };
}

/**
 * How many offsets the targets read again: from each restart to the last position observed of the
 * lost set, less what they read over. `known` is false where no position was observed.
 */
function offsetsReread(
  object: CubeAssignment,
  journal: ReassignJournal,
  starts: Record<string, string>,
  above: CommittedAbove,
): { offsets: bigint; known: boolean } {
  const observed = new Map((object.status?.partitions ?? []).map((p) => [p.partition, p]));
  let offsets = 0n;
  let known = true;
  for (const m of journal.moves) {
    const last = observed.get(m.partition)?.position;
    if (last === undefined) {
      known = false;
      continue;
    }
    let n = BigInt(last) - BigInt(starts[String(m.partition)] ?? last);
    for (const r of above[String(m.partition)] ?? [])
      if (BigInt(r.to) <= BigInt(last)) n -= BigInt(r.to) - BigInt(r.from);
    if (n > 0n) offsets += n;
  }
  return { offsets, known };
}
