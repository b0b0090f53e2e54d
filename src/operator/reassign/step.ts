// One reassign step: run the journal's phase, and once it is done persist the journal at the phase
// the transition table names (journal.ts), or complete it; roll back by that table's rule.
import type { ReassignJournal, ReassignPhase } from '../../api/cube-assignment.ts';
import { completionStatus } from './completion.ts';
import { cubeKey, overDeadline, recordEvent, type ReassignContext } from './context.ts';
import { phaseAfter, placementFirstWrittenAt, rollsBackPastDeadline } from './journal.ts';
import { reassignRolledBack } from './messages.ts';
import { bySource } from './moves.ts';
import {
  PhaseBlocked,
  phaseDone,
  requeueDelayMs,
  type PhaseRun,
  type StepOutcome,
} from './outcome.ts';
import { completeJournal } from './phases/done.ts';
import { draining } from './phases/draining.ts';
import { fencing } from './phases/fencing.ts';
import { pausing } from './phases/pausing.ts';
import { sealing } from './phases/sealing.ts';
import { starting } from './phases/starting.ts';
import { callReceiver } from './receivers.ts';

type RunPhase = (ctx: ReassignContext, journal: ReassignJournal) => Promise<PhaseRun>;

/** Each phase's receiver calls; Done has none (the journal is cleared). */
const runPhase: Record<Exclude<ReassignPhase, 'Done'>, RunPhase> = {
  // Planned has nothing to call: its write is the move's record before anything is touched.
  Planned: () => Promise.resolve(phaseDone()),
  Pausing: pausing,
  Draining: draining,
  Fencing: fencing,
  Starting: starting,
  Sealing: sealing,
};

/**
 * Advances the journal by at most one phase: runs the current phase's receiver calls and, when
 * the phase is done, persists the journal at the next phase (or, at its end, clears it). Never
 * waits long; says when to run again.
 */
export async function stepReassign(
  ctx: ReassignContext,
  journal: ReassignJournal,
): Promise<StepOutcome> {
  ctx.signal.throwIfAborted();
  if (ctx.entries.enter(cubeKey(ctx), journal)) ctx.onPhase(journal.phase, journal);

  if (journal.phase === 'Done') return completeJournal(ctx, journal, {});

  let run: PhaseRun;
  try {
    run = await runPhase[journal.phase](ctx, journal);
  } catch (error) {
    if (!(error instanceof PhaseBlocked)) throw error;
    if (rollsBackPastDeadline.has(journal.phase) && overDeadline(ctx, journal)) {
      const outcome = await rollBack(ctx, journal, error);
      ctx.entries.forget(cubeKey(ctx));
      return outcome;
    }
    return {
      kind: 'blocked',
      object: ctx.object,
      journal,
      error,
      requeueAfterMs: requeueDelayMs.blocked,
    };
  }
  if (!run.done) {
    const { message, requeueAfterMs } = run;
    if (!run.journal)
      return { kind: 'waiting', object: ctx.object, journal, message, requeueAfterMs };
    ctx.signal.throwIfAborted();
    const next: ReassignJournal = { ...journal, ...run.journal };
    const object = await ctx.persist({ reassign: next });
    return { kind: 'waiting', object, journal: next, message, requeueAfterMs };
  }
  ctx.signal.throwIfAborted();
  const after = phaseAfter(journal);
  // The journal's end: after Sealing (a move), or after Starting with nothing to seal (a
  // placement, a failover). The assignment and epochs are written with it, in one write.
  if (after === 'cleared')
    return completeJournal(ctx, journal, completionStatus(ctx.object, journal));
  const next: ReassignJournal = {
    ...journal,
    ...run.journal,
    phase: after,
    phaseStartedAt: ctx.now().toISOString(),
  };
  const object = await ctx.persist({ ...run.status, reassign: next });
  return { kind: 'advanced', object, journal: next, requeueAfterMs: requeueDelayMs.advanced };
}

/**
 * A first placement's journal (see isSourceless) ready for Starting: the starting offsets read
 * now, so that the journal is first written with them. Throws PhaseBlocked as Pausing would
 * (the brokers unreachable): the caller then writes it at Planned and the steps report it.
 */
export async function placementJournal(
  ctx: ReassignContext,
  journal: ReassignJournal,
): Promise<ReassignJournal> {
  const run = await pausing(ctx, journal);
  return {
    ...journal,
    ...(run.done ? run.journal : {}),
    phase: placementFirstWrittenAt,
    phaseStartedAt: ctx.now().toISOString(),
  };
}

/** Before anything is released: resume the sources where they were and drop the journal. */
async function rollBack(
  ctx: ReassignContext,
  journal: ReassignJournal,
  cause: PhaseBlocked,
): Promise<StepOutcome> {
  for (const [rs, partitions] of bySource(journal)) {
    for (const endpoint of ctx.receivers.get(rs) ?? []) {
      // Best effort: a source that does not answer now resumes when the cube is observed.
      await callReceiver(ctx, endpoint, 'resume', 'ResumeFailed', (c) =>
        c.resume(ctx.cube, partitions, ctx.signal),
      ).catch((error: unknown) => {
        if (!(error instanceof PhaseBlocked)) throw error;
      });
    }
  }
  const object = await ctx.persist({ reassign: null });
  const { event, error } = reassignRolledBack(journal, cause, ctx.phaseTimeoutMs);
  recordEvent(ctx, event);
  return { kind: 'rolledBack', object, journal, error, requeueAfterMs: requeueDelayMs.blocked };
}
