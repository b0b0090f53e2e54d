// Starting's last sub-step: every replica of each target takes its partitions from the stop
// offsets under the next epoch.
import type { ReassignJournal } from '../../../../api/cube-assignment.ts';
import type { ReassignContext } from '../../context.ts';
import { targetBlocked } from '../../messages.ts';
import { byTarget, startOf } from '../../moves.ts';
import { PhaseBlocked, type PhaseRun } from '../../outcome.ts';
import {
  assignRequest,
  callReceiver,
  crashPointAfterReceiver,
  eachSetAtOnce,
  targetEndpoints,
} from '../../receivers.ts';

/**
 * Starts every target at the journal's stop offsets (a reset's targets: startOf) under the next
 * epoch (the sets at once), with the sources'
 * watermarks, skipping what a fenced set committed past the start (committedElsewhere).
 */
export async function startTargets(
  ctx: ReassignContext,
  journal: ReassignJournal,
): Promise<PhaseRun | undefined> {
  const epochs = ctx.object.status?.epochs ?? {};
  const committedAbove = {
    ...journal.stopFence?.committedAbove,
    ...journal.lostSets?.committedAbove,
    ...journal.failover?.committedAbove,
  };
  await eachSetAtOnce(byTarget(journal), async ([rs, partitions]) => {
    const starts = partitions.map((p) => ({
      partition: p,
      position: startOf(journal, p),
      epoch: (epochs[String(p)] ?? 0) + 1,
      watermark: journal.watermarks?.[String(p)] ?? null,
      ...(committedAbove[String(p)]?.length
        ? {
            committedElsewhere: committedAbove[String(p)]!.map(
              (r) => [r.from, r.to] as [string, string],
            ),
          }
        : {}),
    }));
    try {
      // The replicas of a set at once too: an assign restarts the receiver's consumer (about a
      // quarter of a second each for 128 partitions under bench:reassign), and a replica started
      // before its sibling gains nothing, as the move ends only when every one has started.
      await eachSetAtOnce(targetEndpoints(ctx, rs), async (endpoint) => {
        await callReceiver(ctx, endpoint, 'assign', 'StartFailed', (c) =>
          c.assign(ctx.cube, assignRequest(ctx.object, rs, starts), ctx.signal),
        );
        crashPointAfterReceiver('Starting', 'target');
      });
    } catch (error) {
      // The sources have let go: say which partitions wait, not only which call failed.
      if (!(error instanceof PhaseBlocked)) throw error;
      const sources = [
        ...new Set(journal.moves.filter((m) => m.to === rs).flatMap((m) => m.from ?? [])),
      ];
      throw targetBlocked(error, rs, partitions, sources);
    }
  });
  return undefined;
}
