// What a reassign step is given by the reconciler (ReassignContext), and what this process
// remembers between steps (PhaseEntries): which phase it announced, what it reported once.
import type {
  CubeAssignment,
  CubeAssignmentStatusPatch,
  ReassignJournal,
  ReassignPhase,
} from '../../api/cube-assignment.ts';
import type { ReceiverEndpoint } from '../discovery.ts';
import type { ReassignEvent } from './messages.ts';
import type { ReassignReceiver } from './receivers.ts';

/**
 * Which phase of which reassign this process last started running, per cube, so that the phase is
 * announced (metric, log line, fault point) once per entry and not on each re-poll. A new process
 * starts empty and so announces the phase it resumes.
 */
export class PhaseEntries {
  private readonly entered = new Map<string, string>();
  /** What was reported once per reassign (a replica lacking the cube), by cube key. */
  private readonly reported = new Map<string, { id: string; reported: Set<string> }>();

  /** True when `journal`'s phase was not the last one this process started for `key`. */
  enter(key: string, journal: ReassignJournal): boolean {
    const mark = `${journal.id}/${journal.phase}`;
    if (this.entered.get(key) === mark) return false;
    this.entered.set(key, mark);
    return true;
  }

  /** True the first time this process reports `what` about `journal`'s reassign of `key`. */
  isFirstReport(key: string, journal: ReassignJournal, what: string): boolean {
    let entry = this.reported.get(key);
    if (entry?.id !== journal.id) {
      this.reported.set(key, (entry = { id: journal.id, reported: new Set() }));
    }
    if (entry.reported.has(what)) return false;
    entry.reported.add(what);
    return true;
  }

  forget(key: string): void {
    this.entered.delete(key);
    this.reported.delete(key);
  }
}

export interface ReassignContext {
  cube: string;
  object: CubeAssignment;
  receivers: Map<string, ReceiverEndpoint[]>;
  client: (endpoint: ReceiverEndpoint) => ReassignReceiver;
  /** Offsets to start partitions that have no previous owner from (startingOffsets). */
  startingOffsets: (partitions: number[]) => Promise<Map<number, bigint>>;
  /** The partitions' high watermarks now: where a reset to latest restarts them (Draining). */
  highWatermarks?: (partitions: number[]) => Promise<Map<number, bigint>>;
  /** Writes status (merge patch, resourceVersion precondition); returns the updated object. */
  persist: (status: CubeAssignmentStatusPatch) => Promise<CubeAssignment>;
  /**
   * When given, a first placement's completion (see isSourceless) is handed here instead of
   * persisted: the caller writes it with the status it writes next (the cube's first observation),
   * one write instead of two. Until then the journal stays at Starting, whose steps are
   * idempotent: should that write not happen, the next reconcile completes the placement again.
   * Returns the object as it will be once written.
   */
  holdPlacementCompletion?: (status: CubeAssignmentStatusPatch) => CubeAssignment;
  event: (type: 'Normal' | 'Warning', reason: string, message: string) => void;
  /**
   * A source replica answered 404 (it lacks the cube: a replaced volume, a replica added to the
   * set): it is left out of the move; called once per reassign and replica, to log and count it.
   */
  onCubeMissing: (endpoint: ReceiverEndpoint, journal: ReassignJournal) => void;
  /**
   * A replica was brought to the state a phase it missed left its siblings in (`repair`: drain,
   * raiseStops), as observe's convergence does at rest: to count it.
   */
  onReplicaRepaired: (endpoint: ReceiverEndpoint, repair: string) => void;
  /**
   * Pods of each replica set that are not Ready (down, restarting): Pausing waits for the ones of
   * the move's sources and Sealing for those of all its sets, up to the phase timeout (see
   * waitForNotReadyReplicas). Absent: none.
   */
  notReady?: Map<string, string[]>;
  /**
   * Replica sets with no ready receiver for spec.failoverAfter (lost). A source of the move among
   * them, lost before its data of the moved partitions was committed (Starting waits for that
   * commit before the targets start), has them restarted from the end of what it committed (see
   * fenceLostSets). Absent: none.
   */
  lostReplicaSets?: ReadonlySet<string>;
  /** Called when this process starts running a phase: once per entry (see PhaseEntries). */
  onPhase: (phase: ReassignPhase, journal: ReassignJournal) => void;
  entries: PhaseEntries;
  /** A phase that rolls back does so when it cannot finish within this long of its start. */
  phaseTimeoutMs: number;
  /** A drain still running this long after Draining began is reported (DrainIncomplete). */
  drainTimeoutMs: number;
  /** A hand-off still pending this long after Sealing began is reported (HandOffPending). */
  handOffTimeoutMs: number;
  /** How long one drain call may wait on a receiver before answering `done: false`. */
  drainPollMs: number;
  /**
   * How long one seal call may wait for the hand-off before answering with segments pending: the
   * receiver answers as soon as they are handed off, so Sealing ends then, not at the next poll.
   */
  sealPollMs: number;
  /**
   * How long Starting's wait for the released data's commit re-reads the sources within one pass
   * (every `commitRecheckMs`) before ending it; absent: it reads them once.
   */
  commitWaitMs?: number;
  now: () => Date;
  /** Aborts when the lease is lost or the process shuts down: no receiver call starts after. */
  signal: AbortSignal;
}

/** The cube's key in PhaseEntries: namespace/name. */
export function cubeKey(ctx: ReassignContext): string {
  const { namespace = 'default', name = ctx.cube } = ctx.object.metadata ?? {};
  return `${namespace}/${name}`;
}

export function recordEvent(ctx: ReassignContext, event: ReassignEvent): void {
  ctx.event(event.type, event.reason, event.message);
}

export function inPhaseMs(ctx: ReassignContext, journal: ReassignJournal): number {
  return ctx.now().getTime() - Date.parse(journal.phaseStartedAt ?? journal.startedAt);
}

export const overDeadline = (ctx: ReassignContext, journal: ReassignJournal): boolean =>
  inPhaseMs(ctx, journal) > ctx.phaseTimeoutMs;
