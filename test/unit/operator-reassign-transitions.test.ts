// The reassign journal's transition table (src/operator/reassign/journal.ts): the phase each one
// leads to for a move, a first placement and a failover, the paths they take from Planned, and
// the phases that roll back.
import type { ReassignJournal, ReassignPhase } from '../../src/api/cube-assignment.ts';
import {
  journalKind,
  nextPhase,
  phaseAfter,
  rollsBackPastDeadline,
  type JournalKind,
  type PhaseAfter,
} from '../../src/operator/reassign/index.ts';

const journals: Record<JournalKind, Pick<ReassignJournal, 'moves' | 'failover'>> = {
  move: { moves: [{ partition: 0, from: 'rs-a', to: 'rs-b' }] },
  placement: { moves: [{ partition: 0, to: 'rs-b' }] },
  failover: {
    moves: [{ partition: 0, from: 'rs-a', to: 'rs-b' }],
    failover: { replicaSets: ['rs-a'] },
  },
};

const after = (kind: JournalKind, phase: ReassignPhase): PhaseAfter =>
  phaseAfter({ ...journals[kind], phase });

/** Phases from `phase` on, each the successor of the one before, until the journal is cleared. */
function path(kind: JournalKind, phase: ReassignPhase): PhaseAfter[] {
  const out: PhaseAfter[] = [phase];
  for (let p: PhaseAfter = phase; p !== 'cleared' && out.length < 10;)
    out.push((p = after(kind, p)));
  return out;
}

test.each(Object.keys(journals) as JournalKind[])('a %s journal is of its kind', (kind) => {
  expect(journalKind(journals[kind])).toBe(kind);
});

test.each([
  // phase       move        placement   failover
  ['Planned', 'Pausing', 'Pausing', 'Fencing'],
  ['Pausing', 'Draining', 'Starting', 'Draining'],
  ['Draining', 'Starting', 'Starting', 'Starting'],
  ['Fencing', 'Starting', 'Starting', 'Starting'],
  ['Starting', 'Sealing', 'cleared', 'cleared'],
  ['Sealing', 'cleared', 'cleared', 'cleared'],
  ['Done', 'cleared', 'cleared', 'cleared'],
] as const)(
  'after %s: a move goes to %s, a placement to %s, a failover to %s',
  (phase, move, placement, failover) => {
    expect(after('move', phase)).toBe(move);
    expect(after('placement', phase)).toBe(placement);
    expect(after('failover', phase)).toBe(failover);
  },
);

test.each([
  ['move', ['Planned', 'Pausing', 'Draining', 'Starting', 'Sealing', 'cleared']],
  ['placement', ['Planned', 'Pausing', 'Starting', 'cleared']],
  ['failover', ['Planned', 'Fencing', 'Starting', 'cleared']],
] as const)('a %s from Planned: %j', (kind, phases) => {
  expect(path(kind, 'Planned')).toEqual(phases);
});

test('only phases before anything is released roll back: those a move passes before Starting', () => {
  const beforeStarting = path('move', 'Planned').slice(
    0,
    path('move', 'Planned').indexOf('Starting'),
  );
  expect([...rollsBackPastDeadline]).toEqual(['Pausing', 'Draining']);
  for (const phase of rollsBackPastDeadline) expect(beforeStarting).toContain(phase);
});

test("nextPhase is a move's path, its last phase (Sealing) staying itself, Done too (the crash tests' order of phases)", () => {
  expect(nextPhase).toEqual({
    Planned: 'Pausing',
    Pausing: 'Draining',
    Draining: 'Starting',
    Fencing: 'Starting',
    Starting: 'Sealing',
    Sealing: 'Sealing',
    Done: 'Done',
  });
});
