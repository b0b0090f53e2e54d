// The fence loop the three fences share (a failover's, a lost set's, the stop fence): fence replica
// sets in deep storage through a receiver of another set, read what they had committed, and work
// out where the new owners restart.
import type { FenceRequest, FenceResponse } from '../../../protocol/admin-api.ts';
import { type OffsetRange, addRange } from '../../../receiver/offset-ranges.ts';
import type { ReceiverEndpoint } from '../../discovery.ts';
import type { ReassignContext } from '../context.ts';
import { noFencer } from '../messages.ts';
import { PhaseBlocked } from '../outcome.ts';
import { callReceiver } from '../receivers.ts';

type Range = { from: bigint; to: bigint };

/** One set to fence: its epochs by partition, and from which offsets on where given. */
export interface FencedSet {
  replicaSet: string;
  epochs: Record<string, number>;
  from?: Record<string, string>;
}

/** A fence written through the first of `fencers` that answers; the last failure if none does. */
async function fenceThrough(
  ctx: ReassignContext,
  fencers: ReceiverEndpoint[],
  request: FenceRequest,
): Promise<FenceResponse> {
  let failure: unknown;
  for (const endpoint of fencers) {
    try {
      return await callReceiver(ctx, endpoint, 'fence', 'FenceFailed', (c) =>
        c.fence(ctx.cube, request, ctx.signal),
      );
    } catch (error) {
      if (!(error instanceof PhaseBlocked)) throw error;
      failure = error;
    }
  }
  throw failure;
}

/** The ranges a fence answered committed of partition `p`. */
const committedOf = (answer: FenceResponse, p: number): Range[] =>
  (answer.committed[String(p)] ?? []).map(([from, to]) => ({ from: BigInt(from), to: BigInt(to) }));

/**
 * Fences each of `sets` in deep storage (hand-off-commit.ts, fenceReplicaSet) through a ready
 * receiver of `through` (replica sets, never the one fenced: the operator has no access of its
 * own), and answers what the fenced sets had committed of each partition, merged. `fence.id`
 * names the fence record; `fence.why` says in a blocked message what the fence was for.
 */
export async function fenceSets(
  ctx: ReassignContext,
  through: string[],
  sets: FencedSet[],
  fence: { id: string; why: string },
): Promise<Map<number, Range[]>> {
  const fencers = through.flatMap((rs) => ctx.receivers.get(rs) ?? []);
  if (fencers.length === 0)
    throw noFencer(
      through,
      sets.map((s) => s.replicaSet),
      fence.why,
    );
  const committed = new Map<number, OffsetRange[]>();
  for (const set of sets) {
    const request: FenceRequest = {
      replicaSet: set.replicaSet,
      id: fence.id,
      partitions: set.epochs,
      ...(set.from && Object.keys(set.from).length > 0 ? { from: set.from } : {}),
      ...(ctx.object.metadata?.uid ? { cubeUid: ctx.object.metadata.uid } : {}),
    };
    const answer = await fenceThrough(
      ctx,
      fencers.filter((e) => e.replicaSet !== set.replicaSet),
      request,
    );
    for (const p of Object.keys(set.epochs).map(Number)) {
      const acc = committed.get(p) ?? [];
      for (const r of committedOf(answer, p)) addRange(acc, r.from, r.to);
      committed.set(p, acc);
    }
  }
  return committed;
}

/**
 * Where a fenced partition restarts: its first offset from `epochStart` on that the fenced set
 * did not commit, and the committed ranges past it, to be read over. `committed`: merged, sorted.
 */
export function failoverStart(
  epochStart: bigint,
  committed: Range[],
): { restart: bigint; readOver: Range[] } {
  let restart = epochStart;
  for (const r of committed) {
    if (r.to <= restart) continue;
    if (r.from > restart) break;
    restart = r.to;
  }
  return { restart, readOver: committed.filter((r) => r.from > restart) };
}

/**
 * Where each of `moves`' targets start — the first offset from `startOf` on that the fenced sets
 * did not commit — and the committed ranges past that, to read over (failoverStart), as the
 * journal writes them.
 */
export function restartsPastCommitted<M extends { partition: number }>(
  moves: M[],
  startOf: (move: M) => bigint,
  committed: ReadonlyMap<number, Range[]>,
): { starts: Record<string, string>; above: Record<string, { from: string; to: string }[]> } {
  const starts: Record<string, string> = {};
  const above: Record<string, { from: string; to: string }[]> = {};
  for (const m of moves) {
    const p = String(m.partition);
    const { restart, readOver } = failoverStart(startOf(m), committed.get(m.partition) ?? []);
    starts[p] = restart.toString();
    if (readOver.length > 0)
      above[p] = readOver.map((r) => ({ from: r.from.toString(), to: r.to.toString() }));
  }
  return { starts, above };
}
