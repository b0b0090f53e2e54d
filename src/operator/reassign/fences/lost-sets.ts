// Starting's first sub-step: a replica set of the move lost before the targets started is fenced
// as a failover fences, and the journal says where its partitions go instead.
import type { ReassignJournal } from '../../../api/cube-assignment.ts';
import { recordEvent, type ReassignContext } from '../context.ts';
import { lostSetsFenced, lostSetsHaveNoTaker, replicaSetLostInMove } from '../messages.ts';
import { byTarget, bySource, stopsOf } from '../moves.ts';
import { phaseUnderWay, requeueDelayMs, type PhaseRun } from '../outcome.ts';
import { epochStartOf } from '../start-offsets.ts';
import { fenceSets, restartsPastCommitted } from './fence-loop.ts';

/**
 * A set of the move with no ready receiver for spec.failoverAfter (lost) while the targets have
 * not started on the sources' data's end (the commit they wait for), fenced in deep storage as a
 * failover fences (hand-off-commit.ts, fenceReplicaSet):
 * - as a source: every offset of its epochs of the moved partitions that it did not commit; those
 *   partitions restart from the end of what it committed (failoverStart, from where its epoch
 *   began), with what it committed past that read over. Its data below the stop offsets that was
 *   not committed is read again by the targets: nothing of it is lost, nothing it committed is
 *   counted twice.
 * - as a target: whatever it may have read of the partitions moved to it under their next epoch,
 *   from the stop offsets on; those moves go instead to their source when it is live (it takes
 *   them back under the next epoch), else to the first live set of spec.replicaSets, from past
 *   what the lost set committed.
 * Not once the targets may have started without the sources' commit (startedUncommitted): what
 * the set had not committed below the stop offsets could only come from it, so the partitions
 * wait for it. Written to the journal before anything else of the phase runs; undefined when no
 * set of the move is lost.
 */
export async function fenceLostSets(
  ctx: ReassignContext,
  journal: ReassignJournal,
): Promise<PhaseRun | undefined> {
  if (journal.failover || journal.lostSets || journal.startedUncommitted) return undefined;
  const isLost = (rs: string): boolean =>
    ctx.lostReplicaSets?.has(rs) === true && (ctx.receivers.get(rs) ?? []).length === 0;
  const sources = bySource(journal);
  const targets = byTarget(journal);
  const lost = [...new Set([...sources.keys(), ...targets.keys()])].filter(isLost).sort();
  if (lost.length === 0) return undefined;
  const live = (ctx.object.spec.replicaSets ?? []).filter(
    (rs) => !isLost(rs) && (ctx.receivers.get(rs) ?? []).length > 0,
  );
  const moves = journal.moves.map((m) => {
    if (!lost.includes(m.to)) return m;
    const to = m.from !== undefined && live.includes(m.from) ? m.from : live[0];
    return to === undefined ? m : { ...m, to };
  });
  const stranded = moves.filter((m) => lost.includes(m.to)).map((m) => m.partition);
  if (stranded.length > 0) throw lostSetsHaveNoTaker(lost, stranded);
  const epochs = ctx.object.status?.epochs ?? {};
  const epochStart = await epochStartOf(
    ctx,
    lost.flatMap((rs) => sources.get(rs) ?? []),
  );
  const stops = stopsOf(
    journal,
    journal.moves.map((m) => m.partition),
  );
  const committed = await fenceSets(
    ctx,
    live,
    lost.map((rs) => {
      const movedTo = targets.get(rs) ?? [];
      return {
        replicaSet: rs,
        epochs: Object.fromEntries([
          ...(sources.get(rs) ?? []).map((p) => [String(p), epochs[String(p)] ?? 0] as const),
          ...movedTo.map((p) => [String(p), (epochs[String(p)] ?? 0) + 1] as const),
        ]),
        from: Object.fromEntries(movedTo.map((p) => [String(p), stops[String(p)]!])),
      };
    }),
    { id: `${journal.id}-lost`, why: 'lost in Starting' },
  );
  const { starts, above } = restartsPastCommitted(
    journal.moves.filter(
      (m) => lost.includes(m.to) || (m.from !== undefined && lost.includes(m.from)),
    ),
    (m) =>
      m.from !== undefined && lost.includes(m.from)
        ? epochStart(m.partition)
        : BigInt(stops[String(m.partition)]!),
    committed,
  );
  const restartsOf = (ps: number[]): Record<string, string> =>
    Object.fromEntries(ps.map((p) => [String(p), starts[String(p)]!]));
  for (const rs of lost) {
    const from = sources.get(rs) ?? [];
    const to = targets.get(rs) ?? [];
    recordEvent(
      ctx,
      replicaSetLostInMove(
        journal,
        ctx.object.spec.failoverAfter,
        rs,
        from.length > 0
          ? { partitions: from, restarts: restartsOf(from), stops: stopsOf(journal, from) }
          : undefined,
        to.length > 0
          ? {
              partitions: to,
              newTargets: to.map((p) => moves.find((m) => m.partition === p)!.to),
              restarts: restartsOf(to),
            }
          : undefined,
      ),
    );
  }
  return phaseUnderWay(lostSetsFenced(lost), requeueDelayMs.advanced, {
    moves,
    stopOffsets: { ...journal.stopOffsets, ...starts },
    lostSets: {
      replicaSets: lost,
      ...(Object.keys(above).length > 0 ? { committedAbove: above } : {}),
    },
  });
}
