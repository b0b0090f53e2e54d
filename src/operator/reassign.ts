// The reassign protocol (DESIGN §4), crash-safe, one phase per reconcile: the journal in
// status.reassign names the phase; `stepReassign` runs that phase's receiver calls (each
// idempotent) and, only once the phase is finished, persists the journal at the next phase, so the
// next reconcile, or a new operator, runs any phase again from its start. No step waits long: a
// drain is polled briefly and a hand-off re-checked on later reconciles. Initial assignment is a
// reassign whose moves have no source. Every wait has a deadline; failures roll back (before
// anything is released) or forward (after), by rule.
import { classifySourceError } from '../kafka/source-security.ts';
import type { Move } from '../assign/assignment.ts';
import type {
  CubeAssignment,
  CubeAssignmentStatusPatch,
  ReassignJournal,
  ReassignPhase,
} from '../api/cube-assignment.ts';
import type {
  AssignCubeRequest,
  CubeStatus,
  FenceRequest,
  FenceResponse,
} from '../protocol/admin-api.ts';
import { ReceiverApiError, isStaleLeader, type ReceiverClient } from '../protocol/client.ts';
import { faultPoint } from '../observability/fault-injection.ts';
import { covers } from '../receiver/hand-off-commit.ts';
import { type OffsetRange, addRange, rangesFromJson } from '../receiver/offset-ranges.ts';
import type { ReceiverEndpoint } from './discovery.ts';

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

/** The receiver calls a reassign makes. */
export type ReassignReceiver = Pick<
  ReceiverClient,
  'pause' | 'resume' | 'drain' | 'release' | 'assign' | 'seal' | 'unassign' | 'cubeStatus' | 'fence'
>;

/**
 * Which phase of which reassign this process last started running, per cube, so that the phase is
 * announced (metric, log line, fault point) once per entry and not on each re-poll. A new process
 * starts empty and so announces the phase it resumes.
 */
export class PhaseEntries {
  private readonly entered = new Map<string, string>();
  /** What was told once per reassign (a replica lacking the cube), by cube key. */
  private readonly told = new Map<string, { id: string; told: Set<string> }>();

  /** True when `journal`'s phase was not the last one this process started for `key`. */
  enter(key: string, journal: ReassignJournal): boolean {
    const mark = `${journal.id}/${journal.phase}`;
    if (this.entered.get(key) === mark) return false;
    this.entered.set(key, mark);
    return true;
  }

  /** True the first time this process tells `what` about `journal`'s reassign of `key`. */
  tell(key: string, journal: ReassignJournal, what: string): boolean {
    let entry = this.told.get(key);
    if (entry?.id !== journal.id) this.told.set(key, (entry = { id: journal.id, told: new Set() }));
    if (entry.told.has(what)) return false;
    entry.told.add(what);
    return true;
  }

  forget(key: string): void {
    this.entered.delete(key);
    this.told.delete(key);
  }
}

export interface ReassignContext {
  cube: string;
  object: CubeAssignment;
  receivers: Map<string, ReceiverEndpoint[]>;
  client: (endpoint: ReceiverEndpoint) => ReassignReceiver;
  /** Offsets to start partitions that have no previous owner from (startingOffsets). */
  startingOffsets: (partitions: number[]) => Promise<Map<number, bigint>>;
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
   * waitForAway). Absent: none.
   */
  notReady?: Map<string, string[]>;
  /**
   * Replica sets with no ready receiver for spec.failoverAfter. A source of the move among them,
   * lost before its data of the moved partitions was committed (Starting waits for that commit
   * before the targets start), has them restarted from the end of what it committed (see
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
  now: () => Date;
  /** Aborts when the lease is lost or the process shuts down: no receiver call starts after. */
  signal: AbortSignal;
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
  finished: 500,
  /** Pausing or Sealing waits for a replica of the move's sets that is not Ready. */
  replicaAway: 500,
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

/** The phase each one leads to (Done stays Done). */
export const nextPhase: Record<ReassignPhase, ReassignPhase> = {
  Planned: 'Pausing',
  Pausing: 'Draining',
  Draining: 'Starting',
  Fencing: 'Starting',
  Starting: 'Sealing',
  Sealing: 'Done',
  Done: 'Done',
};

/**
 * A journal none of whose moves has a source: a first placement, or partitions new to the topic.
 * Nothing is paused, drained or sealed, so its phases are Planned → Pausing (where the starting
 * offsets are read and written down) → Starting → done: Draining and Sealing have no call to
 * make, and writing the journal at each would only cost the API server (1,000 new cubes, five
 * writes each, were most of the time to Ready in bench:scale).
 */
export function isSourceless(journal: ReassignJournal): boolean {
  return journal.moves.every((m) => m.from === undefined);
}

/** The phase a finished one leads to, for this journal (see isSourceless). */
function phaseAfter(journal: ReassignJournal): ReassignPhase {
  // A failover's sources are gone: nothing to pause or drain; Fencing says where to start.
  if (journal.failover && journal.phase === 'Planned') return 'Fencing';
  const next = nextPhase[journal.phase];
  return next === 'Draining' && isSourceless(journal) ? 'Starting' : next;
}

/** Phases whose failure past the deadline rolls back: nothing has been released yet. */
const rollsBack: ReadonlySet<ReassignPhase> = new Set(['Pausing', 'Draining']);

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

function bySource(journal: ReassignJournal): Map<string, number[]> {
  const out = new Map<string, number[]>();
  for (const m of journal.moves) {
    if (m.from === undefined) continue;
    out.set(m.from, [...(out.get(m.from) ?? []), m.partition]);
  }
  return out;
}

function byTarget(journal: ReassignJournal): Map<string, number[]> {
  const out = new Map<string, number[]>();
  for (const m of journal.moves) out.set(m.to, [...(out.get(m.to) ?? []), m.partition]);
  return out;
}

function endpointsOf(ctx: ReassignContext, replicaSet: string, role: string): ReceiverEndpoint[] {
  const list = ctx.receivers.get(replicaSet) ?? [];
  if (list.length === 0) {
    throw new PhaseBlocked(
      'TargetReceiverUnavailable',
      `replica set ${replicaSet} (${role} of a move) has no ready receiver`,
    );
  }
  return list;
}

const plural = (list: unknown[], one: string, many: string): string =>
  list.length > 1 ? many : one;

/**
 * The receivers of a source replica set, which a phase must call. A set with none Ready blocks the
 * phase: never skipped, since its data (drained partitions, segments to seal) is on its volumes and
 * only its own receivers can release or hand it off. The phase is retried at the blocked pace
 * until the set is back; Pausing and Draining roll back past their deadline, later phases wait.
 * (Failing over a set gone for good is not done here.)
 */
function sourceEndpoints(
  ctx: ReassignContext,
  journal: ReassignJournal,
  replicaSet: string,
): ReceiverEndpoint[] {
  const list = ctx.receivers.get(replicaSet) ?? [];
  if (list.length > 0) return list;
  const partitions = bySource(journal).get(replicaSet) ?? [];
  const them = `partition${plural(partitions, '', 's')} ${partitions.join(', ')}`;
  const waits: Record<ReassignPhase, string> = {
    Planned: '',
    Pausing: `the reassign waits in Pausing and rolls back after ${ctx.phaseTimeoutMs / 1000}s if it is not back`,
    Draining: `the reassign waits in Draining and rolls back after ${ctx.phaseTimeoutMs / 1000}s if it is not back`,
    Fencing: '',
    Starting: `${them}, drained to ${plural(partitions, 'its stop offset', 'their stop offsets')}, cannot be released: ${plural(partitions, 'it waits', 'they wait')} for the set to come back (its data is on its volumes) and ${plural(partitions, 'is', 'are')} not consumed until then`,
    Sealing: `its segments of ${ctx.cube} cannot be sealed and handed off: the reassign does not complete until the set is back (its data is on its volumes)`,
    Done: '',
  };
  throw new PhaseBlocked(
    'SourceReplicaSetUnavailable',
    `replica set ${replicaSet} (source of ${them}) has no ready receiver; ${waits[journal.phase]}`,
  );
}

/** One receiver call: aborted with the context, a failure turned into PhaseBlocked with its cause. */
async function call<T>(
  ctx: ReassignContext,
  endpoint: ReceiverEndpoint,
  what: string,
  reason: string,
  fn: (client: ReassignReceiver) => Promise<T>,
): Promise<T> {
  ctx.signal.throwIfAborted();
  try {
    return await fn(ctx.client(endpoint));
  } catch (error) {
    // Aborted (lease lost, shutdown), or refused as from a deposed leader: not a problem of the
    // phase, nothing to report; this process stops leading.
    ctx.signal.throwIfAborted();
    if (isStaleLeader(error)) throw error;
    // fetch() says only "fetch failed"; the reason a person can act on (ECONNREFUSED, a DNS or
    // TLS error) is in its cause.
    const failure = error instanceof Error ? error : new Error(String(error));
    const cause = failure.cause as (Error & { code?: string }) | undefined;
    const detail =
      failure instanceof ReceiverApiError || !(cause instanceof Error)
        ? failure.message
        : `${failure.message}: ${cause.message || cause.code || cause.name}`;
    throw new PhaseBlocked(
      reason,
      `${what} on receiver ${endpoint.name} (${endpoint.replicaSet}) failed: ${detail}`,
      { cause: failure },
    );
  }
}

/**
 * A receiver finished its part of the phase: crash tests kill the operator between two. Starting's
 * targets have a point of their own (`target`): its releases may run again on each pass while the
 * sources' commit is awaited, so a count of its calls would not say which receiver came last.
 */
function receiverFinished(phase: ReassignPhase, side?: 'target'): void {
  faultPoint(`reassign-${phase}${side ? `-${side}` : ''}-partial`);
}

const isGone = (error: unknown): boolean =>
  error instanceof PhaseBlocked && error.receiverStatus === 404;

/**
 * A source replica that answers 404 does not hold the cube, so none of its data: it has nothing
 * to pause, drain or release, and its sibling replicas carry the move. Told once per reassign and
 * replica (Warning Event, log, metric); observe() brings it the cube once no reassign runs.
 */
function cubeMissing(ctx: ReassignContext, journal: ReassignJournal, endpoint: ReceiverEndpoint) {
  const { namespace = 'default', name = ctx.cube } = ctx.object.metadata ?? {};
  if (!ctx.entries.tell(`${namespace}/${name}`, journal, endpoint.name)) return;
  const partitions = bySource(journal).get(endpoint.replicaSet) ?? [];
  ctx.event(
    'Warning',
    'CubeNotOnReceiver',
    `receiver ${endpoint.name} (${endpoint.replicaSet}) does not hold the cube: it has no data of partition${plural(partitions, '', 's')} ${partitions.join(', ')}, so reassign ${journal.id} goes on without it; the other replicas of ${endpoint.replicaSet} carry the move`,
  );
  ctx.onCubeMissing(endpoint, journal);
}

/**
 * Runs `fn` on every replica of a source set; replicas that lack the cube (404) are left out. When
 * none of them holds it, the set's data is nowhere to be found: the first 404 blocks the phase.
 * Returns false when `fn` stopped the pass (a replica still under way).
 */
async function onHolders(
  ctx: ReassignContext,
  journal: ReassignJournal,
  replicaSet: string,
  fn: (endpoint: ReceiverEndpoint) => Promise<boolean>,
): Promise<boolean> {
  const gone: { endpoint: ReceiverEndpoint; error: unknown }[] = [];
  let held = 0;
  for (const endpoint of sourceEndpoints(ctx, journal, replicaSet)) {
    try {
      if (!(await fn(endpoint))) return false;
      held += 1;
    } catch (error) {
      if (!isGone(error)) throw error;
      gone.push({ endpoint, error });
    }
  }
  if (held === 0 && gone.length > 0) throw gone[0]!.error;
  for (const { endpoint } of gone) cubeMissing(ctx, journal, endpoint);
  return true;
}

/** The cube as the receivers need it: source and schema from the spec. */
export function assignRequest(
  object: CubeAssignment,
  replicaSet: string,
  partitions: { partition: number; position: string; epoch: number; watermark?: number | null }[],
): AssignCubeRequest {
  const { brokers, topic, startingOffsets, tls, sasl } = object.spec.source;
  return {
    namespace: object.metadata?.namespace ?? 'default',
    // Secret names only: receivers read the Secrets themselves, no credential travels here.
    source: { brokers, topic, startingOffsets, ...(tls ? { tls } : {}), ...(sasl ? { sasl } : {}) },
    schema: object.spec.schema,
    replicaSet,
    partitions: partitions.map((p) => ({ ...p, watermark: p.watermark ?? null })),
  };
}

/** How a phase's run ended: finished (with what the next phase needs), or still under way. */
type PhaseRun =
  | { finished: true; journal?: Partial<ReassignJournal>; status?: CubeAssignmentStatusPatch }
  /** Under way; `journal`, when given, is written before the phase runs again (raised stops). */
  | {
      finished: false;
      message: string;
      requeueAfterMs: number;
      journal?: Partial<ReassignJournal>;
    };

const finished = (
  journal: Partial<ReassignJournal> = {},
  status: CubeAssignmentStatusPatch = {},
): PhaseRun => ({ finished: true, journal, status });

function inPhaseMs(ctx: ReassignContext, journal: ReassignJournal): number {
  return ctx.now().getTime() - Date.parse(journal.phaseStartedAt ?? journal.startedAt);
}

const overDeadline = (ctx: ReassignContext, journal: ReassignJournal): boolean =>
  inPhaseMs(ctx, journal) > ctx.phaseTimeoutMs;

/**
 * Where new partitions start, as the brokers say. A Kafka error (brokers down, a partition whose
 * leader is not elected yet) blocks the phase, reported as Degraded and retried at the blocked
 * pace like a receiver's failure, not left to the controller's growing backoff.
 */
async function startingOffsetsOf(
  ctx: ReassignContext,
  partitions: number[],
): Promise<Map<number, bigint>> {
  ctx.signal.throwIfAborted();
  try {
    const offsets = await ctx.startingOffsets(partitions);
    const missing = partitions.filter((p) => !offsets.has(p));
    if (missing.length > 0) throw new Error(`no offsets reported for ${missing.join(', ')}`);
    return offsets;
  } catch (error) {
    ctx.signal.throwIfAborted();
    const { topic, brokers } = ctx.object.spec.source;
    const cause = error instanceof Error ? error : new Error(String(error));
    throw new PhaseBlocked(
      classifySourceError(error) ?? 'SourceUnavailable',
      `cannot read the offsets of partition${partitions.length > 1 ? 's' : ''} ${partitions.join(', ')} of topic ${topic} from brokers ${brokers.join(', ')}: ${cause.message}`,
      { cause },
    );
  }
}

/** Pause the moving partitions on every replica of each source; stop = max position. */
async function pausing(ctx: ReassignContext, journal: ReassignJournal): Promise<PhaseRun> {
  const waiting = waitForAway(ctx, journal, 'sources');
  if (waiting) return waiting;
  const stop = new Map<number, bigint>();
  for (const [rs, partitions] of bySource(journal)) {
    await onHolders(ctx, journal, rs, async (endpoint) => {
      const answer = await call(ctx, endpoint, 'pause', 'PauseFailed', (c) =>
        c.pause(ctx.cube, partitions, ctx.signal),
      );
      receiverFinished('Pausing');
      const epochs = ctx.object.status?.epochs ?? {};
      for (const p of answer.partitions) {
        // A replica behind status (a move it missed, not yet converged) holds another epoch's
        // position: it says nothing of where this one is.
        if (p.epoch < (epochs[String(p.partition)] ?? 0)) continue;
        const position = BigInt(p.position);
        if ((stop.get(p.partition) ?? -1n) < position) stop.set(p.partition, position);
      }
      return true;
    });
  }
  const fresh = journal.moves.filter((m) => m.from === undefined).map((m) => m.partition);
  if (fresh.length > 0) {
    for (const [p, o] of await startingOffsetsOf(ctx, fresh)) stop.set(p, o);
  }
  const stopOffsets = Object.fromEntries([...stop].map(([p, o]) => [String(p), o.toString()]));
  return finished({ stopOffsets });
}

/** Offsets by partition, as Events name them: `0 at 105, 1 at 200`. */
export const describeOffsets = (offsets: Record<string, string>): string =>
  Object.entries(offsets)
    .map(([p, o]) => `${p} at ${o}`)
    .join(', ');

/** The journal's stop offsets of `partitions`, as a drain or a release sends them. */
function stopsOf(journal: ReassignJournal, partitions: number[]): Record<string, string> {
  return Object.fromEntries(
    partitions.map((p) => [String(p), journal.stopOffsets?.[String(p)] ?? '0']),
  );
}

/**
 * A drain refused (409): a replica that missed the pause (down, or not Ready then) may have run
 * past the stop offsets. Nothing is released before Starting, so the stops may still rise: the
 * replica is paused, and its positions past them become the new stops. Any other refusal blocks.
 */
async function raisedStops(
  ctx: ReassignContext,
  endpoint: ReceiverEndpoint,
  partitions: number[],
  stops: Record<string, string>,
  error: unknown,
): Promise<Record<string, string>> {
  if (!(error instanceof PhaseBlocked) || error.receiverStatus !== 409) throw error;
  const paused = await call(ctx, endpoint, 'pause', 'PauseFailed', (c) =>
    c.pause(ctx.cube, partitions, ctx.signal),
  );
  const raised: Record<string, string> = {};
  for (const p of paused.partitions) {
    const stop = stops[String(p.partition)];
    if (stop !== undefined && BigInt(p.position) > BigInt(stop))
      raised[String(p.partition)] = p.position;
  }
  if (Object.keys(raised).length === 0) throw error;
  ctx.onReplicaRepaired(endpoint, 'raiseStops');
  return raised;
}

/**
 * Every replica of each source consumes to the stop offsets. Replicas are taken in order, and a
 * pass ends at the first one still draining: it is polled again on the next reconcile.
 */
async function draining(ctx: ReassignContext, journal: ReassignJournal): Promise<PhaseRun> {
  const watermarks = new Map<number, number>();
  for (const [rs, partitions] of bySource(journal)) {
    const stops = stopsOf(journal, partitions);
    let pending: string | undefined;
    let raised: Record<string, string> | undefined;
    const done = await onHolders(ctx, journal, rs, async (endpoint) => {
      let answer;
      try {
        answer = await call(ctx, endpoint, 'drain', 'DrainFailed', (c) =>
          c.drain(ctx.cube, { stopOffsets: stops, timeoutMs: ctx.drainPollMs }, ctx.signal),
        );
      } catch (error) {
        raised = await raisedStops(ctx, endpoint, partitions, stops, error);
        pending = `receiver ${endpoint.name} ran past the stop offsets: raised to its positions`;
        return false;
      }
      if (!answer.done) {
        const behind = answer.partitions.filter((p) => p.state !== 'stopped');
        const lead = `receiver ${endpoint.name} has not reached the stop offsets of partitions`;
        const message = `${lead} ${behind.map((p) => `${p.partition} (at ${p.position}, stop ${p.stopOffset})`).join(', ')}`;
        if (inPhaseMs(ctx, journal) > ctx.drainTimeoutMs || overDeadline(ctx, journal)) {
          const event = `${lead} ${behind.map((p) => p.partition).join(', ')}`;
          throw new PhaseBlocked('DrainIncomplete', message, { event });
        }
        pending = message;
        return false;
      }
      receiverFinished('Draining');
      for (const p of answer.partitions) {
        if (p.watermark !== null && (watermarks.get(p.partition) ?? -Infinity) < p.watermark) {
          watermarks.set(p.partition, p.watermark);
        }
      }
      return true;
    });
    if (raised) {
      const stopOffsets = { ...journal.stopOffsets, ...raised };
      ctx.event(
        'Normal',
        'StopOffsetsRaised',
        `reassign ${journal.id}: a replica of ${rs} that missed the pause ran past the stop offsets; raised to ${describeOffsets(raised)}, every replica of ${rs} drains on to them`,
      );
      const message = pending ?? 'stop offsets raised';
      return {
        finished: false,
        message,
        requeueAfterMs: requeueDelayMs.advanced,
        journal: { stopOffsets },
      };
    }
    if (!done) {
      const message = pending ?? 'a drain is under way';
      return { finished: false, message, requeueAfterMs: requeueDelayMs.drainPending };
    }
  }
  return finished(
    watermarks.size > 0
      ? { watermarks: Object.fromEntries([...watermarks].map(([p, w]) => [String(p), w])) }
      : {},
  );
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
    const answer = await call(ctx, endpoint, 'release', 'ReleaseFailed', (c) =>
      c.release(ctx.cube, partitions, ctx.signal, stops),
    );
    tellFenced(ctx, endpoint, answer.partitions);
    return undefined;
  } catch (error) {
    if (!(error instanceof PhaseBlocked) || error.receiverStatus !== 409) throw error;
    const held = await call(ctx, endpoint, 'status', 'ReleaseFailed', (c) =>
      c.cubeStatus(ctx.cube, ctx.signal),
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
    const answer = await call(ctx, endpoint, 'drain', 'DrainFailed', (c) =>
      c.drain(ctx.cube, { stopOffsets: drain, timeoutMs: ctx.drainPollMs }, ctx.signal),
    );
    const behind = short.map((p) => p.partition).join(', ');
    const message = `receiver ${endpoint.name} missed Draining: it consumes partitions ${behind} to their stop offsets before it releases them`;
    if (!answer.done) return message;
    ctx.onReplicaRepaired(endpoint, 'drain');
    ctx.event(
      'Normal',
      'ReplicaRepaired',
      `receiver ${endpoint.name} (${endpoint.replicaSet}) brought to its replica set's state: it missed Draining, drained ${describeOffsets(drain)} (the stop offsets) before its release`,
    );
    const released = await call(ctx, endpoint, 'release', 'ReleaseFailed', (c) =>
      c.release(ctx.cube, partitions, ctx.signal, stops),
    );
    tellFenced(ctx, endpoint, released.partitions);
    return undefined;
  }
}

/**
 * Partitions released past their stop offset (a replica that missed the pause and ran on): the
 * receiver fenced the segments holding the excess. A Warning Event and a count say so.
 */
function tellFenced(
  ctx: ReassignContext,
  endpoint: ReceiverEndpoint,
  released: { partition: number; position: string; stopOffset: string | null }[],
): void {
  const fenced = fencedPartitions(released);
  if (fenced.length === 0) return;
  ctx.onReplicaRepaired(endpoint, 'fence');
  ctx.event('Warning', 'ExcessFenced', fencedMessage(endpoint, fenced));
}

/** Released partitions whose position is past their stop offset: their excess was fenced. */
export function fencedPartitions(
  released: { partition: number; position: string; stopOffset: string | null }[],
): { partition: number; position: string; stopOffset: string }[] {
  return released.flatMap((p) =>
    p.stopOffset !== null && BigInt(p.position) > BigInt(p.stopOffset)
      ? [{ partition: p.partition, position: p.position, stopOffset: p.stopOffset }]
      : [],
  );
}

export function fencedMessage(
  endpoint: ReceiverEndpoint,
  fenced: { partition: number; position: string; stopOffset: string }[],
): string {
  const what = fenced
    .map((p) => `${p.partition} (at ${p.position}, stop ${p.stopOffset})`)
    .join(', ');
  return `receiver ${endpoint.name} (${endpoint.replicaSet}) had consumed past the stop offsets of partitions ${what} under an epoch that is over: it released them there and dropped the segments holding the excess, which are never handed off`;
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
      return await call(ctx, endpoint, 'fence', 'FenceFailed', (c) =>
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
const committedOf = (answer: FenceResponse, p: number): { from: bigint; to: bigint }[] =>
  (answer.committed[String(p)] ?? []).map(([from, to]) => ({ from: BigInt(from), to: BigInt(to) }));

/**
 * A failover's first phase: the lost replica sets are fenced in deep storage, through a receiver
 * of a target set (the operator has no access of its own), which then reads what each lost set had
 * committed of its partitions. Each partition restarts at its first offset not committed since its
 * epoch began, and the targets read over what the lost set committed past that (late events of a
 * window it committed): nothing is counted twice, and of its uncommitted data nothing is lost.
 */
async function fencing(ctx: ReassignContext, journal: ReassignJournal): Promise<PhaseRun> {
  const epochs = ctx.object.status?.epochs ?? {};
  const startOf = await epochStartOf(
    ctx,
    journal.moves.map((m) => m.partition),
  );
  const committed = await fenceSets(
    ctx,
    [...byTarget(journal).keys()],
    [...bySource(journal)].map(([rs, partitions]) => ({
      replicaSet: rs,
      epochs: Object.fromEntries(partitions.map((p) => [String(p), epochs[String(p)] ?? 0])),
    })),
    { id: journal.id, why: 'for a failover' },
  );
  receiverFinished('Fencing');
  const { starts, above } = restarts(journal.moves, (m) => startOf(m.partition), committed);
  ctx.event('Warning', 'FailoverStarted', failoverStartedMessage(ctx, journal, starts, above));
  return finished({
    stopOffsets: starts,
    failover: { ...journal.failover!, committedAbove: above },
  });
}

/**
 * Where each of `partitions`' current epoch began (status.epochStarts), or, not recorded (a cube
 * of before epochStarts), where it starts by spec.source.startingOffsets.
 */
async function epochStartOf(
  ctx: ReassignContext,
  partitions: number[],
): Promise<(partition: number) => bigint> {
  const epochStarts = ctx.object.status?.epochStarts ?? {};
  const unknown = partitions.filter((p) => epochStarts[String(p)] === undefined);
  const fallback = unknown.length > 0 ? await startingOffsetsOf(ctx, unknown) : new Map();
  return (p) => BigInt(epochStarts[String(p)] ?? String(fallback.get(p) ?? 0n));
}

/**
 * Where a failed-over partition restarts: its first offset from `epochStart` on that the lost set
 * did not commit, and the committed ranges past it, to be read over. `committed`: merged, sorted.
 */
export function failoverStart(
  epochStart: bigint,
  committed: { from: bigint; to: bigint }[],
): { restart: bigint; readOver: { from: bigint; to: bigint }[] } {
  let restart = epochStart;
  for (const r of committed) {
    if (r.to <= restart) continue;
    if (r.from > restart) break;
    restart = r.to;
  }
  return { restart, readOver: committed.filter((r) => r.from > restart) };
}

function failoverStartedMessage(
  ctx: ReassignContext,
  journal: ReassignJournal,
  stops: Record<string, string>,
  above: Record<string, { from: string; to: string }[]>,
): string {
  const observed = new Map((ctx.object.status?.partitions ?? []).map((p) => [p.partition, p]));
  let reread = 0n;
  let known = true;
  for (const m of journal.moves) {
    const last = observed.get(m.partition)?.position;
    if (last === undefined) {
      known = false;
      continue;
    }
    let n = BigInt(last) - BigInt(stops[String(m.partition)] ?? last);
    for (const r of above[String(m.partition)] ?? [])
      if (BigInt(r.to) <= BigInt(last)) n -= BigInt(r.to) - BigInt(r.from);
    if (n > 0n) reread += n;
  }
  const sets = journal.failover!.replicaSets;
  const skipped = Object.values(above).reduce((n, list) => n + list.length, 0);
  return `failover ${journal.id}: replica set${plural(sets, '', 's')} ${sets.join(', ')} had no ready receiver for spec.failoverAfter (${ctx.object.spec.failoverAfter}) and ${plural(sets, 'is', 'are')} fenced; ${describeMoves(journal)} restart from ${describeOffsets(stops)}, the end of what ${plural(sets, 'it', 'they')} committed: ${reread} offset${reread === 1n ? '' : 's'} re-read${known ? '' : ' (more where no position was reported)'}${skipped > 0 ? `, ${skipped} committed range${skipped === 1 ? '' : 's'} past the restart read over` : ''}`;
}

/** From here on the move only rolls forward: sources release, targets take over. */
async function starting(ctx: ReassignContext, journal: ReassignJournal): Promise<PhaseRun> {
  const lost = await fenceLostSets(ctx, journal);
  if (lost) return lost;
  // Every source releases before any target starts: a source set with no ready receiver blocks
  // the phase here (its partitions are drained and stopped, not lost) until it is back or lost.
  // A failover's sources, and sources lost here, are fenced: released when back, by convergence.
  for (const [rs, partitions] of journal.failover ? [] : liveSources(journal)) {
    for (const endpoint of sourceEndpoints(ctx, journal, rs)) {
      try {
        const pending = await releaseAtStops(
          ctx,
          endpoint,
          partitions,
          stopsOf(journal, partitions),
        );
        if (pending)
          return { finished: false, message: pending, requeueAfterMs: requeueDelayMs.drainPending };
        receiverFinished('Starting');
      } catch (error) {
        // A replica without the cube (404) holds nothing to release.
        if (!isGone(error)) throw error;
        cubeMissing(ctx, journal, endpoint);
      }
    }
  }
  const fenced = await stopFence(ctx, journal);
  if (fenced) return fenced;
  const uncommitted = await awaitReleasedCommit(ctx, journal);
  if (uncommitted) return uncommitted;
  const epochs = ctx.object.status?.epochs ?? {};
  const committedAbove = {
    ...journal.stopFence?.committedAbove,
    ...journal.lostSets?.committedAbove,
    ...journal.failover?.committedAbove,
  };
  for (const [rs, partitions] of byTarget(journal)) {
    const starts = partitions.map((p) => ({
      partition: p,
      position: journal.stopOffsets?.[String(p)] ?? '0',
      epoch: (epochs[String(p)] ?? 0) + 1,
      watermark: journal.watermarks?.[String(p)] ?? null,
      ...(committedAbove[String(p)]?.length
        ? {
            committedElsewhere: committedAbove[String(p)]!.map(
              (r) => [r.from, r.to] as [string, string],
            ),
          }
        : {}),
    }));
    try {
      for (const endpoint of endpointsOf(ctx, rs, 'target')) {
        await call(ctx, endpoint, 'assign', 'StartFailed', (c) =>
          c.assign(ctx.cube, assignRequest(ctx.object, rs, starts), ctx.signal),
        );
        receiverFinished('Starting', 'target');
      }
    } catch (error) {
      // The sources have let go: say which partitions wait, not only which call failed.
      if (!(error instanceof PhaseBlocked)) throw error;
      const sources = [
        ...new Set(journal.moves.filter((m) => m.to === rs).flatMap((m) => m.from ?? [])),
      ];
      const many = partitions.length > 1;
      throw new PhaseBlocked(
        error.reason,
        `${error.message}; partition${many ? 's' : ''} ${partitions.join(', ')}${sources.length > 0 ? ` (released by ${sources.join(', ')})` : ''} wait${many ? '' : 's'} for ${rs}`,
        { cause: error.cause },
      );
    }
  }
  return finished();
}

/** The move's sources, but for those lost in Starting (journal.lostSets): fenced instead. */
function liveSources(journal: ReassignJournal): Map<string, number[]> {
  const lost = new Set(journal.lostSets?.replicaSets ?? []);
  return new Map([...bySource(journal)].filter(([rs]) => !lost.has(rs)));
}

/**
 * Of `partitions`, those a receiver keeps offsets of that are not handed off and committed, by its
 * coverage (a partition it reports none of: none).
 */
export function keptUncommitted(
  coverage: CubeStatus['coverage'],
  partitions: Iterable<number>,
): number[] {
  const out: number[] = [];
  for (const p of partitions) {
    const c = coverage?.[String(p)];
    if (!c) continue;
    const kept = new Map([[p, rangesFromJson(c.kept)]]);
    if (!covers(new Map([[p, rangesFromJson(c.handedOff)]]), kept)) out.push(p);
  }
  return out;
}

/**
 * Before the targets start, the sources' data of the moved partitions is committed: every ready
 * replica of each source reports the offsets it keeps of them handed off and committed (its
 * coverage; the release sealed the windows holding them and handed them off at once). Until the
 * targets start, a source set lost meanwhile can still be failed over exactly (fenceLostSets:
 * its partitions restart where its committed data ends); once they consume from the stop offsets,
 * what it had not committed below them could only wait for it. Waits up to the phase timeout;
 * past it (deep storage slow or refusing), the targets start all the same, the journal and a
 * Warning say so, and such a set is not failed over while it keeps that data (FailoverBlocked).
 */
async function awaitReleasedCommit(
  ctx: ReassignContext,
  journal: ReassignJournal,
): Promise<PhaseRun | undefined> {
  if (journal.failover || journal.startedUncommitted) return undefined;
  const pending: string[] = [];
  for (const [rs, partitions] of liveSources(journal)) {
    for (const endpoint of ctx.receivers.get(rs) ?? []) {
      let status: CubeStatus;
      try {
        status = await call(ctx, endpoint, 'status', 'StartFailed', (c) =>
          c.cubeStatus(ctx.cube, ctx.signal),
        );
      } catch (error) {
        if (isGone(error)) continue; // holds nothing of the cube
        throw error;
      }
      const waiting = keptUncommitted(status.coverage, partitions);
      if (waiting.length > 0)
        pending.push(
          `${endpoint.name} (partition${plural(waiting, '', 's')} ${waiting.join(', ')})`,
        );
    }
  }
  if (pending.length === 0) return undefined;
  const message = `the sources' data of the moved partitions is not committed yet on ${pending.join(', ')}`;
  if (!overDeadline(ctx, journal))
    return { finished: false, message, requeueAfterMs: requeueDelayMs.commitPending };
  ctx.event(
    'Warning',
    'ReleasedDataUncommitted',
    `reassign ${journal.id}: ${message} after ${ctx.phaseTimeoutMs / 1000}s (deep storage slow or refusing hand-offs?): the targets start all the same; should a source set be lost before that data is committed, its partitions wait for it instead of failing over`,
  );
  return {
    finished: false,
    message,
    requeueAfterMs: requeueDelayMs.advanced,
    journal: { startedUncommitted: true },
  };
}

/**
 * A set of the move with no ready receiver for spec.failoverAfter (lost) while the targets have
 * not started on the sources' data's end (the commit they wait for), fenced in deep storage as a
 * failover fences (hand-off-commit.ts, fenceReplicaSet):
 * - as a source: every offset of its epochs of the moved partitions that it did not commit; those
 *   partitions restart from the end of what it committed (failoverStart, from where its epoch
 *   began), with what it committed past that read over. Its data below the stop offsets that was
 *   not committed is read again by the targets: nothing of it is lost, nothing it committed is
 *   counted twice.
 * - as a target: whatever it may have read of the partitions moved to it under their next epoch,
 *   from the stop offsets on; those moves go instead to their source when it is live (it takes
 *   them back under the next epoch), else to the first live set of spec.replicaSets, from past
 *   what the lost set committed.
 * Not once the targets may have started without the sources' commit (startedUncommitted): the
 * partitions then wait for the set, as before. Written to the journal before anything else of the
 * phase runs; undefined when no set of the move is lost.
 */
async function fenceLostSets(
  ctx: ReassignContext,
  journal: ReassignJournal,
): Promise<PhaseRun | undefined> {
  if (journal.failover || journal.lostSets || journal.startedUncommitted) return undefined;
  const isLost = (rs: string): boolean =>
    ctx.lostReplicaSets?.has(rs) === true && (ctx.receivers.get(rs) ?? []).length === 0;
  const sources = bySource(journal);
  const targets = byTarget(journal);
  const lost = [...new Set([...sources.keys(), ...targets.keys()])].filter(isLost).sort();
  if (lost.length === 0) return undefined;
  const live = ctx.object.spec.replicaSets.filter(
    (rs) => !isLost(rs) && (ctx.receivers.get(rs) ?? []).length > 0,
  );
  const moves = journal.moves.map((m) => {
    if (!lost.includes(m.to)) return m;
    const to = m.from !== undefined && live.includes(m.from) ? m.from : live[0];
    return to === undefined ? m : { ...m, to };
  });
  const stranded = moves.filter((m) => lost.includes(m.to)).map((m) => m.partition);
  if (stranded.length > 0)
    throw new PhaseBlocked(
      'TargetReceiverUnavailable',
      `replica set${plural(lost, '', 's')} ${lost.join(', ')} of the move ${plural(lost, 'is', 'are')} lost and no replica set of spec.replicaSets has a ready receiver to take partition${plural(stranded, '', 's')} ${stranded.join(', ')} instead`,
    );
  const epochs = ctx.object.status?.epochs ?? {};
  const epochStart = await epochStartOf(
    ctx,
    lost.flatMap((rs) => sources.get(rs) ?? []),
  );
  const stops = stopsOf(
    journal,
    journal.moves.map((m) => m.partition),
  );
  const committed = await fenceSets(
    ctx,
    live,
    lost.map((rs) => {
      const movedTo = targets.get(rs) ?? [];
      return {
        replicaSet: rs,
        epochs: Object.fromEntries([
          ...(sources.get(rs) ?? []).map((p) => [String(p), epochs[String(p)] ?? 0] as const),
          ...movedTo.map((p) => [String(p), (epochs[String(p)] ?? 0) + 1] as const),
        ]),
        from: Object.fromEntries(movedTo.map((p) => [String(p), stops[String(p)]!])),
      };
    }),
    { id: `${journal.id}-lost`, why: 'lost in Starting' },
  );
  const { starts, above } = restarts(
    journal.moves.filter(
      (m) => lost.includes(m.to) || (m.from !== undefined && lost.includes(m.from)),
    ),
    (m) =>
      m.from !== undefined && lost.includes(m.from)
        ? epochStart(m.partition)
        : BigInt(stops[String(m.partition)]!),
    committed,
  );
  for (const rs of lost) {
    const from = sources.get(rs) ?? [];
    const to = targets.get(rs) ?? [];
    const at = (ps: number[]) =>
      describeOffsets(Object.fromEntries(ps.map((p) => [String(p), starts[String(p)]!])));
    const roles = [
      ...(from.length > 0
        ? [
            `source of partition${plural(from, '', 's')} ${from.join(', ')}, whose data of ${plural(from, 'it', 'them')} was not all committed: ${plural(from, 'it restarts', 'they restart')} from ${at(from)}, the end of what it committed, instead of the stop offsets (${describeOffsets(stopsOf(journal, from))})`,
          ]
        : []),
      ...(to.length > 0
        ? [
            `target of partition${plural(to, '', 's')} ${to.join(', ')}: given instead to ${to.map((p) => moves.find((m) => m.partition === p)!.to).join(', ')}, from ${at(to)}`,
          ]
        : []),
    ];
    ctx.event(
      'Warning',
      'ReplicaSetLostInMove',
      `reassign ${journal.id}: replica set ${rs} has had no ready receiver for spec.failoverAfter (${ctx.object.spec.failoverAfter}) and is fenced; ${roles.join('; ')}`,
    );
  }
  return {
    finished: false,
    message: `replica sets ${lost.join(', ')} of the move lost: fenced, their partitions restart from what they committed`,
    requeueAfterMs: requeueDelayMs.advanced,
    journal: {
      moves,
      stopOffsets: { ...journal.stopOffsets, ...starts },
      lostSets: {
        replicaSets: lost,
        ...(Object.keys(above).length > 0 ? { committedAbove: above } : {}),
      },
    },
  };
}

/**
 * The stop fence, once the sources have released and before any target starts: a source set with
 * replicas that are not Ready missed the release with them, and such a replica may come back
 * consuming its partitions under the old epoch past the stop offsets, sealing and committing
 * windows before convergence reaches it (that excess and the new owner's data would both be
 * committed). So the set is fenced in deep storage from the stop offsets on (hand-off-commit.ts,
 * fenceReplicaSet with `from`), through a receiver of a target set, and what it had committed past
 * them already (before the fence) is where the targets start, or what they read over, as in a
 * failover. Written to the journal before the targets start; undefined when nothing is to fence
 * or the journal says it is done.
 */
async function stopFence(
  ctx: ReassignContext,
  journal: ReassignJournal,
): Promise<PhaseRun | undefined> {
  if (journal.failover || journal.stopFence) return undefined;
  const away = [...liveSources(journal)].filter(([rs]) => (ctx.notReady?.get(rs) ?? []).length > 0);
  if (away.length === 0) return undefined;
  const epochs = ctx.object.status?.epochs ?? {};
  const committed = await fenceSets(
    ctx,
    [...byTarget(journal).keys()],
    away.map(([rs, partitions]) => ({
      replicaSet: rs,
      epochs: Object.fromEntries(partitions.map((p) => [String(p), epochs[String(p)] ?? 0])),
      from: stopsOf(journal, partitions),
    })),
    { id: `${journal.id}-stop`, why: 'from the stop offsets' },
  );
  const moved = away.flatMap(([, partitions]) => partitions);
  const stops = stopsOf(journal, moved);
  const { starts, above } = restarts(
    moved.map((partition) => ({ partition })),
    (m) => BigInt(stops[String(m.partition)]!),
    committed,
  );
  const raised = Object.fromEntries(Object.entries(starts).filter(([p, o]) => o !== stops[p]));
  for (const [rs, partitions] of away) {
    const missed = ctx.notReady?.get(rs) ?? [];
    const fencedEpochs = [...new Set(partitions.map((p) => epochs[String(p)] ?? 0))];
    const mine = Object.fromEntries(
      Object.entries(raised).filter(([p]) => partitions.includes(Number(p))),
    );
    ctx.event(
      'Warning',
      'StopFenced',
      `reassign ${journal.id}: receiver${plural(missed, '', 's')} ${missed.join(', ')} of ${rs} ${plural(missed, 'is', 'are')} not Ready and missed the release of partition${plural(partitions, '', 's')} ${partitions.join(', ')}: ${rs} is fenced in deep storage from ${describeOffsets(stopsOf(journal, partitions))} under epoch${plural(fencedEpochs, '', 's')} ${fencedEpochs.join(', ')}, so what ${plural(missed, 'it reads', 'they read')} past the stop offsets is never committed${Object.keys(mine).length > 0 ? `; it had committed past them already, so the targets start at ${describeOffsets(mine)}` : ''}`,
    );
  }
  return {
    finished: false,
    message: `source replica sets ${away.map(([rs]) => rs).join(', ')} fenced from the stop offsets`,
    requeueAfterMs: requeueDelayMs.advanced,
    journal: {
      ...(Object.keys(raised).length > 0
        ? { stopOffsets: { ...journal.stopOffsets, ...raised } }
        : {}),
      stopFence: {
        replicaSets: away.map(([rs]) => rs),
        ...(Object.keys(above).length > 0 ? { committedAbove: above } : {}),
      },
    },
  };
}

/**
 * Fences each of `sets` in deep storage (hand-off-commit.ts, fenceReplicaSet: `epochs` by
 * partition, from `from`'s offsets on where given) through a ready receiver of `through` (replica
 * sets, never the one fenced), and answers what the fenced sets had committed of each partition,
 * merged.
 */
async function fenceSets(
  ctx: ReassignContext,
  through: string[],
  sets: { replicaSet: string; epochs: Record<string, number>; from?: Record<string, string> }[],
  fence: { id: string; why: string },
): Promise<Map<number, { from: bigint; to: bigint }[]>> {
  const fencers = through.flatMap((rs) => ctx.receivers.get(rs) ?? []);
  if (fencers.length === 0)
    throw new PhaseBlocked(
      'TargetReceiverUnavailable',
      `no receiver of replica sets ${through.join(', ')} is ready to fence ${sets.map((s) => s.replicaSet).join(', ')}, ${fence.why}`,
    );
  const committed = new Map<number, OffsetRange[]>();
  for (const set of sets) {
    const request: FenceRequest = {
      replicaSet: set.replicaSet,
      id: fence.id,
      partitions: set.epochs,
      ...(set.from && Object.keys(set.from).length > 0 ? { from: set.from } : {}),
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
 * Where each of `moves`' targets start — the first offset from `startOf` on that the fenced sets
 * did not commit — and the committed ranges past that, to read over (failoverStart).
 */
function restarts<M extends { partition: number }>(
  moves: M[],
  startOf: (move: M) => bigint,
  committed: ReadonlyMap<number, { from: bigint; to: bigint }[]>,
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

/**
 * A source left without any partition of the cube seals and hands off, then drops it. The seal
 * waits briefly for the hand-off; replicas are taken in order and a pass ends at the first whose hand-off is
 * still pending, re-checked on the next reconcile.
 */
async function sealing(ctx: ReassignContext, journal: ReassignJournal): Promise<PhaseRun> {
  // A failover's sources are the sets that are away: nothing to wait for.
  if (!isSourceless(journal) && !journal.failover) {
    const waiting = waitForAway(ctx, journal, 'all');
    if (waiting) return waiting;
  }
  const assignment = finalAssignment(ctx.object, journal);
  // A source set with no ready receiver blocks Done, after the other sources are sealed. A
  // failover's are fenced: convergence releases them when back, and their committed data stays.
  // So are sources lost in Starting (fenceLostSets), and one lost since: all it had of the
  // cube was released, and committed before the targets started (awaitReleasedCommit), unless
  // they started without (startedUncommitted).
  let unavailable: PhaseBlocked | undefined;
  for (const rs of journal.failover ? [] : liveSources(journal).keys()) {
    if ((assignment[rs] ?? []).length > 0) continue;
    let endpoints: ReceiverEndpoint[];
    try {
      endpoints = sourceEndpoints(ctx, journal, rs);
    } catch (error) {
      if (!(error instanceof PhaseBlocked)) throw error;
      if (ctx.lostReplicaSets?.has(rs) && !journal.startedUncommitted) continue;
      unavailable ??= error;
      continue;
    }
    for (const endpoint of endpoints) {
      let status: CubeStatus;
      try {
        status = await call(ctx, endpoint, 'seal', 'SealFailed', (c) =>
          c.seal(ctx.cube, ctx.sealPollMs, ctx.signal),
        );
      } catch (error) {
        if (isGone(error)) continue; // unassigned already
        throw error;
      }
      if (status.segments.some((s) => s.state !== 'HANDED_OFF')) {
        const message = `receiver ${endpoint.name} has segments of ${ctx.cube} not yet handed off`;
        if (inPhaseMs(ctx, journal) > ctx.handOffTimeoutMs) {
          throw new PhaseBlocked('HandOffPending', message);
        }
        return { finished: false, message, requeueAfterMs: requeueDelayMs.handOffPending };
      }
      receiverFinished('Sealing');
      await call(ctx, endpoint, 'unassign', 'UnassignFailed', (c) =>
        c.unassign(ctx.cube, false, ctx.signal),
      );
      receiverFinished('Sealing');
    }
  }
  if (unavailable) throw unavailable;
  const epochs = { ...(ctx.object.status?.epochs ?? {}) };
  const epochStarts: Record<string, string> = {};
  for (const m of journal.moves) {
    epochs[String(m.partition)] = (epochs[String(m.partition)] ?? 0) + 1;
    // Where Starting started the targets (a merge patch: the other partitions' stay).
    epochStarts[String(m.partition)] = journal.stopOffsets?.[String(m.partition)] ?? '0';
  }
  const released = releasedByMoves(ctx.object.status?.releasedUncommitted, journal, assignment);
  return finished(
    {},
    {
      assignment: mapReplacement(ctx.object.status?.assignment, assignment),
      epochs,
      epochStarts,
      ...(released ? { releasedUncommitted: released } : {}),
    },
  );
}

/**
 * status.releasedUncommitted with a move's completion: a source left with partitions seals the
 * segments holding the ones it released (cube-channel.ts, sealReleased), but what it read of them
 * is committed only once handed off (the operator's observations of the set, every 2 s until then,
 * say when). The targets start once it is (awaitReleasedCommit), so only a move whose targets
 * started without (startedUncommitted) records it. Written with the completion, so that a leader
 * taking over at once knows it too. Undefined for a failover (its sources are fenced), a move
 * whose data was committed, or when no source keeps partitions; sources lost in Starting are
 * fenced and left out.
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
    if (m.from === undefined || lost.has(m.from) || (assignment[m.from] ?? []).length === 0)
      continue;
    const held = new Set([...(out[m.from] ?? previous?.[m.from] ?? []), m.partition]);
    out[m.from] = [...held].sort((a, b) => a - b);
  }
  return Object.keys(out).length > 0 ? out : undefined;
}

/**
 * A replica that misses a move is brought to its end exactly only while the move can still say
 * where it was: Pausing waits for the sources' replicas that are not Ready (one paused late counts
 * in the stop offsets; one left out comes back consuming, and runs past them before it is reached,
 * its excess then fenced with the whole segments holding it), and Sealing for the targets' and
 * sources' (brought there with the journal's stop offsets before it is cleared). Each waits up to
 * the phase timeout; past it, the move goes on without them and a Warning says so.
 */
function waitForAway(
  ctx: ReassignContext,
  journal: ReassignJournal,
  sets: 'sources' | 'all',
): PhaseRun | undefined {
  // A set lost (no ready receiver for spec.failoverAfter) is not waited for: it is failed over.
  const named = new Set(
    journal.moves
      .flatMap((m) => [
        ...(m.from === undefined ? [] : [m.from]),
        ...(sets === 'all' ? [m.to] : []),
      ])
      .filter((rs) => !ctx.lostReplicaSets?.has(rs)),
  );
  const away = [...named].flatMap((rs) => ctx.notReady?.get(rs) ?? []);
  if (away.length === 0) return undefined;
  const who = `receiver${plural(away, '', 's')} ${away.join(', ')}`;
  if (inPhaseMs(ctx, journal) <= ctx.phaseTimeoutMs) {
    const message = `${who} of the move's replica sets ${plural(away, 'is', 'are')} not Ready: ${journal.phase} waits for ${plural(away, 'it', 'them')}, up to ${ctx.phaseTimeoutMs / 1000}s`;
    return { finished: false, message, requeueAfterMs: requeueDelayMs.replicaAway };
  }
  const { namespace = 'default', name = ctx.cube } = ctx.object.metadata ?? {};
  if (ctx.entries.tell(`${namespace}/${name}`, journal, `away ${journal.phase}`))
    ctx.event(
      'Warning',
      'ReplicaMissedMove',
      `reassign ${journal.id} goes on in ${journal.phase} without ${who}, not Ready for ${ctx.phaseTimeoutMs / 1000}s: ${plural(away, 'it is', 'they are')} brought to ${plural(away, 'its', 'their')} set's state when back, exactly if ${plural(away, 'it', 'they')} missed no more than this move`,
    );
  return undefined;
}

const runPhase: Record<
  Exclude<ReassignPhase, 'Done'>,
  (ctx: ReassignContext, journal: ReassignJournal) => Promise<PhaseRun>
> = {
  Planned: () => Promise.resolve(finished()),
  Pausing: pausing,
  Draining: draining,
  Fencing: fencing,
  Starting: starting,
  Sealing: sealing,
};

/**
 * Advances the journal by at most one phase: runs the current phase's receiver calls and, when
 * the phase is finished, persists the journal at the next phase (or, at Done, clears it). Never
 * waits long; says when to run again.
 */
export async function stepReassign(
  ctx: ReassignContext,
  journal: ReassignJournal,
): Promise<StepOutcome> {
  ctx.signal.throwIfAborted();
  const { namespace = 'default', name = ctx.cube } = ctx.object.metadata ?? {};
  if (ctx.entries.enter(`${namespace}/${name}`, journal)) ctx.onPhase(journal.phase, journal);

  if (journal.phase === 'Done') return complete(ctx, journal, {});

  let run: PhaseRun;
  try {
    run = await runPhase[journal.phase](ctx, journal);
  } catch (error) {
    if (!(error instanceof PhaseBlocked)) throw error;
    if (rollsBack.has(journal.phase) && overDeadline(ctx, journal)) {
      const outcome = await rollBack(ctx, journal, error);
      ctx.entries.forget(`${namespace}/${name}`);
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
  if (!run.finished) {
    const { message, requeueAfterMs } = run;
    if (!run.journal)
      return { kind: 'waiting', object: ctx.object, journal, message, requeueAfterMs };
    ctx.signal.throwIfAborted();
    const next: ReassignJournal = { ...journal, ...run.journal };
    const object = await ctx.persist({ reassign: next });
    return { kind: 'waiting', object, journal: next, message, requeueAfterMs };
  }
  ctx.signal.throwIfAborted();
  if (journal.phase === 'Starting' && (isSourceless(journal) || journal.failover)) {
    // Nothing to seal: the assignment and epochs are written with the journal's end.
    const sealed = await sealing(ctx, journal);
    return complete(ctx, journal, sealed.finished ? (sealed.status ?? {}) : {});
  }
  const next: ReassignJournal = {
    ...journal,
    ...run.journal,
    phase: phaseAfter(journal),
    phaseStartedAt: ctx.now().toISOString(),
  };
  const object = await ctx.persist({ ...run.status, reassign: next });
  return { kind: 'advanced', object, journal: next, requeueAfterMs: requeueDelayMs.advanced };
}

/** The journal cleared (with `status`, the assignment and epochs when not written before). */
async function complete(
  ctx: ReassignContext,
  journal: ReassignJournal,
  status: CubeAssignmentStatusPatch,
): Promise<StepOutcome> {
  const { namespace = 'default', name = ctx.cube } = ctx.object.metadata ?? {};
  const patch: CubeAssignmentStatusPatch = { ...status, reassign: null };
  const object =
    ctx.holdPlacementCompletion && isSourceless(journal) && !journal.failover
      ? ctx.holdPlacementCompletion(patch)
      : await ctx.persist(patch);
  ctx.entries.forget(`${namespace}/${name}`);
  if (journal.failover)
    ctx.event(
      'Normal',
      'FailoverCompleted',
      `failover ${journal.id} of replica set${plural(journal.failover.replicaSets, '', 's')} ${journal.failover.replicaSets.join(', ')} done: ${describeMoves(journal)}, consumed from ${describeOffsets(journal.stopOffsets ?? {})}`,
    );
  else
    ctx.event(
      'Normal',
      'ReassignCompleted',
      `reassign ${journal.id} moved ${journal.moves.length} partition(s): ${describeMoves(journal)}`,
    );
  return { kind: 'completed', object, journal, requeueAfterMs: requeueDelayMs.finished };
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
    ...(run.finished ? run.journal : {}),
    phase: 'Starting',
    phaseStartedAt: ctx.now().toISOString(),
  };
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

export function describeMoves(journal: ReassignJournal): string {
  return journal.moves.map((m) => `${m.partition} ${m.from ?? '(new)'}→${m.to}`).join(', ');
}

/** status.assignment with the journal's moves applied. */
export function finalAssignment(
  object: CubeAssignment,
  journal: ReassignJournal,
): Record<string, number[]> {
  const owners = new Map<number, string>();
  for (const [rs, partitions] of Object.entries(object.status?.assignment ?? {})) {
    for (const p of partitions) owners.set(p, rs);
  }
  for (const m of journal.moves) owners.set(m.partition, m.to);
  const out: Record<string, number[]> = {};
  for (const rs of object.spec.replicaSets) out[rs] = [];
  for (const [p, rs] of owners) (out[rs] ??= []).push(p);
  for (const list of Object.values(out)) list.sort((a, b) => a - b);
  return out;
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
      await call(ctx, endpoint, 'resume', 'ResumeFailed', (c) =>
        c.resume(ctx.cube, partitions, ctx.signal),
      ).catch((error: unknown) => {
        if (!(error instanceof PhaseBlocked)) throw error;
      });
    }
  }
  const object = await ctx.persist({ reassign: null });
  ctx.event(
    'Warning',
    'ReassignRolledBack',
    `reassign ${journal.id} rolled back in phase ${journal.phase} after ${ctx.phaseTimeoutMs / 1000}s: ${cause.event ?? cause.message}`,
  );
  const error = new PhaseBlocked(
    'ReassignRolledBack',
    `reassign ${journal.id} rolled back in ${journal.phase}: ${cause.message}`,
    { cause },
  );
  return { kind: 'rolledBack', object, journal, error, requeueAfterMs: requeueDelayMs.blocked };
}
