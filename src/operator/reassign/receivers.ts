// Every call the reassign makes to a receiver goes through here: which receivers of a set a phase
// calls, how a failed call becomes PhaseBlocked, and the crash points between two receivers.
import type { CubeAssignment, ReassignJournal, ReassignPhase } from '../../api/cube-assignment.ts';
import type { AssignCubeRequest } from '../../protocol/admin-api.ts';
import { ReceiverApiError, isStaleLeader, type ReceiverClient } from '../../protocol/client.ts';
import { faultPoint } from '../../observability/fault-injection.ts';
import type { ReceiverEndpoint } from '../discovery.ts';
import { cubeKey, recordEvent, type ReassignContext } from './context.ts';
import {
  cubeNotOnReceiver,
  receiverCallFailed,
  sourceReplicaSetUnavailable,
  targetReceiverUnavailable,
} from './messages.ts';
import { bySource } from './moves.ts';
import { PhaseBlocked } from './outcome.ts';

/** The receiver calls a reassign makes. */
export type ReassignReceiver = Pick<
  ReceiverClient,
  | 'pause'
  | 'resume'
  | 'drain'
  | 'release'
  | 'assign'
  | 'seal'
  | 'unassign'
  | 'cubeSummary'
  | 'fence'
>;

/**
 * One receiver call: aborted with the context, a failure turned into PhaseBlocked (`reason`) with
 * its cause. `what` names the call in the message.
 */
export async function callReceiver<T>(
  ctx: ReassignContext,
  endpoint: ReceiverEndpoint,
  what: string,
  reason: string,
  request: (client: ReassignReceiver) => Promise<T>,
): Promise<T> {
  ctx.signal.throwIfAborted();
  try {
    return await request(ctx.client(endpoint));
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
    throw new PhaseBlocked(reason, receiverCallFailed(what, endpoint, detail), { cause: failure });
  }
}

/**
 * `visit` for every replica set at once (or every replica of one: Starting's assigns), each in its
 * own order (elsewhere the replicas of one set stay one after the other: the crash tests stop the
 * operator between two of them); the results in the sets' order. Fails with the first failure in that order, once every set has ended: a move over
 * eight sets waited for each set's calls in turn (eight assigns of 512 partitions took 5 s).
 */
export async function eachSetAtOnce<S, T>(
  sets: Iterable<S>,
  visit: (set: S) => Promise<T>,
): Promise<T[]> {
  const outcomes = await Promise.allSettled([...sets].map(visit));
  const failed = outcomes.find((o) => o.status === 'rejected');
  if (failed) throw failed.reason;
  return outcomes.map((o) => (o as PromiseFulfilledResult<T>).value);
}

/** A refusal with this receiver status (404: lacks the cube, 409: refused in its state). */
export const answeredWith = (error: unknown, status: number): error is PhaseBlocked =>
  error instanceof PhaseBlocked && error.receiverStatus === status;

/** The receiver answered 404: it does not hold the cube, so none of its data. */
export const lacksCube = (error: unknown): boolean => answeredWith(error, 404);

/** The Ready receivers of a target set; none blocks the phase. */
export function targetEndpoints(ctx: ReassignContext, replicaSet: string): ReceiverEndpoint[] {
  const list = ctx.receivers.get(replicaSet) ?? [];
  if (list.length === 0) throw targetReceiverUnavailable(replicaSet);
  return list;
}

/**
 * The receivers of a source replica set, which a phase must call. A set with none Ready blocks the
 * phase: never skipped, since its data (drained partitions, segments to seal) is on its volumes and
 * only its own receivers can release or hand it off. The phase is retried at the blocked pace
 * until the set is back; Pausing and Draining roll back past their deadline, later phases wait,
 * and a set lost for spec.failoverAfter is fenced instead (fences/).
 */
export function sourceEndpoints(
  ctx: ReassignContext,
  journal: ReassignJournal,
  replicaSet: string,
): ReceiverEndpoint[] {
  const list = ctx.receivers.get(replicaSet) ?? [];
  if (list.length > 0) return list;
  const partitions = bySource(journal).get(replicaSet) ?? [];
  throw sourceReplicaSetUnavailable(
    ctx.cube,
    journal.phase,
    replicaSet,
    partitions,
    ctx.phaseTimeoutMs,
  );
}

/**
 * A source replica that answers 404 does not hold the cube, so none of its data: it has nothing
 * to pause, drain or release, and its sibling replicas carry the move. Reported once per reassign
 * and replica (Warning Event, log, metric); observe() brings it the cube once no reassign runs.
 */
export function reportCubeMissing(
  ctx: ReassignContext,
  journal: ReassignJournal,
  endpoint: ReceiverEndpoint,
): void {
  if (!ctx.entries.isFirstReport(cubeKey(ctx), journal, endpoint.name)) return;
  const partitions = bySource(journal).get(endpoint.replicaSet) ?? [];
  recordEvent(ctx, cubeNotOnReceiver(journal, endpoint, partitions));
  ctx.onCubeMissing(endpoint, journal);
}

/**
 * Runs `visit` on every replica of a source set; replicas that lack the cube (404) are left out.
 * When none of them holds it, the set's data is nowhere to be found: the first 404 blocks the
 * phase. Returns false when `visit` stopped the pass (a replica still under way).
 */
export async function forEachReplicaWithCube(
  ctx: ReassignContext,
  journal: ReassignJournal,
  replicaSet: string,
  visit: (endpoint: ReceiverEndpoint) => Promise<boolean>,
): Promise<boolean> {
  const missing: { endpoint: ReceiverEndpoint; error: unknown }[] = [];
  let holding = 0;
  for (const endpoint of sourceEndpoints(ctx, journal, replicaSet)) {
    try {
      if (!(await visit(endpoint))) return false;
      holding += 1;
    } catch (error) {
      if (!lacksCube(error)) throw error;
      missing.push({ endpoint, error });
    }
  }
  if (holding === 0 && missing.length > 0) throw missing[0]!.error;
  for (const { endpoint } of missing) reportCubeMissing(ctx, journal, endpoint);
  return true;
}

/**
 * A receiver has done its part of the phase: crash tests kill the operator between two. Starting's
 * targets have a point of their own (`target`): its releases may run again on each pass while the
 * sources' commit is awaited, so a count of its calls would not say which receiver came last.
 */
export function crashPointAfterReceiver(phase: ReassignPhase, side?: 'target'): void {
  faultPoint(`reassign-${phase}${side ? `-${side}` : ''}-partial`);
}

/** The cube as the receivers need it: source and schema from the spec. */
export function assignRequest(
  object: CubeAssignment,
  replicaSet: string,
  partitions: { partition: number; position: string; epoch: number; watermark?: number | null }[],
): AssignCubeRequest {
  const { brokers, topic, startingOffsets, tls, sasl, allowPlaintext } = object.spec.source;
  return {
    namespace: object.metadata?.namespace ?? 'default',
    // Secret names only: receivers read the Secrets themselves, no credential travels here.
    source: {
      brokers,
      topic,
      startingOffsets,
      ...(tls ? { tls } : {}),
      ...(sasl ? { sasl } : {}),
      ...(allowPlaintext ? { allowPlaintext } : {}),
    },
    schema: object.spec.schema,
    replicaSet,
    partitions: partitions.map((p) => ({ ...p, watermark: p.watermark ?? null })),
    ...(object.metadata?.uid ? { cubeUid: object.metadata.uid } : {}),
  };
}
