// The reassign journal's transitions (status.reassign.phase) in one pure table: the phase a
// finished phase leads to for each kind of journal, and the phases that roll back past their
// deadline.
import type { Move } from '../../assign/assignment.ts';
import {
  reassignPhases,
  type ReassignJournal,
  type ReassignPhase,
} from '../../api/cube-assignment.ts';

/**
 * The kinds of journal differ only in the phases they skip:
 * - move: partitions change owner between live replica sets; every phase runs.
 * - placement: no move has a source (a first placement, partitions new to the topic). Nothing is
 *   paused, drained or sealed: Pausing only reads the starting offsets, and Starting completes the
 *   journal, since every status write on the way costs the API server once per new cube.
 * - failover: the sources are lost replica sets. Nothing is paused or drained: Fencing says where
 *   the targets start; nothing is sealed.
 * A move is first written at Pausing (moveFirstWrittenAt), and Sealing's write completes it with
 * the final assignment and epochs: Planned and Done are no writes of their own, each of which
 * cost a status write's round trip on every move. A journal an earlier operator left at Planned
 * or Done still runs on from there.
 */
export type JournalKind = 'move' | 'placement' | 'failover';

/** A phase's successor; `cleared`: the journal is completed and removed in the same step. */
export type PhaseAfter = ReassignPhase | 'cleared';

/** Every transition of the reassign journal. A cell no journal reaches still names a phase. */
export const transitions: Readonly<
  Record<ReassignPhase, Readonly<Record<JournalKind, PhaseAfter>>>
> = {
  Planned: { move: 'Pausing', placement: 'Pausing', failover: 'Fencing' },
  Pausing: { move: 'Draining', placement: 'Starting', failover: 'Draining' },
  Draining: { move: 'Starting', placement: 'Starting', failover: 'Starting' },
  Fencing: { move: 'Starting', placement: 'Starting', failover: 'Starting' },
  Starting: { move: 'Sealing', placement: 'cleared', failover: 'cleared' },
  Sealing: { move: 'cleared', placement: 'cleared', failover: 'cleared' },
  Done: { move: 'cleared', placement: 'cleared', failover: 'cleared' },
};

/**
 * Phases whose failure past the phase deadline rolls the move back (sources resumed, journal
 * cleared): nothing has been released yet. From Starting on, a move only rolls forward.
 */
export const rollsBackPastDeadline: ReadonlySet<ReassignPhase> = new Set(['Pausing', 'Draining']);

/**
 * A first placement skips Planned and Pausing as writes: its starting offsets are read before the
 * journal is first written, at the phase Pausing leads a placement to (see placementJournal).
 */
export const placementFirstWrittenAt = transitions.Pausing.placement as ReassignPhase;

/**
 * A move between live sets is first written at the phase Planned leads it to: Planned has nothing
 * to call, and the journal is the move's record before anything is touched whichever phase it
 * names, since Pausing pauses nothing before it is written.
 */
export const moveFirstWrittenAt = transitions.Planned.move as ReassignPhase;

/** A journal none of whose moves has a source: a first placement, or partitions new to a topic. */
export function isSourceless(journal: Pick<ReassignJournal, 'moves'>): boolean {
  return journal.moves.every((m) => m.from === undefined);
}

export function journalKind(journal: Pick<ReassignJournal, 'moves' | 'failover'>): JournalKind {
  if (journal.failover) return 'failover';
  return isSourceless(journal) ? 'placement' : 'move';
}

/** Where `journal` goes once its current phase is finished. */
export function phaseAfter(
  journal: Pick<ReassignJournal, 'phase' | 'moves' | 'failover'>,
): PhaseAfter {
  return transitions[journal.phase][journalKind(journal)];
}

/** The phase each one leads to in a move (its last, Sealing, stays itself; Done too): the crash tests' order of phases. */
export const nextPhase = Object.fromEntries(
  reassignPhases.map((phase) => {
    const next = transitions[phase].move;
    return [phase, next === 'cleared' ? phase : next];
  }),
) as Record<ReassignPhase, ReassignPhase>;

export function newJournal(moves: Move[], now: Date, id: string): ReassignJournal {
  const at = now.toISOString();
  return {
    id,
    phase: 'Planned',
    moves: moves.map((m) => ({
      partition: m.partition,
      to: m.to,
      ...(m.from === undefined ? {} : { from: m.from }),
    })),
    startedAt: at,
    phaseStartedAt: at,
  };
}
