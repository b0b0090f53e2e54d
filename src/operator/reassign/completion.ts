// What a finished move writes to status with the journal's end: the final assignment, the bumped
// epochs and where they began, and the partitions a source released before their data was
// committed.
import type {
  CubeAssignment,
  CubeAssignmentStatusPatch,
  ReassignJournal,
} from '../../api/cube-assignment.ts';
import { withResetRecord, type ResetPartition } from '../../api/offset-reset.ts';
import { startOf } from './moves.ts';

/** status.assignment with the journal's moves applied. */
export function finalAssignment(
  object: CubeAssignment,
  journal: Pick<ReassignJournal, 'moves'>,
): Record<string, number[]> {
  const owners = new Map<number, string>();
  for (const [rs, partitions] of Object.entries(object.status?.assignment ?? {})) {
    for (const p of partitions) owners.set(p, rs);
  }
  for (const m of journal.moves) owners.set(m.partition, m.to);
  const out: Record<string, number[]> = {};
  for (const rs of object.spec.replicaSets ?? []) out[rs] = [];
  for (const [p, rs] of owners) (out[rs] ??= []).push(p);
  for (const list of Object.values(out)) list.sort((a, b) => a - b);
  return out;
}

/**
 * A JSON merge patch merges maps key by key; to replace a map, the keys it no longer has must be
 * sent as null.
 */
export function mapReplacement<T>(
  previous: Record<string, T> | undefined,
  next: Record<string, T>,
): Record<string, T | null> {
  const out: Record<string, T | null> = { ...next };
  for (const key of Object.keys(previous ?? {})) if (!(key in next)) out[key] = null;
  return out;
}

/**
 * status.releasedUncommitted with a move's completion: a source left with partitions seals the
 * segments holding the ones it released (segment-upkeep.ts, sealReleased), but what it read of them
 * is committed only once handed off (the operator's observations of the set say when). The
 * targets start once it is (awaitReleasedCommit), so only a move whose targets started without
 * (startedUncommitted) records it. Written with the completion, so that a leader taking over at
 * once knows it too. Undefined for a failover (its sources are fenced), a move whose data was
 * committed, or when no source keeps partitions; sources lost in Starting are fenced and left out.
 */
export function releasedByMoves(
  previous: Readonly<Record<string, readonly number[]>> | undefined,
  journal: Pick<ReassignJournal, 'moves' | 'failover' | 'startedUncommitted' | 'lostSets'>,
  assignment: Readonly<Record<string, readonly number[]>>,
): Record<string, number[]> | undefined {
  // Committed before the targets started (awaitReleasedCommit), unless they started without.
  if (journal.failover || !journal.startedUncommitted) return undefined;
  const lost = new Set(journal.lostSets?.replicaSets ?? []);
  const out: Record<string, number[]> = {};
  for (const m of journal.moves) {
    // A reset's owner takes the partition back itself: it holds it again, nothing moved away.
    if (
      m.from === undefined ||
      m.from === m.to ||
      lost.has(m.from) ||
      (assignment[m.from] ?? []).length === 0
    )
      continue;
    const held = new Set([...(out[m.from] ?? previous?.[m.from] ?? []), m.partition]);
    out[m.from] = [...held].sort((a, b) => a - b);
  }
  return Object.keys(out).length > 0 ? out : undefined;
}

/** The status a move's end writes: assignment, epochs bumped, where they began (and the cube). */
export function completionStatus(
  object: CubeAssignment,
  journal: ReassignJournal,
): CubeAssignmentStatusPatch {
  const assignment = finalAssignment(object, journal);
  const epochs = { ...(object.status?.epochs ?? {}) };
  const epochStarts: Record<string, string> = {};
  const firstOffsets: Record<string, string> = {};
  for (const m of journal.moves) {
    const p = String(m.partition);
    // A partition's first placement: where the cube began reading it, kept for good.
    if (epochs[p] === undefined && object.status?.firstOffsets?.[p] === undefined)
      firstOffsets[p] = journal.stopOffsets?.[p] ?? '0';
    epochs[p] = (epochs[p] ?? 0) + 1;
    // Where Starting started the targets (a merge patch: the other partitions' stay).
    epochStarts[p] = startOf(journal, m.partition);
  }
  const released = releasedByMoves(object.status?.releasedUncommitted, journal, assignment);
  return {
    assignment: mapReplacement(object.status?.assignment, assignment),
    epochs,
    epochStarts,
    ...(Object.keys(firstOffsets).length > 0 ? { firstOffsets } : {}),
    ...(released ? { releasedUncommitted: released } : {}),
    ...(journal.reset
      ? {
          resets: withResetRecord(object.status?.resets, {
            id: journal.reset.id,
            to: journal.reset.to,
            result: 'Applied',
            at: new Date().toISOString(),
            partitions: resetPartitions(journal, epochs),
          }),
        }
      : {}),
  };
}

/** A reset's partitions: where each was drained to (the stop offset) and where it restarted. */
export function resetPartitions(
  journal: Pick<ReassignJournal, 'moves' | 'stopOffsets' | 'reset'>,
  epochs: Record<string, number>,
): ResetPartition[] {
  return journal.moves
    .map((m) => ({
      partition: m.partition,
      from: journal.stopOffsets?.[String(m.partition)] ?? '0',
      to: startOf(journal, m.partition),
      epoch: epochs[String(m.partition)] ?? 0,
    }))
    .sort((a, b) => a.partition - b.partition);
}
