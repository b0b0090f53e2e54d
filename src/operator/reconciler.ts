// reconcile(namespace/name) for CubeAssignments: read the object and the receiver pods from the
// informer caches, then finalize, advance a journal by one phase, plan a reassign, or observe the
// receivers and write status — in that order. Every status write carries the resourceVersion
// it was computed from; the reconcile stops when its AbortSignal does (lease lost, shutdown).
import { randomBytes } from 'node:crypto';
import {
  Observable,
  PatchStrategy,
  setHeaderOptions,
  type CustomObjectsApi,
  type V1Pod,
} from '@kubernetes/client-node';
import {
  basisPointsOf,
  group,
  plural,
  version,
  type CubeAssignment,
  type CubeAssignmentStatus,
  type CubeAssignmentStatusPatch,
  type ObservedPartition,
  type ReassignJournal,
} from '../api/cube-assignment.ts';
import { cubeSpecDigest } from '../api/cube.ts';
import { setCondition, type Condition } from '../api/conditions.ts';
import { cubeSummaryOf, type CubeSummary } from '../protocol/admin-api.ts';
import {
  ReceiverApiError,
  ReceiverClient,
  isStaleLeader,
  type StaleLeaderError,
} from '../protocol/client.ts';
import type { BearerTokens } from '../protocol/token-file.ts';
import type { Logger } from '../observability/logger.ts';
import { faultPoint } from '../observability/fault-injection.ts';
import type { ReconcileResult } from './runtime/controller.ts';
import { splitObjectKey } from './runtime/informer.ts';
import { notReadyByReplicaSet, receiversByReplicaSet, type ReceiverEndpoint } from './discovery.ts';
import type { OwnWrites } from './own-writes.ts';
import { ReceiverCubes } from './receiver-cubes.ts';
import { applyMergePatch, mergePatchChanges, partitionRowsMoved } from './status-changes.ts';
import { notReadySince, unavailableSince, unavailableSincePatch } from './unavailable-since.ts';
import { planAssignment, type Problem } from './planner.ts';
import { sortedNames } from '../assign/assignment.ts';
import { parseDuration } from '../api/duration.ts';
import {
  PhaseEntries,
  assignRequest,
  describeMoves,
  describeOffsets,
  fencedMessage,
  fencedPartitions,
  newJournal,
  requeueDelayMs,
  stepReassign,
  isSourceless,
  keptUncommitted,
  placementJournal,
  PhaseBlocked,
  type ReassignContext,
} from './reassign/index.ts';
import { type TopicMetadata, startingOffsetRules } from './topic-metadata.ts';
import { classifySourceError } from '../kafka/source-security.ts';
import { mergeLostOffsets, newlyLostRanges, offsetsLostMessage } from './lost-offsets.ts';
import type { EventRecorder } from './events.ts';
import {
  type ReplicaCoverage,
  type TilingFinding,
  checkTiling,
  offsetsNotTiled,
} from './tiling.ts';
import {
  desiredAtRest,
  desiredInMove,
  noRepairs,
  replicaRepairs,
  type Repairs,
} from './replica-convergence.ts';
import {
  type OperatorMetrics,
  type PartitionReading,
  forgetCube,
  initCube,
  publishPartitions,
  setPhase,
} from './metrics.ts';
import {
  RejectedEventsWindow,
  rejectedEventsProblem,
  type RejectionDelta,
} from './rejected-events.ts';

export const finalizer = 'streamcube.io/finalizer';

export interface ReconcilerDeps {
  custom: CustomObjectsApi;
  getCube: (namespace: string, name: string) => CubeAssignment | undefined;
  listPods: (namespace: string) => V1Pod[];
  /** The receivers' admin tokens, newest first (the client falls back to an older one on 403). */
  receiverToken: BearerTokens;
  receiverPort: number;
  topics: TopicMetadata;
  events: EventRecorder;
  metrics: OperatorMetrics;
  logger: Logger;
  phaseTimeoutMs: number;
  drainTimeoutMs: number;
  resyncMs: number;
  receiverTimeoutMs: number;
  /** How far back the share of rejected records is measured (spec.rejectedEventsThreshold). */
  rejectedEventsWindowMs: number;
  /**
   * The reconciler's own writes, shared with the informer's event handler so that their watch
   * events do not requeue the cube.
   */
  ownWrites: OwnWrites<CubeAssignment>;
  /** This process's leader term, sent with every mutating receiver call (undefined: none). */
  leaderTerm?: () => number | undefined;
  /** A receiver refused a call as coming from a stale leader: this process must stop leading. */
  onStaleLeader?: (error: StaleLeaderError) => void;
}

/** How long one drain call waits on a receiver; a drain not done by then is polled again. */
const drainPollMs = 250;
/** How long one seal call waits for the hand-off; one not done by then is polled again. */
const sealPollMs = 250;
/** How long a hand-off may stay pending in Sealing before it is reported (HandOffPending). */
const handOffTimeoutMs = 30_000;

/** Options of a merge patch request, aborted by `signal` when there is one. */
function mergePatch(signal?: AbortSignal) {
  if (!signal) return setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
  return setHeaderOptions('Content-Type', PatchStrategy.MergePatch, {
    middleware: [
      {
        pre: (request) => {
          request.setSignal(signal);
          return new Observable(Promise.resolve(request));
        },
        post: (response) => new Observable(Promise.resolve(response)),
      },
    ],
    middlewareMergeStrategy: 'append',
  });
}

/**
 * Partitions `owned` lacks of which any of the reports keeps offsets not handed off and committed
 * (coverage kept beyond handedOff): a set's data of partitions moved away, still to be committed.
 */
export function partitionsReleasedUncommitted(
  reports: Pick<CubeSummary, 'coverage' | 'partitions'>[],
  owned: readonly number[],
): number[] {
  const out = new Set<number>();
  for (const report of reports) {
    const released = Object.keys(report.coverage ?? {})
      .map(Number)
      .filter((p) => !owned.includes(p));
    for (const p of keptUncommitted(report.coverage, released)) out.add(p);
  }
  return [...out].sort((a, b) => a - b);
}

/**
 * The merge patch of status.releasedUncommitted: what this process observed of a replica set
 * (`observed`, by set) replaces what status says; a set it has not observed (gone since before it
 * led) keeps what status says, and a set neither listed nor assigned any more is dropped.
 * Undefined when nothing changes.
 */
export function releasedUncommittedPatch(
  previous: Readonly<Record<string, readonly number[]>> | undefined,
  observed: ReadonlyMap<string, readonly number[]>,
  sets: ReadonlySet<string>,
): Record<string, number[] | null> | undefined {
  const patch: Record<string, number[] | null> = {};
  for (const rs of new Set([...Object.keys(previous ?? {}), ...observed.keys()])) {
    const before = previous?.[rs];
    const after = sets.has(rs) ? (observed.get(rs) ?? before) : undefined;
    const same =
      (before ?? []).length === (after ?? []).length &&
      (before ?? []).every((p, i) => after?.[i] === p);
    if (same) continue;
    patch[rs] = after?.length ? [...after] : null;
  }
  return Object.keys(patch).length > 0 ? patch : undefined;
}

export function createCubeReconciler(deps: ReconcilerDeps) {
  const clients = new Map<string, ReceiverClient>();
  /** The receiver's client for the cubes of the object's namespace. */
  const clientFor = (endpoint: ReceiverEndpoint, object: CubeAssignment): ReceiverClient =>
    clientAt(endpoint.baseUrl).inNamespace(object.metadata?.namespace ?? 'default');
  const clientAt = (baseUrl: string): ReceiverClient => {
    let c = clients.get(baseUrl);
    if (!c) {
      c = new ReceiverClient(baseUrl, deps.receiverToken, deps.receiverTimeoutMs, {
        onMutation: (cube) => receiverCubes.changedOn(baseUrl, cube),
        ...(deps.leaderTerm ? { term: deps.leaderTerm } : {}),
        ...(deps.onStaleLeader ? { onStaleLeader: deps.onStaleLeader } : {}),
      });
      clients.set(baseUrl, c);
    }
    return c;
  };
  /**
   * One GET /v1/cubes per receiver per resync, shared by all its cubes, of every namespace; a
   * cube changed since is read alone.
   */
  const receiverCubes = new ReceiverCubes(
    {
      list: async (baseUrl) => (await clientAt(baseUrl).cubes()).cubes,
      one: async (baseUrl, key, signal) => {
        try {
          return cubeSummaryOf(
            await clientAt(baseUrl).inNamespace(key.namespace).cubeStatus(key.name, signal),
          );
        } catch (error) {
          if (error instanceof ReceiverApiError && error.status === 404) return undefined;
          throw error;
        }
      },
    },
    { maxAgeMs: deps.resyncMs },
  );
  /** The cube as the receiver last reported it; undefined when the receiver does not hold it. */
  const cubeOn = (
    endpoint: ReceiverEndpoint,
    object: CubeAssignment,
    cube: string,
    signal: AbortSignal,
  ): Promise<CubeSummary | undefined> =>
    receiverCubes.get(
      endpoint.baseUrl,
      { namespace: object.metadata?.namespace ?? 'default', name: cube },
      signal,
    );
  /** Per cube key, when live positions were last written to status (Date.now()). */
  const positionsWrittenAt = new Map<string, number>();
  /** Receivers' record counters over the last minutes, per cube key and receiver. */
  const rejections = new RejectedEventsWindow(deps.rejectedEventsWindowMs);
  /** Per cube key, the text of the last Degraded Event, to record the next only when it changes. */
  const degradedEvents = new Map<string, string>();

  // The informer may not have this reconciler's last write yet when the cube runs again.
  const { ownWrites } = deps;

  /** Writes status when the patch changes it; a patch that changes nothing is not sent. */
  async function patchStatus(
    object: CubeAssignment,
    status: CubeAssignmentStatusPatch,
    signal?: AbortSignal,
  ): Promise<CubeAssignment> {
    if (!mergePatchChanges(object.status, status)) return object;
    const { namespace = 'default', name = '', resourceVersion } = object.metadata ?? {};
    const updated = (await deps.custom.patchNamespacedCustomObjectStatus(
      { group, version, namespace, plural, name, body: { metadata: { resourceVersion }, status } },
      mergePatch(signal),
    )) as CubeAssignment;
    return ownWrites.wrote(object, updated);
  }

  async function patchFinalizers(
    object: CubeAssignment,
    finalizers: string[],
    signal: AbortSignal,
  ): Promise<CubeAssignment> {
    const { namespace = 'default', name = '', resourceVersion } = object.metadata ?? {};
    const updated = (await deps.custom.patchNamespacedCustomObject(
      {
        group,
        version,
        namespace,
        plural,
        name,
        body: { metadata: { resourceVersion, finalizers } },
      },
      mergePatch(signal),
    )) as CubeAssignment;
    return ownWrites.wrote(object, updated);
  }

  function conditionsWith(
    object: CubeAssignment,
    updates: Omit<Condition, 'lastTransitionTime' | 'observedGeneration'>[],
  ): Condition[] {
    let conditions = object.status?.conditions;
    for (const u of updates) {
      conditions = setCondition(
        conditions,
        {
          ...u,
          ...(object.metadata?.generation === undefined
            ? {}
            : { observedGeneration: object.metadata.generation }),
        },
        new Date(),
      );
    }
    return conditions ?? [];
  }

  /**
   * Degraded=True with the problems; an Event when the reason or the Event's text is new. The text
   * leaves out figures that change with every observation (Problem.event), or each resync would
   * record an Event.
   */
  function degraded(
    object: CubeAssignment,
    problems: Problem[],
  ): Omit<Condition, 'lastTransitionTime' | 'observedGeneration'> {
    const key = `${object.metadata?.namespace ?? 'default'}/${object.metadata?.name ?? ''}`;
    if (problems.length === 0) {
      degradedEvents.delete(key);
      return {
        type: 'Degraded',
        status: 'False',
        reason: 'AsExpected',
        message: 'no problem found',
      };
    }
    const reason = problems[0]!.reason;
    const message = problems.map((p) => p.message).join('; ');
    const text = problems.map((p) => p.event ?? p.message).join('; ');
    const previous = object.status?.conditions?.find((c) => c.type === 'Degraded');
    const told = degradedEvents.get(key);
    // A restarted operator has no text in memory: the condition's message stands for it, unless
    // that message carries changing figures.
    const changed =
      told === undefined
        ? previous?.message !== message && problems.every((p) => p.event === undefined)
        : told !== text;
    if (previous?.status !== 'True' || previous.reason !== reason || changed) {
      deps.events.record(object, 'Warning', reason, text);
    }
    degradedEvents.set(key, text);
    return { type: 'Degraded', status: 'True', reason, message };
  }

  /**
   * Before the object goes, every receiver that has the cube releases it, seals, hands off and
   * drops it. A replica set that may hold its data (one of the assignment, or a target a reassign
   * already started) but has no ready receiver holds the deletion up, Degraded, rather than lose it.
   */
  async function finalize(
    object: CubeAssignment,
    receivers: Map<string, ReceiverEndpoint[]>,
    cube: string,
    signal: AbortSignal,
  ): Promise<ReconcileResult | void> {
    const assignment = object.status?.assignment ?? {};
    const targets = (object.status?.reassign?.moves ?? []).map((m) => m.to);
    const holders = new Set([
      ...Object.entries(assignment)
        .filter(([, ps]) => ps.length > 0)
        .map(([rs]) => rs),
      ...targets,
    ]);
    const away = [...holders].filter((rs) => (receivers.get(rs) ?? []).length === 0).sort();
    if (away.length > 0) {
      const many = away.length > 1;
      const message = `deletion waits for replica set${many ? 's' : ''} ${away.join(', ')}: ${many ? 'they hold' : 'it holds'} data of the cube but ha${many ? 've' : 's'} no ready receiver to hand it off (remove the finalizer ${finalizer} to delete without handing off)`;
      const problem = { reason: 'FinalizeBlocked', message };
      await patchStatus(
        object,
        {
          conditions: conditionsWith(object, [
            degraded(object, [problem]),
            { type: 'Ready', status: 'False', reason: problem.reason, message },
          ]),
        },
        signal,
      );
      return { requeueAfterMs: 2_000 };
    }
    // Each receiver says what it holds: a reassign cut short leaves partitions on a target that
    // status.assignment does not name yet.
    const replicaSets = new Set([
      ...Object.keys(assignment),
      ...object.spec.replicaSets,
      ...targets,
    ]);
    // The seal waits briefly for the hand-off; a receiver whose hand-off is still pending is asked
    // again on the next reconcile instead of holding a worker until it is done.
    let handOffPending = false;
    for (const rs of replicaSets) {
      for (const endpoint of receivers.get(rs) ?? []) {
        const client = clientFor(endpoint, object);
        try {
          const held = (await client.cubeStatus(cube, signal)).partitions
            .filter((p) => p.state !== 'released')
            .map((p) => p.partition);
          if (held.length > 0) await client.release(cube, held, signal);
          const sealed = await client.seal(cube, sealPollMs, signal);
          if (sealed.segments.some((s) => s.state !== 'HANDED_OFF')) {
            handOffPending = true;
            continue;
          }
          await client.unassign(cube, false, signal);
        } catch (error) {
          if (error instanceof ReceiverApiError && error.status === 404) continue;
          throw error;
        }
      }
    }
    if (handOffPending) return { requeueAfterMs: requeueDelayMs.handOffPending };
    deps.events.record(
      object,
      'Normal',
      'Finalized',
      'sealed and handed off the cube on every receiver, then unassigned it',
    );
    await patchFinalizers(
      object,
      (object.metadata?.finalizers ?? []).filter((f) => f !== finalizer),
      signal,
    );
  }

  /**
   * The Kafka consumer of one receiver is down: its partitions are not read there, whatever the
   * other replicas do. The message names the receiver and the error, and no changing figure.
   */
  function consumerFailed(
    receiver: string,
    replicaSet: string,
    status: CubeSummary,
    owned: number[],
  ): Problem | undefined {
    const { consumer } = status;
    if (consumer.state !== 'failed') return undefined;
    const failed = status.partitions
      .filter((p) => p.state === 'failed' && owned.includes(p.partition))
      .map((p) => p.partition);
    const error = consumer.error ? `${consumer.error.name}: ${consumer.error.message}` : 'unknown';
    const since = consumer.failedSince ? ` since ${consumer.failedSince}` : '';
    const where =
      failed.length > 0
        ? `; partition${failed.length > 1 ? 's' : ''} ${failed.join(', ')} not read there`
        : '';
    return {
      // A refused password or an untrusted certificate, as the receiver reported its error.
      reason: (consumer.error && classifySourceError(consumer.error)) ?? 'ConsumerFailed',
      message: `the Kafka consumer of receiver ${receiver} (${replicaSet}) has failed${since}: ${error}${where}; the receiver restarts it with backoff`,
    };
  }

  /**
   * Brings every receiver that holds the cube to the spec's source (the CRD keeps topic and schema
   * immutable, so only brokers and starting offsets change): an assign with no partitions makes
   * a receiver reopen the cube through the new source from its checkpoint. Returns the receivers
   * that do not run it yet; observedGeneration must not move while there are any.
   */
  async function rollOutSpec(
    object: CubeAssignment,
    cube: string,
    receivers: Map<string, ReceiverEndpoint[]>,
    wanted: string,
    signal: AbortSignal,
  ): Promise<Problem[]> {
    const replicaSets = new Set([
      ...Object.keys(object.status?.assignment ?? {}),
      ...object.spec.replicaSets,
    ]);
    const problems: Problem[] = [];
    for (const rs of replicaSets) {
      for (const endpoint of receivers.get(rs) ?? []) {
        try {
          const status = await cubeOn(endpoint, object, cube, signal);
          if (status === undefined) continue; // holds none of it
          if (status.specDigest !== wanted)
            await clientFor(endpoint, object).assign(cube, assignRequest(object, rs, []), signal);
        } catch (error) {
          signal.throwIfAborted();
          if (isStaleLeader(error)) throw error;
          problems.push({
            reason: 'SpecNotRolledOut',
            message: `receiver ${endpoint.name} (${rs}) does not run generation ${object.metadata?.generation ?? 0} of the spec yet: ${(error as Error).message}`,
          });
        }
      }
    }
    return problems;
  }

  /**
   * Repair: a replica of a set that does not hold the cube (its volume replaced, a replica added
   * to the set) gets it as a target of a move would, with the set's partitions at the positions,
   * epochs and watermarks of a sibling replica whose consumer runs. Its data before those
   * positions is not re-read: the sibling's copy is the data of that range. No sibling to copy
   * from, a suspended cube, or a failed call: reported as CubeNotOnReceiver. On success the
   * replica's report joins `reports`.
   */
  async function restoreCube(
    object: CubeAssignment,
    cube: string,
    endpoint: ReceiverEndpoint,
    owned: number[],
    reports: { receiver: string; status: CubeSummary }[],
    signal: AbortSignal,
  ): Promise<Problem | undefined> {
    const rs = endpoint.replicaSet;
    const lacks = `receiver ${endpoint.name} (${rs}) does not hold the cube, though partitions ${owned.join(', ')} are assigned to its replica set`;
    const sibling = reports.find((r) => r.status.consumer.state === 'running');
    if (!sibling || object.spec.suspend) return { reason: 'CubeNotOnReceiver', message: lacks };
    const epochs = object.status?.epochs ?? {};
    const starts = sibling.status.partitions
      .filter((p) => owned.includes(p.partition) && p.state !== 'released')
      .map((p) => ({
        partition: p.partition,
        position: p.position,
        epoch: epochs[String(p.partition)] ?? p.epoch,
        watermark: p.watermark,
      }));
    try {
      // The shared read may be up to a resync old: ask the receiver itself before giving it the
      // cube, so that a replica that holds the cube is never reset to its sibling's positions.
      const held = await clientFor(endpoint, object)
        .cubeStatus(cube, signal)
        .catch((error: unknown) => {
          if (error instanceof ReceiverApiError && error.status === 404) return undefined;
          throw error;
        });
      if (held) {
        reports.push({ receiver: endpoint.name, status: cubeSummaryOf(held) });
        return undefined;
      }
      const status = cubeSummaryOf(
        await clientFor(endpoint, object).assign(cube, assignRequest(object, rs, starts), signal),
      );
      reports.push({ receiver: endpoint.name, status });
    } catch (error) {
      signal.throwIfAborted();
      if (isStaleLeader(error)) throw error;
      return {
        reason: 'CubeNotOnReceiver',
        message: `${lacks}; giving it the cube failed: ${(error as Error).message}`,
      };
    }
    deps.metrics.replicaCubeRestored.inc({ cube, replica_set: rs });
    const at = starts.map((p) => `${p.partition} at ${p.position}`).join(', ');
    deps.logger.info('cube restored on a replica', {
      cube,
      receiver: endpoint.name,
      replicaSet: rs,
      at,
    });
    deps.events.record(
      object,
      'Normal',
      'CubeRestoredOnReceiver',
      `receiver ${endpoint.name} (${rs}) did not hold the cube: given partition${starts.length > 1 ? 's' : ''} ${at}, the positions of ${sibling.receiver}`,
    );
    return undefined;
  }

  /**
   * One replica's repairs (replica-convergence.ts), made in order: releases at the stop offsets,
   * drains short of them, assigns, resumes, pauses, then the seal of a replica whose set owns
   * nothing. Each kind made is counted, and the whole told in one Event. Returns a problem when
   * a call failed or something could not be decided, and whether a drain or a hand-off is still
   * under way.
   */
  async function repairReplica(
    object: CubeAssignment,
    cube: string,
    endpoint: ReceiverEndpoint,
    repairs: Repairs,
    signal: AbortSignal,
  ): Promise<{ problem?: Problem; pending: boolean }> {
    const rs = endpoint.replicaSet;
    const where = `receiver ${endpoint.name} (${rs})`;
    const unresolved = repairs.unresolved.map((u) => `partition ${u.partition} ${u.reason}`);
    const notConverged = (detail: string): Problem => ({
      reason: 'ReplicaNotConverged',
      message: `${where} is not at its replica set's state for the cube: ${detail}`,
      // Its siblings carry the set's partitions; the cube is still consumed.
      keepsReady: true,
    });
    if (noRepairs(repairs)) {
      return unresolved.length > 0
        ? { problem: notConverged(unresolved.join('; ')), pending: false }
        : { pending: false };
    }
    const client = clientFor(endpoint, object);
    const done: string[] = [];
    let pending = false;
    const made = (repair: string, what: string): void => {
      deps.metrics.replicaRepairs.inc({ cube, replica_set: rs, repair });
      done.push(what);
    };
    const list = (ps: number[]): string => `partition${ps.length > 1 ? 's' : ''} ${ps.join(', ')}`;
    let failure: unknown;
    try {
      if (repairs.release) {
        const { partitions, stopOffsets } = repairs.release;
        const answer = await client.release(cube, partitions, signal, stopOffsets);
        const fenced = fencedPartitions(answer.partitions);
        if (fenced.length > 0) {
          deps.metrics.replicaRepairs.inc({ cube, replica_set: rs, repair: 'fence' });
          deps.events.record(object, 'Warning', 'ExcessFenced', fencedMessage(endpoint, fenced));
        }
        made(
          'release',
          `released ${list(partitions)} at the offsets their owners start from (${describeOffsets(stopOffsets)})`,
        );
      }
      if (repairs.drain) {
        const answer = await client.drain(
          cube,
          { stopOffsets: repairs.drain, timeoutMs: drainPollMs },
          signal,
        );
        pending ||= !answer.done;
        made(
          'drain',
          `drained ${describeOffsets(repairs.drain)} (the stop offsets of a move it missed)`,
        );
      }
      if (repairs.assign.length > 0) {
        await client.assign(cube, assignRequest(object, rs, repairs.assign), signal);
        const given = repairs.assign.map(
          (p) => `${p.partition} at ${p.position} (epoch ${p.epoch})`,
        );
        made('assign', `assigned ${given.join(', ')}`);
      }
      if (repairs.resume.length > 0) {
        await client.resume(cube, repairs.resume, signal);
        made('resume', `resumed ${list(repairs.resume)}`);
      }
      if (repairs.pause.length > 0) {
        await client.pause(cube, repairs.pause, signal);
        made('pause', `paused ${list(repairs.pause)}, which its set does not own`);
      }
      if (repairs.seal) {
        const sealed = await client.seal(cube, sealPollMs, signal);
        if (sealed.segments.some((s) => s.state !== 'HANDED_OFF')) {
          pending = true;
        } else {
          await client.unassign(cube, false, signal);
          made('seal', 'sealed, handed off and dropped the cube, of which its set owns nothing');
        }
      }
    } catch (error) {
      signal.throwIfAborted();
      if (isStaleLeader(error)) throw error;
      failure = error;
    }
    if (done.length > 0) {
      const text = `${where} brought to its replica set's state: ${done.join('; ')}`;
      deps.logger.info('replica repaired', {
        cube,
        receiver: endpoint.name,
        replicaSet: rs,
        repairs: done.join('; '),
      });
      deps.events.record(object, 'Normal', 'ReplicaRepaired', text);
    }
    const problems = [...unresolved];
    if (failure !== undefined) problems.push(`a repair failed: ${(failure as Error).message}`);
    return problems.length > 0
      ? { problem: notConverged(problems.join('; ')), pending }
      : { pending };
  }

  /**
   * Per-replica convergence (DESIGN §4): every ready replica of every replica set that holds the
   * cube is set against the state its set should be in — status.assignment and epochs at rest, or
   * the moves of a journal past Starting — and brought there. One shared summary per receiver.
   * Replicas that do not hold the cube are observe's (restoreCube); unreachable ones too.
   */
  async function convergeReplicas(
    object: CubeAssignment,
    cube: string,
    receivers: Map<string, ReceiverEndpoint[]>,
    journal: ReassignJournal | undefined,
    signal: AbortSignal,
  ): Promise<{ problems: Problem[]; pending: boolean }> {
    const assignment = object.status?.assignment ?? {};
    const epochs = object.status?.epochs ?? {};
    const problems: Problem[] = [];
    let pending = false;
    for (const [rs, endpoints] of receivers) {
      const reports: { endpoint: ReceiverEndpoint; status: CubeSummary | undefined }[] = [];
      for (const endpoint of endpoints) {
        try {
          const status = await cubeOn(endpoint, object, cube, signal);
          // At rest, observe restores a replica that lacks the cube (restoreCube); in a move,
          // a target replica that lacks it takes the moving partitions from the stop offsets.
          if (status || journal) reports.push({ endpoint, status });
        } catch (error) {
          signal.throwIfAborted();
          if (isStaleLeader(error)) throw error;
        }
      }
      for (const { endpoint, status } of reports) {
        const held = status?.partitions ?? [];
        const siblings = reports.flatMap((r) =>
          r.endpoint === endpoint || !r.status
            ? []
            : [{ running: r.status.consumer.state === 'running', partitions: r.status.partitions }],
        );
        const view = { epochs, epochStarts: object.status?.epochStarts ?? {}, siblings };
        const desired = journal
          ? desiredInMove(journal, assignment, rs, held, view)
          : desiredAtRest(assignment, rs, held, view);
        const repairs = replicaRepairs(held, desired, {
          suspended: object.spec.suspend === true,
          ownsNothing: !journal && (assignment[rs] ?? []).length === 0,
        });
        const outcome = await repairReplica(object, cube, endpoint, repairs, signal);
        if (outcome.problem) problems.push(outcome.problem);
        pending ||= outcome.pending;
      }
    }
    return { problems, pending };
  }

  /**
   * Replica sets that own no partition of the cube while a ready replica of theirs still holds one
   * (not released): convergence hands those over before the set is given any (planner).
   */
  async function stillHolding(
    object: CubeAssignment,
    cube: string,
    receivers: Map<string, ReceiverEndpoint[]>,
    notReady: Map<string, string[]>,
    signal: AbortSignal,
  ): Promise<Set<string>> {
    const out = new Set<string>();
    const assignment = object.status?.assignment ?? {};
    const namespace = object.metadata?.namespace ?? 'default';
    for (const [rs, endpoints] of receivers) {
      if ((assignment[rs] ?? []).length > 0) continue;
      // A set failed over waits for every pod of it: one still coming back holds the fenced
      // epochs too, and a partition assigned over them would share segments with their data.
      const returning = failedOverSets.has(`${namespace}/${cube}/${rs}`);
      if (returning && (notReady.get(rs) ?? []).length > 0) {
        out.add(rs);
        continue;
      }
      for (const endpoint of endpoints) {
        const status = await cubeOn(endpoint, object, cube, signal).catch((error: unknown) => {
          signal.throwIfAborted();
          if (isStaleLeader(error)) throw error;
          return undefined;
        });
        if (status?.partitions.some((p) => p.state !== 'released')) out.add(rs);
      }
      if (returning && !out.has(rs)) failedOverSets.delete(`${namespace}/${cube}/${rs}`);
    }
    return out;
  }

  async function observe(
    object: CubeAssignment,
    cube: string,
    receivers: Map<string, ReceiverEndpoint[]>,
    partitions: number[] | undefined,
    /** cubeSpecDigest of the spec: a receiver reporting another one is brought to it. */
    specDigest: string,
    signal: AbortSignal,
  ): Promise<{
    status: CubeAssignmentStatusPatch;
    unowned: number[];
    problems: Problem[];
    /** ConsumerFailed, one per receiver whose consumer is down. */
    failed: Problem[];
    rejected: RejectionDelta[];
    /** Gaps and overlaps across the replicas' copies (meaningful at rest only). */
    tiling: TilingFinding[];
  }> {
    const assignment = object.status?.assignment ?? {};
    const coverages: ReplicaCoverage[] = [];
    const key = `${object.metadata?.namespace ?? 'default'}/${cube}`;
    const labels = { namespace: object.metadata?.namespace ?? 'default', cube };
    const partitionRows: ObservedPartition[] = [];
    const readings: PartitionReading[] = [];
    const segments = { active: 0, immutable: 0, handedOff: 0 };
    const problems: Problem[] = [];
    const failed: Problem[] = [];
    const consuming = new Set<number>();
    const rejected: RejectionDelta[] = [];
    const observedReceivers = new Set<string>();
    let totalLag = 0n;
    for (const [rs, owned] of Object.entries(assignment)) {
      if (owned.length === 0) continue;
      // Every replica's report counts for failures and rejections; one replica's for positions.
      const reports: { receiver: string; status: CubeSummary }[] = [];
      const missing: ReceiverEndpoint[] = [];
      // A set keeping data of partitions moved away is read afresh, not at the resync: the
      // commit of that data (sealed at the release) is what lets the set be failed over.
      const awaitingCommit = (
        releasedUncommitted.get(`${key}/${rs}`) ??
        object.status?.releasedUncommitted?.[rs] ??
        []
      ).length;
      for (const endpoint of receivers.get(rs) ?? []) {
        const client = clientFor(endpoint, object);
        try {
          if (awaitingCommit > 0)
            receiverCubes.changedOn(endpoint.baseUrl, {
              namespace: object.metadata?.namespace ?? 'default',
              name: cube,
            });
          let status = await cubeOn(endpoint, object, cube, signal);
          if (status === undefined) {
            missing.push(endpoint);
            continue;
          }
          // Repair: a receiver that restarted from an older checkpoint runs an older source.
          if (status.specDigest !== specDigest)
            status = cubeSummaryOf(
              await client.assign(cube, assignRequest(object, rs, []), signal),
            );
          reports.push({ receiver: endpoint.name, status });
        } catch (error) {
          signal.throwIfAborted();
          if (isStaleLeader(error)) throw error;
          problems.push({
            reason: 'ReceiverUnreachable',
            message: `receiver ${endpoint.name} (${rs}) did not answer: ${(error as Error).message}`,
          });
        }
      }
      for (const endpoint of missing) {
        const problem = await restoreCube(object, cube, endpoint, owned, reports, signal);
        if (problem) problems.push(problem);
      }
      const now = Date.now();
      for (const { receiver, status } of reports) {
        for (const p of status.partitions) {
          if (!owned.includes(p.partition)) continue;
          if (p.state === 'consuming' || p.state === 'draining') consuming.add(p.partition);
        }
        const failure = consumerFailed(receiver, rs, status, owned);
        if (failure) failed.push(failure);
        observedReceivers.add(receiver);
        const delta = rejections.observe(key, { name: receiver, replicaSet: rs }, now, {
          ingested: status.ingested,
          rejected: status.rejected,
        });
        if (delta) rejected.push(delta);
        coverages.push({
          receiver,
          replicaSet: rs,
          coverage: status.coverage,
          // Offsets a fenced set committed, read over here (a failover), are accounted as lost
          // ones are: in no segment of this replica, and no gap.
          lost: new Map(
            status.partitions.map((p) => [
              p.partition,
              [
                ...(p.lostRanges ?? []),
                ...(status.coverage?.[String(p.partition)]?.elsewhere ?? []),
              ].map(([from, to]) => ({ from: BigInt(from), to: BigInt(to) })),
            ]),
          ),
        });
      }
      if (reports.length > 0)
        releasedUncommitted.set(
          `${key}/${rs}`,
          partitionsReleasedUncommitted(
            reports.map((r) => r.status),
            owned,
          ),
        );
      // Positions from a replica whose consumer runs: a failed one's are frozen.
      const report = (reports.find((r) => r.status.consumer.state === 'running') ?? reports[0])
        ?.status;
      if (!report) continue;
      for (const p of report.partitions) {
        if (!owned.includes(p.partition)) continue;
        // Every replica's losses: one that was down longer than the others may have lost more.
        const lost = mergeLostOffsets(
          reports.flatMap((r) => r.status.partitions.filter((q) => q.partition === p.partition)),
        );
        partitionRows.push({
          partition: p.partition,
          replicaSet: rs,
          position: p.position,
          ...(p.highWatermark === null ? {} : { highWatermark: p.highWatermark }),
          ...(p.lag === null ? {} : { lag: p.lag }),
          ...lost,
        });
        if (p.lag !== null) totalLag += BigInt(p.lag);
        readings.push({
          partition: p.partition,
          position: p.position,
          ...(p.lag === null ? {} : { lag: p.lag }),
        });
      }
      segments.active += report.segments.active;
      segments.immutable += report.segments.immutable;
      segments.handedOff += report.segments.handedOff;
    }
    rejections.retain(key, observedReceivers);
    const unowned = (partitions ?? []).filter((p) => !consuming.has(p));
    publishPartitions(deps.metrics, { ...labels, topic: object.spec.source.topic }, readings);
    deps.metrics.partitionsUnassigned.set(labels, unowned.length);
    for (const [state, n] of Object.entries(segments))
      deps.metrics.segments.set({ ...labels, state }, n);
    partitionRows.sort((a, b) => a.partition - b.partition);
    const tiling = checkTiling(coverages, object.status?.epochStarts ?? {});
    for (const row of partitionRows) {
      const to = tiling.handedOffTo.get(row.partition);
      if (to !== undefined) row.handedOffTo = to.toString();
    }
    return {
      status: { partitions: partitionRows, totalLag: totalLag.toString(), segments },
      unowned,
      problems,
      failed,
      rejected,
      tiling: tiling.findings,
    };
  }

  // Which phase of a reassign this process last started, per cube: announced once per entry.
  const phaseEntries = new PhaseEntries();
  /**
   * Per `<namespace>/<replica set>`, since when it has had no ready receiver, as this process saw
   * it; a failover waits spec.failoverAfter from then, or from status.unavailableSince, what an
   * earlier leader saw (unavailable-since.ts).
   */
  const awaySince = new Map<string, number>();
  /**
   * Per `<namespace>/<cube>/<replica set>`, as last observed of its replicas: partitions the set
   * no longer owns of which it keeps data not committed yet (a partition moved away within its
   * windows still open). A failover re-reads only the partitions a lost set owns, and the fence
   * keeps its copies holding those from being committed: so such a set is not failed over.
   */
  const releasedUncommitted = new Map<string, number[]>();
  /** `<namespace>/<cube>/<replica set>` failed over by this process and not wholly back yet. */
  const failedOverSets = new Set<string>();

  /**
   * The replica sets holding partitions of the cube that have had no ready receiver for longer
   * than spec.failoverAfter (lost), when the others without one will be, and since when each set
   * holding partitions has had none (for status.unavailableSince).
   */
  const lostReplicaSets = (
    object: CubeAssignment,
    available: ReadonlySet<string>,
    pods: readonly V1Pod[],
  ): {
    lost: Set<string>;
    failoverAt: Map<string, number>;
    blocked: Map<string, number[]>;
    since: Map<string, number>;
  } => {
    const namespace = object.metadata?.namespace ?? 'default';
    const now = Date.now();
    const afterMs = parseDuration(object.spec.failoverAfter) ?? 300_000;
    const lost = new Set<string>();
    const failoverAt = new Map<string, number>();
    const blocked = new Map<string, number[]>();
    const awayFrom = new Map<string, number>();
    // Read from the pods only when a set is away: most reconciles find every set available.
    let podsNotReady: Map<string, number> | undefined;
    const sets = new Set([
      ...object.spec.replicaSets,
      ...Object.keys(object.status?.assignment ?? {}),
    ]);
    for (const rs of sets) {
      const key = `${namespace}/${rs}`;
      if (available.has(rs)) {
        awaySince.delete(key);
        continue;
      }
      const seen = awaySince.get(key) ?? now;
      awaySince.set(key, seen);
      if (!(object.status?.assignment?.[rs] ?? []).length) continue;
      const since = unavailableSince(
        seen,
        object.status?.unavailableSince?.[rs],
        (podsNotReady ??= notReadySince(pods)).get(rs),
      );
      awayFrom.set(rs, since);
      // A new leader knows a set gone since before it started from status alone.
      const released =
        releasedUncommitted.get(`${namespace}/${object.metadata?.name}/${rs}`) ??
        object.status?.releasedUncommitted?.[rs];
      if (now - since < afterMs) failoverAt.set(rs, since + afterMs);
      else if (released?.length) blocked.set(rs, released);
      else lost.add(rs);
    }
    return { lost, failoverAt, blocked, since: awayFrom };
  };

  return async function reconcile(
    key: string,
    signal: AbortSignal,
  ): Promise<ReconcileResult | void> {
    const { namespace = 'default', name } = splitObjectKey(key);
    const cached = ownWrites.read(key, deps.getCube(namespace, name));
    if (!cached) {
      rejections.forget(`${namespace}/${name}`);
      degradedEvents.delete(`${namespace}/${name}`);
      positionsWrittenAt.delete(`${namespace}/${name}`);
      // What this process knew of the cube's replica sets for failover goes with the cube.
      const ofCube = `${namespace}/${name}/`;
      for (const k of [...releasedUncommitted.keys()])
        if (k.startsWith(ofCube)) releasedUncommitted.delete(k);
      for (const k of [...failedOverSets]) if (k.startsWith(ofCube)) failedOverSets.delete(k);
      forgetCube(deps.metrics, { namespace, cube: name });
      return;
    }
    let object = structuredClone(cached);
    const cube = name;
    const log = deps.logger.child({ cube, namespace });
    const labels = { namespace, cube };
    initCube(deps.metrics, labels);
    const pods = deps.listPods(namespace);
    const receivers = receiversByReplicaSet(pods, deps.receiverPort);

    if (object.metadata?.deletionTimestamp) {
      if (object.metadata.finalizers?.includes(finalizer))
        return finalize(object, receivers, cube, signal);
      return;
    }
    if (!object.metadata?.finalizers?.includes(finalizer)) {
      object = await patchFinalizers(
        object,
        [...(object.metadata?.finalizers ?? []), finalizer],
        signal,
      );
    }

    const journal = object.status?.reassign;
    /**
     * The sets of the move in flight with no ready receiver for spec.failoverAfter, whether or not
     * they keep released data (Starting fails over a set of the move lost before the targets
     * started: fenceLostSets). Set below, before the journal runs.
     */
    let lostInMove: ReadonlySet<string> | undefined;
    // From the journal, so that an operator that took over reports the phase it resumes.
    setPhase(deps.metrics, labels, journal?.phase);
    const reassignContext = (
      obj: CubeAssignment,
      holdPlacementCompletion?: ReassignContext['holdPlacementCompletion'],
    ): ReassignContext => ({
      cube,
      object: obj,
      receivers,
      notReady: notReadyByReplicaSet(pods),
      ...(lostInMove ? { lostReplicaSets: lostInMove } : {}),
      client: (endpoint) => clientFor(endpoint, obj),
      startingOffsets: (ps: number[]) =>
        deps.topics.startingOffsets(
          obj.spec.source,
          startingOffsetRules(obj.spec.source.startingOffsets, ps, obj.status?.epochs),
          obj.metadata?.namespace ?? 'default',
        ),
      persist: async (status: CubeAssignmentStatusPatch) =>
        (object = await patchStatus(object, status, signal)),
      event: (type: 'Normal' | 'Warning', reason: string, message: string) =>
        deps.events.record(object, type, reason, message),
      onPhase: (phase, j) => {
        setPhase(deps.metrics, labels, phase);
        log.info('reassign phase', { reassignId: j.id, phase });
        faultPoint(`reassign-${phase}`);
      },
      onReplicaRepaired: (endpoint, repair) =>
        deps.metrics.replicaRepairs.inc({ cube, replica_set: endpoint.replicaSet, repair }),
      onCubeMissing: (endpoint, j) => {
        deps.metrics.replicaCubeMissing.inc({ cube, replica_set: endpoint.replicaSet });
        log.warn('source replica lacks the cube; the move goes on without it', {
          reassignId: j.id,
          receiver: endpoint.name,
          replicaSet: endpoint.replicaSet,
        });
      },
      entries: phaseEntries,
      phaseTimeoutMs: deps.phaseTimeoutMs,
      drainTimeoutMs: deps.drainTimeoutMs,
      handOffTimeoutMs,
      drainPollMs,
      sealPollMs,
      now: () => new Date(),
      signal,
      ...(holdPlacementCompletion ? { holdPlacementCompletion } : {}),
    });
    /** Reported as Degraded (and Ready=False); the step said when to come back. */
    const reportBlocked = async (
      j: ReassignJournal,
      error: PhaseBlocked,
      requeueAfterMs: number,
    ): Promise<ReconcileResult> => {
      log.warn('reassign blocked', {
        reassignId: j.id,
        reason: error.reason,
        error: error.message,
      });
      // `object` is the last version this reconcile wrote or read; resourceVersions are opaque,
      // so no comparison with the cache decides which is newer. A 409 retries at the requeue.
      const base = object;
      await patchStatus(
        base,
        {
          conditions: conditionsWith(base, [
            degraded(base, [
              {
                reason: error.reason,
                message: error.message,
                ...(error.event === undefined ? {} : { event: error.event }),
              },
            ]),
            { type: 'Ready', status: 'False', reason: error.reason, message: error.message },
          ]),
        },
        signal,
      ).catch((e: unknown) => {
        signal.throwIfAborted();
        log.warn('cannot write Degraded', { error: (e as Error).message });
      });
      return { requeueAfterMs };
    };
    /** One phase of the journal per reconcile. */
    const runJournal = async (
      j: ReassignJournal,
      holdPlacementCompletion?: ReassignContext['holdPlacementCompletion'],
    ): Promise<ReconcileResult> => {
      // Past Starting, a replica that missed it (down, not Ready, restarted) is brought to the
      // moves' end state before Sealing goes on: a source's partitions handed over at the stop
      // offsets, a target's taken from them.
      if (j.phase === 'Sealing') {
        const converged = await convergeReplicas(object, cube, receivers, j, signal);
        for (const p of converged.problems)
          log.warn('replica not converged', { reassignId: j.id, problem: p.message });
        // A source replica still draining to the stops it missed is not sealed under it.
        if (converged.pending) return { requeueAfterMs: drainPollMs };
      }
      const outcome = await stepReassign(reassignContext(object, holdPlacementCompletion), j);
      object = outcome.object;
      switch (outcome.kind) {
        case 'advanced':
          return { requeueAfterMs: outcome.requeueAfterMs };
        case 'waiting':
          log.debug('reassign waiting', {
            reassignId: j.id,
            phase: j.phase,
            detail: outcome.message,
          });
          return { requeueAfterMs: outcome.requeueAfterMs };
        case 'blocked':
          return reportBlocked(j, outcome.error, outcome.requeueAfterMs);
        case 'rolledBack':
          deps.metrics.reassignsTotal.inc({ ...labels, result: 'rolled_back' });
          setPhase(deps.metrics, labels, undefined);
          return reportBlocked(j, outcome.error, outcome.requeueAfterMs);
        case 'completed':
          for (const rs of [...(j.failover?.replicaSets ?? []), ...(j.lostSets?.replicaSets ?? [])])
            failedOverSets.add(`${namespace}/${cube}/${rs}`);
          // The completion wrote what the sources left with partitions keep of the ones they
          // released (status.releasedUncommitted, releasedByMoves): status stands for them until
          // this process observes them again.
          for (const m of j.moves)
            if (m.from !== undefined) releasedUncommitted.delete(`${namespace}/${cube}/${m.from}`);
          deps.metrics.reassignSeconds.observe(
            { namespace },
            (Date.now() - Date.parse(j.startedAt)) / 1000,
          );
          deps.metrics.reassignsTotal.inc({ ...labels, result: 'completed' });
          setPhase(deps.metrics, labels, undefined);
          log.info('reassign done', { reassignId: j.id, moves: describeMoves(j) });
          return { requeueAfterMs: outcome.requeueAfterMs };
      }
    };
    if (journal) {
      // The failover wait counts during a move too, and is kept in status as at rest, so that a
      // leader taking over mid-move waits out only the rest of it.
      const away = lostReplicaSets(
        object,
        new Set([...receivers].filter(([, list]) => list.length > 0).map(([rs]) => rs)),
        pods,
      );
      lostInMove = new Set([...away.lost, ...away.blocked.keys()]);
      const unavailable = unavailableSincePatch(object.status?.unavailableSince, away.since);
      if (unavailable) {
        signal.throwIfAborted();
        object = await patchStatus(object, { unavailableSince: unavailable }, signal);
      }
      return runJournal(journal);
    }

    // A source edit reaches every receiver before anything else runs under it, and before
    // observedGeneration says it is applied. Other edits (placement, suspend) need no roll-out,
    // and must not wait for receivers that are down.
    const specDigest = cubeSpecDigest(assignRequest(object, '', []));
    let digestPatch: CubeAssignmentStatusPatch = {};
    if (object.status?.specDigest !== specDigest) {
      const notRolledOut = await rollOutSpec(object, cube, receivers, specDigest, signal);
      signal.throwIfAborted();
      if (notRolledOut.length > 0) {
        const message = notRolledOut.map((p) => p.message).join('; ');
        await patchStatus(object, {
          conditions: conditionsWith(object, [
            {
              type: 'Progressing',
              status: 'True',
              reason: 'RollingOut',
              message: `rolling generation ${object.metadata?.generation ?? 0} of the spec out to the receivers`,
            },
            degraded(object, notRolledOut),
            { type: 'Ready', status: 'False', reason: notRolledOut[0]!.reason, message },
          ]),
        });
        return { requeueAfterMs: 2_000 };
      }
      // Written with the status this reconcile writes next.
      digestPatch = { specDigest };
    }

    if (object.spec.suspend) {
      for (const [rs, partitions] of Object.entries(object.status?.assignment ?? {})) {
        for (const endpoint of receivers.get(rs) ?? []) {
          if (partitions.length > 0)
            await clientFor(endpoint, object)
              .pause(cube, partitions, signal)
              .catch((error: unknown) => {
                // Best effort, but a deposed leader goes no further.
                if (isStaleLeader(error)) throw error;
              });
        }
      }
      signal.throwIfAborted();
      await patchStatus(object, {
        ...digestPatch,
        observedGeneration: object.metadata?.generation,
        conditions: conditionsWith(object, [
          {
            type: 'Ready',
            status: 'False',
            reason: 'Suspended',
            message: 'spec.suspend is true: consumption is paused',
          },
          { type: 'Progressing', status: 'False', reason: 'Suspended', message: 'suspended' },
        ]),
      });
      return { requeueAfterMs: deps.resyncMs };
    }

    let partitions: number[] | undefined;
    let sourceProblem: Problem | undefined;
    try {
      partitions = await deps.topics.partitions(
        object.spec.source,
        object.metadata?.namespace ?? 'default',
      );
    } catch (error) {
      partitions = undefined;
      // Not a missing topic: the brokers did not answer (address, port, TLS, SASL, down). A
      // refused password or an untrusted certificate has its own reason: waiting will not help.
      const { topic, brokers } = object.spec.source;
      const reason = classifySourceError(error) ?? 'SourceUnavailable';
      sourceProblem = {
        reason,
        message: `cannot read the metadata of topic ${topic} from brokers ${brokers.join(', ')}: ${(error as Error).message}`,
      };
      log.warn('cannot read topic metadata', { error: (error as Error).message });
    }
    const availableReplicaSets = new Set(
      [...receivers].filter(([, list]) => list.length > 0).map(([rs]) => rs),
    );
    const away = lostReplicaSets(object, availableReplicaSets, pods);
    const converging = await stillHolding(
      object,
      cube,
      receivers,
      notReadyByReplicaSet(pods),
      signal,
    );
    const plan = planAssignment({
      strategy: object.spec.strategy,
      replicaSets: object.spec.replicaSets,
      pins: object.spec.pins,
      current: object.status?.assignment,
      partitions,
      availableReplicaSets,
      lostReplicaSets: away.lost,
      failoverAt: away.failoverAt,
      convergingReplicaSets: converging,
    });
    for (const [rs, released] of away.blocked)
      plan.problems.push({
        reason: 'FailoverBlocked',
        message: `replica set ${rs} has had no ready receiver pod for longer than spec.failoverAfter, but it holds data of partition${released.length > 1 ? 's' : ''} ${released.join(', ')} (moved away from it) that is not committed yet: a failover would lose it, so its partitions wait for it`,
      });
    if (sourceProblem) {
      const replacement = sourceProblem;
      plan.problems = plan.problems.map((p) => (p.reason === 'TopicNotFound' ? replacement : p));
    }

    /** A first placement's completion, written with the observation below (see runJournal). */
    let held: { base: CubeAssignment; patch: CubeAssignmentStatusPatch } | undefined;
    if (plan.moves.length > 0 && !plan.problems.some((p) => p.reason === 'TopicNotFound')) {
      // A failover moves the lost sets' partitions alone; any other move is planned after it.
      const failedOver = plan.moves.filter((m) => m.from !== undefined && away.lost.has(m.from));
      const failoverSets = sortedNames(failedOver.map((m) => m.from!));
      const planned: ReassignJournal = {
        ...newJournal(
          failedOver.length > 0 ? failedOver : plan.moves,
          new Date(),
          `${failedOver.length > 0 ? 'f' : 'r'}-${object.metadata?.generation ?? 0}-${randomBytes(3).toString('hex')}`,
        ),
        ...(failedOver.length > 0 ? { failover: { replicaSets: failoverSets } } : {}),
      };
      // A first placement is written once, at Starting, with its starting offsets; should the
      // brokers not give them now, it is written at Planned and its steps report why.
      const j = isSourceless(planned)
        ? await placementJournal(reassignContext(object), planned).catch((error: unknown) => {
            if (!(error instanceof PhaseBlocked)) throw error;
            return planned;
          })
        : planned;
      signal.throwIfAborted();
      object = await patchStatus(
        object,
        {
          ...digestPatch,
          observedGeneration: object.metadata?.generation,
          reassign: j,
          conditions: conditionsWith(object, [
            {
              type: 'Progressing',
              status: 'True',
              reason: 'Reassigning',
              message: `moving ${describeMoves(j)}`,
            },
            degraded(object, plan.problems),
          ]),
        },
        signal,
      );
      // A first placement's Event is its completion, which names every move; a failover's
      // FailoverStarted names its offsets once they are known, in Fencing.
      if (!isSourceless(j) && !j.failover)
        deps.events.record(
          object,
          'Normal',
          'ReassignPlanned',
          `reassign ${j.id}: ${describeMoves(j)}`,
        );
      // A first placement written at Starting starts now: the journal it runs from is the one
      // just written, and a pass through the queue per cube is what 1,000 new cubes wait on.
      // Any other journal's phases run on the next reconciles, one each.
      if (j.phase !== 'Starting') return { requeueAfterMs: requeueDelayMs.advanced };
      // Its completion is written with the cube's first observation, made right after it: one
      // write, and the cube Ready as soon as it is placed. Only here, where the journal was just
      // written: a Starting run again (this write failed, or the process stopped) completes as
      // any journal does, written on its own.
      const result = await runJournal(j, (patch) => {
        held = { base: object, patch };
        return {
          ...object,
          status: applyMergePatch(object.status, patch) as CubeAssignmentStatus,
        };
      });
      if (!held) return result;
    }

    signal.throwIfAborted();
    const converged = await convergeReplicas(object, cube, receivers, undefined, signal);
    const observed = await observe(object, cube, receivers, partitions, specDigest, signal);
    signal.throwIfAborted();
    // A receiver that cannot read (ConsumerFailed) names the cube's Degraded reason before the
    // operator's own view of the same outage (SourceUnavailable when the brokers are gone).
    const problems = [
      ...observed.failed,
      ...plan.problems,
      ...observed.problems,
      ...converged.problems,
    ];
    if (observed.unowned.length > 0 && partitions !== undefined) {
      problems.push({
        reason: 'PartitionsNotConsumed',
        message: `partition${observed.unowned.length > 1 ? 's' : ''} ${observed.unowned.join(', ')} ha${observed.unowned.length > 1 ? 've' : 's'} no consuming receiver`,
      });
    }
    const { rejectedEventsThreshold } = object.spec;
    const lateData = rejectedEventsProblem(
      observed.rejected,
      basisPointsOf(rejectedEventsThreshold),
      rejectedEventsThreshold,
    );
    if (lateData) problems.push(lateData);
    // Copies that do not tile lose or double-count data. Checked at rest, once the replicas have
    // converged: a repair under way (a replica past a stop offset not fenced yet) is not a finding.
    const tiling = converged.pending ? undefined : observed.tiling;
    if (tiling) deps.metrics.tilingFindings.set({ namespace, cube }, tiling.length);
    if (tiling && tiling.length > 0) problems.push(offsetsNotTiled(tiling));
    // Late or bad data is worth a Degraded condition, but the cube is consumed: still Ready.
    const notReady = problems.filter((p) => !p.keepsReady);
    const ready = notReady.length === 0;
    // Live positions move with every record: written when a lag changes magnitude, the rows
    // change shape, or once per resync; not on every observation.
    const { partitions: rows, totalLag, segments } = observed.status;
    // Each range once: the status written before names the ranges already told.
    const lost = newlyLostRanges(object.status?.partitions, rows ?? []);
    for (const l of lost)
      deps.events.record(object, 'Warning', 'OffsetsLost', offsetsLostMessage(l));
    const writtenAt = positionsWrittenAt.get(key);
    const positionsDue =
      lost.length > 0 ||
      writtenAt === undefined ||
      Date.now() - writtenAt >= deps.resyncMs * 0.9 ||
      partitionRowsMoved(object.status?.partitions, rows ?? []);
    const sets = new Set([
      ...object.spec.replicaSets,
      ...Object.keys(object.status?.assignment ?? {}),
    ]);
    const released = releasedUncommittedPatch(
      object.status?.releasedUncommitted,
      new Map(
        [...sets].flatMap((rs) => {
          const observed = releasedUncommitted.get(`${key}/${rs}`);
          return observed ? [[rs, observed] as const] : [];
        }),
      ),
      sets,
    );
    const unavailable = unavailableSincePatch(object.status?.unavailableSince, away.since);
    const written = await patchStatus(held?.base ?? object, {
      ...held?.patch,
      ...digestPatch,
      observedGeneration: object.metadata?.generation,
      ...(released ? { releasedUncommitted: released } : {}),
      ...(unavailable ? { unavailableSince: unavailable } : {}),
      ...(positionsDue ? { partitions: rows, totalLag } : {}),
      segments,
      conditions: conditionsWith(object, [
        ready
          ? {
              type: 'Ready',
              status: 'True',
              reason: 'Consuming',
              message: 'every partition has a consuming replica set',
            }
          : {
              type: 'Ready',
              status: 'False',
              reason: notReady[0]!.reason,
              message: notReady[0]!.message,
            },
        {
          type: 'Progressing',
          status: 'False',
          reason: 'Stable',
          message: 'no reassign in flight',
        },
        degraded(object, problems),
      ]),
    });
    if (positionsDue && written !== object) positionsWrittenAt.set(key, Date.now());
    // A repair under way (a drain, a hand-off) is looked at again soon, not at the next resync.
    if (converged.pending) return { requeueAfterMs: Math.min(deps.resyncMs, 1_000) };
    // So is a set's data of partitions moved away until it is committed (see observe).
    const awaitingCommit = [...sets].some(
      (rs) => (releasedUncommitted.get(`${key}/${rs}`) ?? []).length > 0,
    );
    if (awaitingCommit) return { requeueAfterMs: Math.min(deps.resyncMs, 2_000) };
    return {
      requeueAfterMs: problems.length === 0 ? deps.resyncMs : Math.min(deps.resyncMs, 5_000),
    };
  };
}
