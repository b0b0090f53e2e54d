// Draining: every replica of each source consumes to the stop offsets and stops the partitions.
import type { ReassignJournal } from '../../../api/cube-assignment.ts';
import type { ReceiverEndpoint } from '../../discovery.ts';
import { inPhaseMs, overDeadline, recordEvent, type ReassignContext } from '../context.ts';
import {
  drainBehind,
  drainIncomplete,
  drainUnderWay,
  ranPastStops,
  stopOffsetsRaised,
  stopsRaisedUnderWay,
} from '../messages.ts';
import { bySource, stopsOf } from '../moves.ts';
import {
  PhaseBlocked,
  phaseDone,
  phaseUnderWay,
  requeueDelayMs,
  type PhaseRun,
} from '../outcome.ts';
import {
  answeredWith,
  callReceiver,
  crashPointAfterReceiver,
  eachSetAtOnce,
  forEachReplicaWithCube,
} from '../receivers.ts';

/**
 * A drain refused (409): a replica that missed the pause (down, or not Ready then) may have run
 * past the stop offsets. Nothing is released before Starting, so the stops may still rise: the
 * replica is paused, and its positions past them become the new stops. Any other refusal blocks.
 */
async function raisedStops(
  ctx: ReassignContext,
  endpoint: ReceiverEndpoint,
  partitions: number[],
  stops: Record<string, string>,
  error: unknown,
): Promise<Record<string, string>> {
  if (!answeredWith(error, 409)) throw error;
  const paused = await callReceiver(ctx, endpoint, 'pause', 'PauseFailed', (c) =>
    c.pause(ctx.cube, partitions, ctx.signal),
  );
  const raised: Record<string, string> = {};
  for (const p of paused.partitions) {
    const stop = stops[String(p.partition)];
    if (stop !== undefined && BigInt(p.position) > BigInt(stop))
      raised[String(p.partition)] = p.position;
  }
  if (Object.keys(raised).length === 0) throw error;
  ctx.onReplicaRepaired(endpoint, 'raiseStops');
  return raised;
}

/**
 * Every replica of each source consumes to the stop offsets. The sets are taken at once, the
 * replicas of a set in order, and a set's pass ends at its first replica still draining: it is
 * polled again on the next reconcile. Writes the highest event-time watermark over the replicas,
 * which the targets start with.
 */
export async function draining(ctx: ReassignContext, journal: ReassignJournal): Promise<PhaseRun> {
  const watermarks = new Map<number, number>();
  const passes = await eachSetAtOnce(bySource(journal), async ([rs, partitions]) => {
    const stops = stopsOf(journal, partitions);
    let pending: string | undefined;
    let raised: Record<string, string> | undefined;
    const drained = await forEachReplicaWithCube(ctx, journal, rs, async (endpoint) => {
      let answer;
      try {
        answer = await callReceiver(ctx, endpoint, 'drain', 'DrainFailed', (c) =>
          c.drain(ctx.cube, { stopOffsets: stops, timeoutMs: ctx.drainPollMs }, ctx.signal),
        );
      } catch (error) {
        raised = await raisedStops(ctx, endpoint, partitions, stops, error);
        pending = ranPastStops(endpoint);
        return false;
      }
      if (!answer.done) {
        const behind = answer.partitions.filter((p) => p.state !== 'stopped');
        if (inPhaseMs(ctx, journal) > ctx.drainTimeoutMs || overDeadline(ctx, journal)) {
          throw drainIncomplete(endpoint, behind);
        }
        pending = drainBehind(endpoint, behind);
        return false;
      }
      crashPointAfterReceiver('Draining');
      for (const p of answer.partitions) {
        if (p.watermark !== null && (watermarks.get(p.partition) ?? -Infinity) < p.watermark) {
          watermarks.set(p.partition, p.watermark);
        }
      }
      return true;
    });
    return { rs, raised, pending, drained };
  });
  // Stops raised are written first (the first such set's, as when the sets went in turn).
  const raising = passes.find((p) => p.raised);
  if (raising?.raised) {
    recordEvent(ctx, stopOffsetsRaised(journal, raising.rs, raising.raised));
    return phaseUnderWay(raising.pending ?? stopsRaisedUnderWay, requeueDelayMs.advanced, {
      stopOffsets: { ...journal.stopOffsets, ...raising.raised },
    });
  }
  const undrained = passes.find((p) => !p.drained);
  if (undrained) {
    return phaseUnderWay(undrained.pending ?? drainUnderWay, requeueDelayMs.drainPending);
  }
  return phaseDone({
    ...(watermarks.size > 0
      ? { watermarks: Object.fromEntries([...watermarks].map(([p, w]) => [String(p), w])) }
      : {}),
    ...(journal.reset?.to === 'latest' ? { reset: await latestTargets(ctx, journal) } : {}),
  });
}

/**
 * A reset to latest restarts each partition at the end of its log once drained, as Kafka's
 * --to-latest does with its consumers stopped: what was produced while it was paused is skipped
 * too. Read here and journaled with Draining's end, so that Starting uses one answer.
 */
async function latestTargets(
  ctx: ReassignContext,
  journal: ReassignJournal,
): Promise<NonNullable<ReassignJournal['reset']>> {
  const reset = journal.reset!;
  const partitions = Object.keys(reset.targets).map(Number);
  let ends: Map<number, bigint>;
  try {
    ends = (await ctx.highWatermarks?.(partitions)) ?? new Map<number, bigint>();
  } catch (error) {
    ctx.signal.throwIfAborted();
    throw new PhaseBlocked(
      'SourceUnavailable',
      `reset ${reset.id}: cannot read the high watermarks of partitions ${partitions.join(', ')}: ${(error as Error).message}`,
    );
  }
  const targets = { ...reset.targets };
  for (const p of partitions) {
    const end = ends.get(p);
    const stop = BigInt(journal.stopOffsets?.[String(p)] ?? '0');
    // Never behind where it was drained to: latest skips, it never reads again.
    if (end !== undefined) targets[String(p)] = (end > stop ? end : stop).toString();
  }
  return { ...reset, targets };
}
