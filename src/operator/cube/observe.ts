// Observation of a cube at rest: the I/O that gathers every replica's report of the cube (and
// repairs on the way what a report shows: a receiver running an older spec is brought to this
// one, a replica that lacks the cube is given it), then the pure summary (observation.ts), the
// metrics it publishes and the rejected-records windows it feeds.
import { skippedByResets } from '../../api/reset-ranges.ts';
import { cubeSummaryOf } from '../../protocol/admin-api.ts';
import { isStaleLeader } from '../../protocol/client.ts';
import { cubeKeyString } from '../../protocol/cube-paths.ts';
import type { ReceiverEndpoint } from '../discovery.ts';
import { publishPartitions, type OperatorMetrics, type CubeLabels } from '../metrics.ts';
import type { Problem } from '../planner.ts';
import { assignRequest } from '../reassign/index.ts';
import type { RejectedEventsWindow, RejectionDelta } from '../rejected-events.ts';
import type { FailoverWatch } from './failover-watch.ts';
import {
  summarizeObservation,
  type ObservationSummary,
  type ReplicaSetReports,
} from './observation.ts';
import type { CubeEdges, CubePass } from './pass.ts';
import { restoreCube, type ReceiverReport } from './restore-cube.ts';

export interface Observation extends ObservationSummary {
  /** ReceiverUnreachable and CubeNotOnReceiver, as the gathering met them. */
  problems: Problem[];
  /** The receivers' rejected records over the window (rejected-events.ts). */
  rejected: RejectionDelta[];
}

export async function observe(
  edges: CubeEdges,
  pass: CubePass,
  watch: FailoverWatch,
  rejections: RejectedEventsWindow,
  partitions: number[] | undefined,
  /** cubeSpecDigest of the spec: a receiver reporting another one is brought to it. */
  specDigest: string,
): Promise<Observation> {
  const { object, key } = pass;
  const { sets, problems } = await gatherReports(edges, pass, watch, specDigest);
  const summary = summarizeObservation(
    sets,
    partitions,
    object.status?.epochStarts ?? {},
    skippedByResets(object.status?.resets),
  );
  const rejected = observeRejections(rejections, cubeKeyString(key), sets);
  for (const [rs, released] of summary.releasedUncommitted)
    watch.observedReleasedUncommitted(key, rs, released);
  publishObservation(edges.metrics, pass.labels, object.spec.source.topic, summary);
  return { ...summary, problems, rejected };
}

/**
 * Every replica's report of the cube, for each set that owns partitions of it. A replica running
 * an older spec (restarted from an older checkpoint) is brought to this one; a replica that does
 * not hold the cube is given it (restoreCube).
 */
async function gatherReports(
  edges: CubeEdges,
  pass: CubePass,
  watch: FailoverWatch,
  specDigest: string,
): Promise<{ sets: ReplicaSetReports[]; problems: Problem[] }> {
  const { object, receivers, signal, key } = pass;
  const sets: ReplicaSetReports[] = [];
  const problems: Problem[] = [];
  for (const [rs, owned] of Object.entries(object.status?.assignment ?? {})) {
    if (owned.length === 0) continue;
    const reports: ReceiverReport[] = [];
    const missing: ReceiverEndpoint[] = [];
    // A set keeping data of partitions moved away is read afresh, not at the resync: the commit
    // of that data (sealed at the release) is what lets the set be failed over.
    const awaitingCommit = (
      watch.releasedUncommittedOf(key, rs) ??
      object.status?.releasedUncommitted?.[rs] ??
      []
    ).length;
    for (const endpoint of receivers.get(rs) ?? []) {
      try {
        if (awaitingCommit > 0) edges.receivers.readAfresh(endpoint, key);
        let status = await edges.receivers.summary(endpoint, key, signal);
        if (status === undefined) {
          missing.push(endpoint);
          continue;
        }
        if (status.specDigest !== specDigest)
          status = cubeSummaryOf(
            await edges.receivers
              .client(endpoint, key.namespace)
              .assign(key.name, assignRequest(object, rs, []), signal),
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
      const problem = await restoreCube(edges, pass, endpoint, owned, reports);
      if (problem) problems.push(problem);
    }
    sets.push({ replicaSet: rs, owned, reports });
  }
  return { sets, problems };
}

/** Every replica's record counters into the cube's window; replicas not reporting leave it. */
function observeRejections(
  rejections: RejectedEventsWindow,
  cube: string,
  sets: readonly ReplicaSetReports[],
): RejectionDelta[] {
  const rejected: RejectionDelta[] = [];
  const observed = new Set<string>();
  const now = Date.now();
  for (const { replicaSet, reports } of sets) {
    for (const { receiver, status } of reports) {
      observed.add(receiver);
      const delta = rejections.observe(cube, { name: receiver, replicaSet }, now, {
        ingested: status.ingested,
        rejected: status.rejected,
      });
      if (delta) rejected.push(delta);
    }
  }
  rejections.retain(cube, observed);
  return rejected;
}

function publishObservation(
  metrics: OperatorMetrics,
  labels: CubeLabels,
  topic: string,
  summary: ObservationSummary,
): void {
  publishPartitions(metrics, { ...labels, topic }, summary.readings);
  metrics.partitionsUnassigned.set(labels, summary.unowned.length);
  for (const [state, n] of Object.entries(summary.status.segments))
    metrics.segments.set({ ...labels, state }, n);
}
