// Starting's fourth sub-step: the targets wait until the sources' data of the moved partitions is
// handed off and committed.
import { setTimeout as sleep } from 'node:timers/promises';
import type { ReassignJournal } from '../../../../api/cube-assignment.ts';
import type { CubeSummary } from '../../../../protocol/admin-api.ts';
import { covers } from '../../../../receiver/hand-off-commit.ts';
import { rangesFromJson } from '../../../../receiver/offset-ranges.ts';
import { overDeadline, recordEvent, type ReassignContext } from '../../context.ts';
import {
  releasedDataUncommitted,
  releasedDataUncommittedYet,
  uncommittedOn,
} from '../../messages.ts';
import { liveSources, restartedByReset } from '../../moves.ts';
import { phaseUnderWay, requeueDelayMs, type PhaseRun } from '../../outcome.ts';
import { callReceiver, eachSetAtOnce, lacksCube } from '../../receivers.ts';

/**
 * Of `partitions`, those a receiver keeps offsets of that are not handed off and committed, by its
 * coverage (a partition it reports none of: none).
 */
export function keptUncommitted(
  coverage: CubeSummary['coverage'],
  partitions: Iterable<number>,
): number[] {
  const out: number[] = [];
  for (const p of partitions) {
    const c = coverage?.[String(p)];
    if (!c) continue;
    const kept = new Map([[p, rangesFromJson(c.kept)]]);
    if (!covers(new Map([[p, rangesFromJson(c.handedOff)]]), kept)) out.push(p);
  }
  return out;
}

/**
 * Before the targets start, the sources' data of the moved partitions is committed: every ready
 * replica of each source reports the offsets it keeps of them handed off and committed (its
 * coverage; the release sealed the windows holding them and handed them off at once). Until the
 * targets start, a source set lost meanwhile can still be failed over exactly (fenceLostSets:
 * its partitions restart where its committed data ends); once they consume from the stop offsets,
 * what it had not committed below them could only wait for it. Waits up to the phase timeout;
 * past it (deep storage slow or refusing), the targets start all the same, the journal and a
 * Warning say so, and such a set is not failed over while it keeps that data (FailoverBlocked).
 */
export async function awaitReleasedCommit(
  ctx: ReassignContext,
  journal: ReassignJournal,
): Promise<PhaseRun | undefined> {
  if (journal.failover || journal.startedUncommitted) return undefined;
  // Re-read within the pass for a while: the commit follows the release by tens of milliseconds,
  // and a pass that ends comes back through the releases.
  let pending = await uncommittedReleases(ctx, journal);
  const until = performance.now() + (ctx.commitWaitMs ?? 0);
  while (pending.length > 0 && performance.now() < until) {
    await sleep(commitRecheckMs, undefined, { signal: ctx.signal });
    pending = await uncommittedReleases(ctx, journal);
  }
  if (pending.length === 0) return undefined;
  const message = releasedDataUncommittedYet(pending);
  if (!overDeadline(ctx, journal)) return phaseUnderWay(message, requeueDelayMs.commitPending);
  recordEvent(ctx, releasedDataUncommitted(journal, message, ctx.phaseTimeoutMs));
  return phaseUnderWay(message, requeueDelayMs.advanced, { startedUncommitted: true });
}

/** How often a pass re-reads the sources' coverage while it waits for their commit. */
const commitRecheckMs = 20;

/** Per source replica that keeps released data not committed yet, what it keeps. */
async function uncommittedReleases(
  ctx: ReassignContext,
  journal: ReassignJournal,
): Promise<string[]> {
  const bySet = await eachSetAtOnce(liveSources(journal), async ([rs, partitions]) => {
    const pending: string[] = [];
    for (const endpoint of ctx.receivers.get(rs) ?? []) {
      let status: CubeSummary;
      try {
        status = await callReceiver(ctx, endpoint, 'status', 'StartFailed', (c) =>
          c.cubeSummary(ctx.cube, ctx.signal),
        );
      } catch (error) {
        if (lacksCube(error)) continue; // holds nothing of the cube
        throw error;
      }
      // A replica an offset reset restarted already passed this wait before it was restarted:
      // what it keeps of those partitions now is the new epoch's.
      const restarted = restartedByReset(
        journal,
        ctx.object.status?.epochs,
        status.partitions,
        partitions,
      );
      const waiting = keptUncommitted(
        status.coverage,
        partitions.filter((p) => !restarted.includes(p)),
      );
      if (waiting.length > 0) pending.push(uncommittedOn(endpoint, waiting));
    }
    return pending;
  });
  return bySet.flat();
}
