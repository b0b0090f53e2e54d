// What a reassign step returns to the reconciler (StepOutcome, when to run again), and what one
// phase's run returns to the step (PhaseRun).
import type {
  CubeAssignment,
  CubeAssignmentStatusPatch,
  ReassignJournal,
} from '../../api/cube-assignment.ts';
import { ReceiverApiError } from '../../protocol/client.ts';

/** A phase cannot finish now; the reconciler reports it as Degraded and retries. */
export class PhaseBlocked extends Error {
  readonly reason: string;
  /** The Event's text when the message carries figures that change with every poll. */
  readonly event: string | undefined;
  constructor(reason: string, message: string, options?: ErrorOptions & { event?: string }) {
    super(message, options);
    this.name = 'PhaseBlocked';
    this.reason = reason;
    this.event = options?.event;
  }

  /** The HTTP status of the receiver's answer that blocked the phase, if one answered. */
  get receiverStatus(): number | undefined {
    return this.cause instanceof ReceiverApiError ? this.cause.status : undefined;
  }
}

/**
 * When the reconciler runs the cube again after each outcome. Between two phases there is nothing
 * to wait for (the reconciler reads its own write back, even before the informer has it): the
 * next phase runs at once, behind the keys already queued, so other cubes' keys run in between
 * but no timer adds to every phase.
 */
export const requeueDelayMs = {
  advanced: 1,
  /** A drain under way: the poll itself waited up to `drainPollMs` on the receiver. */
  drainPending: 1,
  /** A hand-off under way: the seal itself waited up to `sealPollMs` (the receiver retries). */
  handOffPending: 1,
  /** Reported as Degraded; retried. */
  blocked: 2_000,
  /** Done or rolled back: the next reconcile observes the receivers. */
  ended: 500,
  /** Pausing or Sealing waits for a replica of the move's sets that is not Ready. */
  replicaNotReady: 500,
  /** Starting waits for the sources' data of the moved partitions to be committed. */
  commitPending: 100,
} as const;

/** What one step did; `object` is the last version of the cube this step read or wrote. */
export type StepOutcome =
  /** The phase finished and the journal is persisted at the next one. */
  | { kind: 'advanced'; object: CubeAssignment; journal: ReassignJournal; requeueAfterMs: number }
  /** The phase is under way (a drain, a hand-off) within its time: nothing to report. */
  | {
      kind: 'waiting';
      object: CubeAssignment;
      journal: ReassignJournal;
      message: string;
      requeueAfterMs: number;
    }
  /** The phase cannot finish now: to be reported as Degraded, and retried. */
  | {
      kind: 'blocked';
      object: CubeAssignment;
      journal: ReassignJournal;
      error: PhaseBlocked;
      requeueAfterMs: number;
    }
  /** Done: status.assignment and epochs updated, journal cleared, Event emitted. */
  | { kind: 'completed'; object: CubeAssignment; journal: ReassignJournal; requeueAfterMs: number }
  /** Past the phase deadline before anything was released: sources resumed, journal cleared. */
  | {
      kind: 'rolledBack';
      object: CubeAssignment;
      journal: ReassignJournal;
      error: PhaseBlocked;
      requeueAfterMs: number;
    };

/** How a phase's run ended: done (with what the next phase needs), or still under way. */
export type PhaseRun =
  | { done: true; journal?: Partial<ReassignJournal>; status?: CubeAssignmentStatusPatch }
  /** Under way; `journal`, when given, is written before the phase runs again (raised stops). */
  | { done: false; message: string; requeueAfterMs: number; journal?: Partial<ReassignJournal> };

export const phaseDone = (
  journal: Partial<ReassignJournal> = {},
  status: CubeAssignmentStatusPatch = {},
): PhaseRun => ({ done: true, journal, status });

export const phaseUnderWay = (
  message: string,
  requeueAfterMs: number,
  journal?: Partial<ReassignJournal>,
): PhaseRun => ({ done: false, message, requeueAfterMs, ...(journal ? { journal } : {}) });
