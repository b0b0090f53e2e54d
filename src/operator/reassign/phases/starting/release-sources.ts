// Starting's second sub-step: every source releases the moving partitions at the stop offsets,
// before any target starts.
import type { ReassignJournal } from '../../../../api/cube-assignment.ts';
import type { ReceiverEndpoint } from '../../../discovery.ts';
import { recordEvent, type ReassignContext } from '../../context.ts';
import { excessFenced, missedDraining, replicaRepairedDrain } from '../../messages.ts';
import { liveSources, restartedByReset, stopsOf } from '../../moves.ts';
import { phaseUnderWay, requeueDelayMs, type PhaseRun } from '../../outcome.ts';
import {
  answeredWith,
  callReceiver,
  crashPointAfterReceiver,
  eachSetAtOnce,
  lacksCube,
  reportCubeMissing,
  sourceEndpoints,
} from '../../receivers.ts';

type Released = { partition: number; position: string; stopOffset: string | null }[];

/** Released partitions whose position is past their stop offset: their excess was fenced. */
export function fencedPartitions(
  released: Released,
): { partition: number; position: string; stopOffset: string }[] {
  return released.flatMap((p) =>
    p.stopOffset !== null && BigInt(p.position) > BigInt(p.stopOffset)
      ? [{ partition: p.partition, position: p.position, stopOffset: p.stopOffset }]
      : [],
  );
}

/**
 * Partitions released past their stop offset (a replica that missed the pause and ran on): the
 * receiver fenced the segments holding the excess. A Warning Event and a count say so.
 */
function reportExcessFenced(
  ctx: ReassignContext,
  endpoint: ReceiverEndpoint,
  released: Released,
): void {
  const fenced = fencedPartitions(released);
  if (fenced.length === 0) return;
  ctx.onReplicaRepaired(endpoint, 'fence');
  recordEvent(ctx, excessFenced(endpoint, fenced));
}

/**
 * Releases the moving partitions on one source replica at the stop offsets: the next owner starts
 * there, so a partition past its stop has the excess fenced by the receiver. One short of its
 * stop (a replica that missed Draining) is refused (409): it drains to its stop first, and is
 * released on a later pass. Returns what is still under way, or undefined once released.
 */
async function releaseAtStops(
  ctx: ReassignContext,
  endpoint: ReceiverEndpoint,
  partitions: number[],
  stops: Record<string, string>,
): Promise<string | undefined> {
  try {
    const answer = await callReceiver(ctx, endpoint, 'release', 'ReleaseFailed', (c) =>
      c.release(ctx.cube, partitions, ctx.signal, stops),
    );
    reportExcessFenced(ctx, endpoint, answer.partitions);
    return undefined;
  } catch (error) {
    if (!answeredWith(error, 409)) throw error;
    const held = await callReceiver(ctx, endpoint, 'status', 'ReleaseFailed', (c) =>
      c.cubeSummary(ctx.cube, ctx.signal),
    );
    const short = held.partitions.filter(
      (p) =>
        partitions.includes(p.partition) &&
        p.state !== 'released' &&
        BigInt(p.position) < BigInt(stops[String(p.partition)] ?? '0'),
    );
    if (short.length === 0) throw error;
    const drain = Object.fromEntries(
      short.map((p) => [String(p.partition), stops[String(p.partition)]!]),
    );
    const answer = await callReceiver(ctx, endpoint, 'drain', 'DrainFailed', (c) =>
      c.drain(ctx.cube, { stopOffsets: drain, timeoutMs: ctx.drainPollMs }, ctx.signal),
    );
    if (!answer.done) {
      return missedDraining(
        endpoint,
        short.map((p) => p.partition),
      );
    }
    ctx.onReplicaRepaired(endpoint, 'drain');
    recordEvent(ctx, replicaRepairedDrain(endpoint, drain));
    const released = await callReceiver(ctx, endpoint, 'release', 'ReleaseFailed', (c) =>
      c.release(ctx.cube, partitions, ctx.signal, stops),
    );
    reportExcessFenced(ctx, endpoint, released.partitions);
    return undefined;
  }
}

/**
 * Every replica of every live source releases (the sets at once, the replicas of a set in turn),
 * so that no target starts while a source consumes:
 * a source set with no ready receiver blocks the phase here (its partitions are drained and
 * stopped, not lost) until it is back or lost. A failover's sources, and sources lost in
 * Starting, are fenced instead: convergence releases them when they are back.
 */
export async function releaseSources(
  ctx: ReassignContext,
  journal: ReassignJournal,
): Promise<PhaseRun | undefined> {
  const pendingBySet = await eachSetAtOnce(
    journal.failover ? [] : liveSources(journal),
    async ([rs, partitions]) => {
      for (const endpoint of sourceEndpoints(ctx, journal, rs)) {
        try {
          const releasing = await notRestarted(ctx, journal, endpoint, partitions);
          if (releasing.length === 0) continue;
          const pending = await releaseAtStops(
            ctx,
            endpoint,
            releasing,
            stopsOf(journal, releasing),
          );
          if (pending) return pending;
          crashPointAfterReceiver('Starting');
        } catch (error) {
          // A replica without the cube (404) holds nothing to release.
          if (!lacksCube(error)) throw error;
          reportCubeMissing(ctx, journal, endpoint);
        }
      }
      return undefined;
    },
  );
  const pending = pendingBySet.find((p) => p !== undefined);
  return pending ? phaseUnderWay(pending, requeueDelayMs.drainPending) : undefined;
}

/**
 * `partitions` but those an offset reset restarted on the replica already (restartedByReset): a
 * reset's source is its target, and these hold the new epoch now.
 */
async function notRestarted(
  ctx: ReassignContext,
  journal: ReassignJournal,
  endpoint: ReceiverEndpoint,
  partitions: number[],
): Promise<number[]> {
  if (!journal.reset) return partitions;
  const held = await callReceiver(ctx, endpoint, 'status', 'ReleaseFailed', (c) =>
    c.cubeSummary(ctx.cube, ctx.signal),
  );
  const restarted = restartedByReset(
    journal,
    ctx.object.status?.epochs,
    held.partitions,
    partitions,
  );
  return partitions.filter((p) => !restarted.includes(p));
}
