// reconcile(namespace/name) for CubeAssignments, as a flat dispatcher: read the object and the
// receiver pods from the informer caches, then
//   missing → forget what was kept of the cube;
//   being deleted → finalize (finalizer.ts);
//   a journal in status → run one phase of it (journal-runner.ts), its approval consumed;
//   else roll the spec out (spec-rollout.ts) → suspend (suspend.ts) → plan (plan.ts) → repair the
//   replicas (replica-repair.ts), observe them (observe.ts) and write status (write-status.ts).
// Every status write carries the resourceVersion it was computed from; the reconcile stops when
// its AbortSignal does (lease lost, shutdown).
import type { ReceiverTransport } from '../../http/tls.ts';
import type { V1Pod } from '@kubernetes/client-node';
import type { CubeAssignment } from '../../api/cube-assignment.ts';
import { cubeSpecDigest } from '../../api/cube.ts';
import { ReceiverClient, type StaleLeaderError } from '../../protocol/client.ts';
import { cubeKeyString, type CubeKey } from '../../protocol/cube-paths.ts';
import type { BearerTokens } from '../../protocol/token-file.ts';
import type { Logger } from '../../observability/logger.ts';
import { receiversByReplicaSet } from '../discovery.ts';
import type { EventRecorder } from '../events.ts';
import {
  forgetCube,
  initCube,
  publishConditions,
  setPhase,
  type OperatorMetrics,
} from '../metrics.ts';
import type { OwnWrites } from '../own-writes.ts';
import { assignRequest } from '../reassign/index.ts';
import { RejectedEventsWindow } from '../rejected-events.ts';
import type { ReconcileResult } from '../runtime/controller.ts';
import { splitObjectKey } from '../runtime/informer.ts';
import type { TopicMetadata } from '../topic-metadata.ts';
import { ApprovalNotices, consumeApproval } from './approval.ts';
import { DegradedConditions } from './degraded-condition.ts';
import { FailoverWatch } from './failover-watch.ts';
import { ensureFinalizer, finalize, finalizer } from './finalizer.ts';
import { JournalRunner } from './journal-runner.ts';
import { observe } from './observe.ts';
import { requestedReset } from './offset-reset.ts';
import type { CubeEdges, CubePass } from './pass.ts';
import { resolvePoolSets, type PoolSets } from './pool-sets.ts';
import { plan } from './plan.ts';
import { ReceiverAccess, type ReceiverClientFactory } from './receiver-access.ts';
import { convergeReplicas } from './replica-repair.ts';
import { rollOutSpec } from './spec-rollout.ts';
import { StatusWriter, type CubeObjectsApi } from './status-writer.ts';
import { suspend } from './suspend.ts';
import { PositionWrites, writeStatusAtRest } from './write-status.ts';

export interface ReconcilerDeps {
  custom: CubeObjectsApi;
  getCube: (namespace: string, name: string) => CubeAssignment | undefined;
  listPods: (namespace: string) => V1Pod[];
  /** The receivers' admin tokens, newest first (the client falls back to an older one on 403). */
  receiverToken: BearerTokens;
  receiverPort: number;
  /** How receivers are reached: plain HTTP, or HTTPS checking their certificate (src/http/tls.ts). */
  receiverTransport?: ReceiverTransport;
  topics: Pick<TopicMetadata, 'partitions' | 'startingOffsets' | 'resetOffsets'>;
  events: Pick<EventRecorder, 'record'>;
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
  /** Makes receivers' clients; by default the HTTP admin client with the token and term above. */
  receiverClient?: ReceiverClientFactory;
  /** The Active sets of a ReceiverPool, for cubes naming one (spec.pool); none found without it. */
  poolSets?: PoolSets;
  /** Where the receivers and their pools are (--receiver-namespace); else each cube's namespace. */
  receiverNamespace?: string | undefined;
}

export function createCubeReconciler(deps: ReconcilerDeps) {
  const receiverClient: ReceiverClientFactory =
    deps.receiverClient ??
    ((baseUrl, onMutation) =>
      new ReceiverClient(baseUrl, deps.receiverToken, deps.receiverTimeoutMs, {
        onMutation,
        ...(deps.receiverTransport ? { fetch: deps.receiverTransport.fetch } : {}),
        ...(deps.leaderTerm ? { term: deps.leaderTerm } : {}),
        ...(deps.onStaleLeader ? { onStaleLeader: deps.onStaleLeader } : {}),
      }));
  const edges: CubeEdges = {
    receivers: new ReceiverAccess(receiverClient, deps.resyncMs),
    // The informer may not have this reconciler's last write yet when the cube runs again.
    status: new StatusWriter(deps.custom, deps.ownWrites),
    degraded: new DegradedConditions(deps.events),
    events: deps.events,
    metrics: deps.metrics,
    logger: deps.logger,
  };
  const watch = new FailoverWatch();
  const journals = new JournalRunner(edges, {
    topics: deps.topics,
    watch,
    phaseTimeoutMs: deps.phaseTimeoutMs,
    drainTimeoutMs: deps.drainTimeoutMs,
  });
  /** Receivers' record counters over the last minutes, per cube key and receiver. */
  const rejections = new RejectedEventsWindow(deps.rejectedEventsWindowMs);
  const positions = new PositionWrites();
  const approvals = new ApprovalNotices();

  /** The cube is gone: what this process kept of it goes too. */
  const forget = (cube: CubeKey): void => {
    rejections.forget(cubeKeyString(cube));
    edges.degraded.forget(cube);
    positions.forget(cube);
    watch.forget(cube);
    approvals.forget(cube);
    forgetCube(deps.metrics, { namespace: cube.namespace, cube: cube.name });
  };

  return async function reconcile(
    objectKey: string,
    signal: AbortSignal,
  ): Promise<ReconcileResult | void> {
    const { namespace = 'default', name } = splitObjectKey(objectKey);
    const key: CubeKey = { namespace, name };
    const cached = deps.ownWrites.read(objectKey, deps.getCube(namespace, name));
    if (!cached) return forget(key);
    const labels = { namespace, cube: name };
    initCube(deps.metrics, labels);
    // Written by the pass before this one (its status write woke this one).
    publishConditions(deps.metrics, labels, cached.status?.conditions);
    const pods = deps.listPods(namespace);
    const pass: CubePass = {
      key,
      object: structuredClone(cached),
      pods,
      receivers: receiversByReplicaSet(
        pods,
        deps.receiverPort,
        deps.receiverTransport?.scheme ?? 'http',
      ),
      labels,
      log: deps.logger.child({ cube: name, namespace }),
      signal,
    };
    const poolProblem = resolvePoolSets(
      pass.object,
      deps.poolSets ?? (() => undefined),
      deps.receiverNamespace ?? namespace,
    );
    if (poolProblem) pass.problems = [poolProblem];

    if (pass.object.metadata?.deletionTimestamp) {
      if (pass.object.metadata.finalizers?.includes(finalizer)) return finalize(edges, pass);
      return;
    }
    await ensureFinalizer(edges, pass);

    const journal = pass.object.status?.reassign;
    // From the journal, so that an operator that took over reports the phase it resumes.
    setPhase(deps.metrics, labels, journal?.phase);
    if (journal) {
      await consumeApproval(edges, pass, journal);
      return journals.runInFlight(pass, journal);
    }

    const specDigest = cubeSpecDigest(assignRequest(pass.object, '', []));
    const rollout = await rollOutSpec(edges, pass, specDigest);
    if (rollout.kind === 'notRolledOut') return rollout.result;
    const { digestPatch } = rollout;

    if (pass.object.spec.suspend) return suspend(edges, pass, digestPatch, deps.resyncMs);

    // A reset asked for runs before any move is planned; a refused one is reported with the plan's
    // problems while its annotation names it.
    const reset = await requestedReset(edges, pass, deps.topics, digestPatch);
    if (reset.kind === 'journaled') return reset.result;

    const planned = await plan(
      edges,
      pass,
      { topics: deps.topics, watch, journals, approvals },
      digestPatch,
    );
    if (planned.kind === 'journaled') return planned.result;
    if (reset.problem) planned.problems.push(reset.problem);

    signal.throwIfAborted();
    const converged = await convergeReplicas(edges, pass, undefined);
    const observed = await observe(edges, pass, watch, rejections, planned.partitions, specDigest);
    signal.throwIfAborted();
    return writeStatusAtRest(
      edges,
      pass,
      { plan: planned, converged, observed, digestPatch },
      { watch, positions, resyncMs: deps.resyncMs },
    );
  };
}
