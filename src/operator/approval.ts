// spec.approval: manual, pure: the proposal a planned move becomes, and what the approval
// annotation asks for against it. Ids are a digest of the generation and the moves, so that any
// process planning the same moves for the same spec writes the same proposal (no flapping), and
// an approval of a plan since replaced names an id no longer proposed.
import { createHash } from 'node:crypto';
import type { Move } from '../assign/assignment.ts';
import { sortedNames } from '../assign/assignment.ts';
import {
  approveAnnotation,
  type MergePatch,
  type ObservedPartition,
  type ReassignProposal,
} from '../api/cube-assignment.ts';
import { describeMoves, mapReplacement } from './reassign/index.ts';

/** `p-<generation>-<digest>`: one id per (generation, moves), whatever order they were planned in. */
export function proposalId(generation: number, moves: readonly Move[]): string {
  const canonical = [...moves]
    .sort((a, b) => a.partition - b.partition)
    .map((m) => `${m.partition}:${m.from ?? ''}>${m.to}`)
    .join(',');
  const digest = createHash('sha256').update(`${generation}|${canonical}`).digest('hex');
  return `p-${generation}-${digest.slice(0, 10)}`;
}

/** The moves as a proposal of `generation`, with the owners' lag as status last said it. */
export function newProposal(
  generation: number,
  moves: readonly Move[],
  observed: readonly ObservedPartition[] | undefined,
  now: Date,
): ReassignProposal {
  const sorted = [...moves].sort((a, b) => a.partition - b.partition);
  const owner = (m: Move): ObservedPartition | undefined =>
    observed?.find((p) => p.partition === m.partition && p.replicaSet === m.from);
  const lag = Object.fromEntries(
    sorted.flatMap((m) => {
      const row = owner(m);
      return row?.lag === undefined ? [] : [[String(m.partition), row.lag] as const];
    }),
  );
  const uncommitted = Object.fromEntries(
    sorted.flatMap((m) => {
      const read = uncommittedOffsets(owner(m));
      return read === undefined ? [] : [[String(m.partition), read] as const];
    }),
  );
  return {
    id: proposalId(generation, moves),
    generation,
    moves: sorted.map((m) => ({
      partition: m.partition,
      ...(m.from === undefined ? {} : { from: m.from }),
      to: m.to,
    })),
    replicaSets: sortedNames(new Set(sorted.flatMap((m) => (m.from ? [m.from, m.to] : [m.to])))),
    ...(Object.keys(lag).length > 0 ? { lag } : {}),
    ...(Object.keys(uncommitted).length > 0 ? { uncommitted } : {}),
    createdAt: now.toISOString(),
  };
}

/**
 * Offsets the owner read but has not committed (position minus handedOffTo): what a failover of
 * its set would read again. Unknown without both figures; none before anything was handed off
 * counts from the first offset kept, which status does not carry, so it is left unknown too.
 */
export function uncommittedOffsets(
  row: Pick<ObservedPartition, 'position' | 'handedOffTo'> | undefined,
): string | undefined {
  if (row?.position === undefined || row.handedOffTo === undefined) return undefined;
  const read = BigInt(row.position) - BigInt(row.handedOffTo);
  return (read > 0n ? read : 0n).toString();
}

export interface ApprovalInput {
  /** The moves the planner would start now (no failover, no partition without an owner). */
  moves: readonly Move[];
  /** metadata.generation of the spec they were planned for. */
  generation: number;
  /** status.proposal as written. */
  current: ReassignProposal | undefined;
  /** The approval annotation's value, when set. */
  approval: string | undefined;
  /** status.partitions, for the proposal's lag. */
  observed: readonly ObservedPartition[] | undefined;
  now: Date;
}

export type ApprovalDecision =
  /** The annotation names exactly this plan: start it. */
  | { kind: 'start'; proposal: ReassignProposal }
  /**
   * Wait for approval with `proposal` in status: the one written already when it is the same
   * plan, else a new one replacing `replaced`. `stale`: the annotation names another id.
   */
  | { kind: 'await'; proposal: ReassignProposal; replaced?: string; stale?: string }
  /** Nothing to approve; `stale`: the annotation names a proposal all the same. */
  | { kind: 'none'; stale?: string };

export function decideApproval(input: ApprovalInput): ApprovalDecision {
  const { moves, generation, current, approval } = input;
  if (moves.length === 0)
    return approval === undefined ? { kind: 'none' } : { kind: 'none', stale: approval };
  const id = proposalId(generation, moves);
  const proposal =
    current?.id === id ? current : newProposal(generation, moves, input.observed, input.now);
  if (approval === id) return { kind: 'start', proposal };
  return {
    kind: 'await',
    proposal,
    ...(current && current.id !== id ? { replaced: current.id } : {}),
    ...(approval === undefined ? {} : { stale: approval }),
  };
}

/**
 * status.proposal as a merge patch: `next` in place of `previous` (its lag and uncommitted maps
 * replaced, not merged key by key), null to remove it, undefined when there is nothing either way.
 */
export function proposalPatch(
  previous: ReassignProposal | undefined,
  next: ReassignProposal | undefined,
): MergePatch<ReassignProposal> | null | undefined {
  if (!next) return previous ? null : undefined;
  const { lag, uncommitted, ...rest } = next;
  return {
    ...rest,
    ...(lag ? { lag: mapReplacement(previous?.lag, lag) } : previous?.lag ? { lag: null } : {}),
    ...(uncommitted
      ? { uncommitted: mapReplacement(previous?.uncommitted, uncommitted) }
      : previous?.uncommitted
        ? { uncommitted: null }
        : {}),
  };
}

/** The Progressing condition's message while `proposal` waits. */
export function awaitingApprovalMessage(proposal: ReassignProposal, cube: string): string {
  return `proposal ${proposal.id} would move ${describeMoves(proposal)}; approve it with: kubectl annotate cube ${cube} ${approveAnnotation}=${proposal.id} --overwrite`;
}

/** The ReassignProposed Event. */
export function proposedMessage(proposal: ReassignProposal, replaced: string | undefined): string {
  return `proposal ${proposal.id} for generation ${proposal.generation}: ${describeMoves(proposal)}${replaced ? ` (replaces ${replaced}, planned for an earlier spec or state)` : ''}; waiting for ${approveAnnotation}=${proposal.id}`;
}

/** The ApprovalStale Warning: the annotation names an id that is not the current proposal. */
export function staleApprovalMessage(
  stale: string,
  proposal: ReassignProposal | undefined,
): string {
  return proposal
    ? `${approveAnnotation}=${stale} names no current proposal, so nothing was started: the current proposal is ${proposal.id} (generation ${proposal.generation}: ${describeMoves(proposal)})`
    : `${approveAnnotation}=${stale} names no current proposal, so nothing was started: no move is waiting for approval`;
}
