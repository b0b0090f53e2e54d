// Starting's third sub-step: a source set with replicas that are not Ready is fenced from the stop
// offsets on before any target starts, so that those replicas' reading past them never counts.
import type { ReassignJournal } from '../../../api/cube-assignment.ts';
import { recordEvent, type ReassignContext } from '../context.ts';
import { sourcesStopFenced, stopFenced } from '../messages.ts';
import { byTarget, liveSources, stopsOf } from '../moves.ts';
import { phaseUnderWay, requeueDelayMs, type PhaseRun } from '../outcome.ts';
import { fenceSets, restartsPastCommitted } from './fence-loop.ts';

/**
 * The stop fence, once the sources have released and before any target starts: a source set with
 * replicas that are not Ready missed the release with them, and such a replica may come back
 * consuming its partitions under the old epoch past the stop offsets, sealing and committing
 * windows before convergence reaches it (that excess and the new owner's data would both be
 * committed). So the set is fenced in deep storage from the stop offsets on (hand-off-commit.ts,
 * fenceReplicaSet with `from`), through a receiver of a target set, and what it had committed past
 * them already (before the fence) is where the targets start, or what they read over, as in a
 * failover. Written to the journal before the targets start; undefined when nothing is to fence
 * or the journal says it is done.
 */
export async function stopFence(
  ctx: ReassignContext,
  journal: ReassignJournal,
): Promise<PhaseRun | undefined> {
  if (journal.failover || journal.stopFence) return undefined;
  const fenced = [...liveSources(journal)].filter(
    ([rs]) => (ctx.notReady?.get(rs) ?? []).length > 0,
  );
  if (fenced.length === 0) return undefined;
  const epochs = ctx.object.status?.epochs ?? {};
  const committed = await fenceSets(
    ctx,
    [...byTarget(journal).keys()],
    fenced.map(([rs, partitions]) => ({
      replicaSet: rs,
      epochs: Object.fromEntries(partitions.map((p) => [String(p), epochs[String(p)] ?? 0])),
      from: stopsOf(journal, partitions),
    })),
    { id: `${journal.id}-stop`, why: 'from the stop offsets' },
  );
  const moved = fenced.flatMap(([, partitions]) => partitions);
  const stops = stopsOf(journal, moved);
  const { starts, above } = restartsPastCommitted(
    moved.map((partition) => ({ partition })),
    (m) => BigInt(stops[String(m.partition)]!),
    committed,
  );
  const raised = Object.fromEntries(Object.entries(starts).filter(([p, o]) => o !== stops[p]));
  for (const [rs, partitions] of fenced) {
    const fencedEpochs = [...new Set(partitions.map((p) => epochs[String(p)] ?? 0))];
    const raisedOfSet = Object.fromEntries(
      Object.entries(raised).filter(([p]) => partitions.includes(Number(p))),
    );
    recordEvent(
      ctx,
      stopFenced(
        journal,
        rs,
        ctx.notReady?.get(rs) ?? [],
        partitions,
        stopsOf(journal, partitions),
        fencedEpochs,
        raisedOfSet,
      ),
    );
  }
  return phaseUnderWay(sourcesStopFenced(fenced.map(([rs]) => rs)), requeueDelayMs.advanced, {
    ...(Object.keys(raised).length > 0
      ? { stopOffsets: { ...journal.stopOffsets, ...raised } }
      : {}),
    stopFence: {
      replicaSets: fenced.map(([rs]) => rs),
      ...(Object.keys(above).length > 0 ? { committedAbove: above } : {}),
    },
  });
}
