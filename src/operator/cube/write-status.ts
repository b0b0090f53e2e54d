// The status of a cube at rest, from what the pass found: Ready (every partition consumed, no
// problem that stops it), Progressing (stable, or a move awaiting approval: status.proposal),
// Degraded (every problem, in the order a reader should see them), positions, segments, what each
// set keeps uncommitted, since when sets are unavailable; and when the cube runs again.
import { basisPointsOf, type CubeAssignmentStatusPatch } from '../../api/cube-assignment.ts';
import { cubeKeyString, type CubeKey } from '../../protocol/cube-paths.ts';
import { awaitingApprovalMessage, proposalPatch } from '../approval.ts';
import { newlyLostRanges, offsetsLostMessage } from '../lost-offsets.ts';
import type { Problem } from '../planner.ts';
import { rejectedEventsProblem } from '../rejected-events.ts';
import type { ReconcileResult } from '../runtime/controller.ts';
import { partitionRowsMoved } from '../status-changes.ts';
import { offsetsNotTiled } from '../tiling.ts';
import { unavailableSincePatch } from '../unavailable-since.ts';
import { atMostResync, requeueAfterMs } from './delays.ts';
import type { FailoverWatch } from './failover-watch.ts';
import type { Observation } from './observe.ts';
import type { CubeEdges, CubePass } from './pass.ts';
import type { PlanOutcome } from './plan.ts';
import { releasedUncommittedPatch } from './released-uncommitted.ts';
import type { Convergence } from './replica-repair.ts';
import { conditionsWith } from './status-writer.ts';

/**
 * Live positions move with every record: they are written when a lag changes magnitude, the rows
 * change shape, or once per resync; not on every observation. This keeps, per cube, when they
 * were last written.
 */
export class PositionWrites {
  private readonly writtenAt = new Map<string, number>();

  due(cube: CubeKey, resyncMs: number, now = Date.now()): boolean {
    const at = this.writtenAt.get(cubeKeyString(cube));
    // About once per resync.
    return at === undefined || now - at >= resyncMs * 0.9;
  }

  written(cube: CubeKey, now = Date.now()): void {
    this.writtenAt.set(cubeKeyString(cube), now);
  }

  forget(cube: CubeKey): void {
    this.writtenAt.delete(cubeKeyString(cube));
  }
}

export interface StatusAtRest {
  plan: Extract<PlanOutcome, { kind: 'observe' }>;
  converged: Convergence;
  observed: Observation;
  digestPatch: CubeAssignmentStatusPatch;
}

export async function writeStatusAtRest(
  edges: CubeEdges,
  pass: CubePass,
  found: StatusAtRest,
  state: { watch: FailoverWatch; positions: PositionWrites; resyncMs: number },
): Promise<ReconcileResult> {
  const { object, key } = pass;
  const { plan, converged, observed, digestPatch } = found;
  const { watch, positions, resyncMs } = state;
  // A receiver that cannot read (ConsumerFailed) names the cube's Degraded reason before the
  // operator's own view of the same outage (SourceUnavailable when the brokers are gone).
  const problems: Problem[] = [
    ...(pass.problems ?? []),
    ...observed.failed,
    ...plan.problems,
    ...observed.problems,
    ...converged.problems,
  ];
  if (observed.unowned.length > 0 && plan.partitions !== undefined) {
    const many = observed.unowned.length > 1;
    problems.push({
      reason: 'PartitionsNotConsumed',
      message: `partition${many ? 's' : ''} ${observed.unowned.join(', ')} ha${many ? 've' : 's'} no consuming receiver`,
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
  if (tiling) edges.metrics.tilingFindings.set(pass.labels, tiling.length);
  if (tiling && tiling.length > 0) problems.push(offsetsNotTiled(tiling));
  // Late or bad data is worth a Degraded condition, but the cube is consumed: still Ready.
  const notReady = problems.filter((p) => !p.keepsReady);
  const { partitions: rows, totalLag, segments } = observed.status;
  // Each range once: the status written before names the ranges already told.
  const lost = newlyLostRanges(object.status?.partitions, rows);
  for (const l of lost)
    edges.events.record(object, 'Warning', 'OffsetsLost', offsetsLostMessage(l));
  const positionsDue =
    lost.length > 0 ||
    positions.due(key, resyncMs) ||
    partitionRowsMoved(object.status?.partitions, rows);
  const sets = new Set([
    ...(object.spec.replicaSets ?? []),
    ...Object.keys(object.status?.assignment ?? {}),
  ]);
  const released = releasedUncommittedPatch(
    object.status?.releasedUncommitted,
    new Map(
      [...sets].flatMap((rs) => {
        const observedOfSet = watch.releasedUncommittedOf(key, rs);
        return observedOfSet ? [[rs, observedOfSet] as const] : [];
      }),
    ),
    sets,
  );
  const unavailable = unavailableSincePatch(
    object.status?.unavailableSince,
    plan.unavailable.since,
  );
  const proposal = proposalPatch(object.status?.proposal, plan.proposal);
  const written = await edges.status.status(plan.held?.base ?? object, {
    ...plan.held?.patch,
    ...digestPatch,
    // A move waiting for approval is the spec not applied yet.
    observedGeneration: plan.proposal
      ? object.status?.observedGeneration
      : object.metadata?.generation,
    ...(proposal === undefined ? {} : { proposal }),
    ...(released ? { releasedUncommitted: released } : {}),
    ...(unavailable ? { unavailableSince: unavailable } : {}),
    ...(positionsDue ? { partitions: rows, totalLag } : {}),
    segments,
    conditions: conditionsWith(object, [
      notReady.length === 0
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
      plan.proposal
        ? {
            type: 'Progressing',
            status: 'False',
            reason: 'AwaitingApproval',
            message: awaitingApprovalMessage(plan.proposal, key.name),
          }
        : {
            type: 'Progressing',
            status: 'False',
            reason: 'Stable',
            message: 'no reassign in flight',
          },
      edges.degraded.condition(object, problems),
    ]),
  });
  if (positionsDue && written !== object) positions.written(key);
  if (converged.pending)
    return { requeueAfterMs: atMostResync(resyncMs, requeueAfterMs.repairPending) };
  if ([...sets].some((rs) => (watch.releasedUncommittedOf(key, rs) ?? []).length > 0))
    return { requeueAfterMs: atMostResync(resyncMs, requeueAfterMs.releasedUncommitted) };
  return {
    requeueAfterMs:
      problems.length === 0 ? resyncMs : atMostResync(resyncMs, requeueAfterMs.degraded),
  };
}
