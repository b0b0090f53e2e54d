// The reassign protocol (DESIGN §4), crash-safe, one phase per reconcile: the journal in
// status.reassign names the phase; `stepReassign` runs that phase's receiver calls (each
// idempotent) and, only once the phase is done, persists the journal at the next phase, so the
// next reconcile, or a new operator, runs any phase again from its start. No step waits long: a
// drain is polled briefly and a hand-off re-checked on later reconciles. Initial assignment is a
// reassign whose moves have no source. Every wait has a deadline; failures roll back (before
// anything is released) or forward (after), by rule.
//
// Where things are:
//   journal.ts      the transition table: every phase's successor, per kind of journal
//   step.ts         one step: run the phase, persist the journal, roll back
//   phases/         one file per phase; starting.ts lists Starting's sub-steps in order
//   fences/         the failover's, the lost sets' and the stop fence, on one fence loop
//   receivers.ts    every receiver call; start-offsets.ts the brokers' offsets
//   messages.ts     every Event and condition text
//   completion.ts   what a finished move writes to status
export {
  completionStatus,
  finalAssignment,
  mapReplacement,
  releasedByMoves,
} from './completion.ts';
export { PhaseEntries, type ReassignContext } from './context.ts';
export { failoverStart } from './fences/fence-loop.ts';
export {
  isSourceless,
  moveFirstWrittenAt,
  journalKind,
  newJournal,
  nextPhase,
  phaseAfter,
  rollsBackPastDeadline,
  transitions,
  type JournalKind,
  type PhaseAfter,
} from './journal.ts';
export { describeMoves, describeOffsets, fencedMessage } from './messages.ts';
export { PhaseBlocked, requeueDelayMs, type StepOutcome } from './outcome.ts';
export { fencedPartitions } from './phases/starting/release-sources.ts';
export { keptUncommitted } from './phases/starting/released-commit.ts';
export { assignRequest, type ReassignReceiver } from './receivers.ts';
export { placementJournal, stepReassign } from './step.ts';
