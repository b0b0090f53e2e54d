// The operator's own Prometheus metrics (the controller runtime adds reconcile, work-queue,
// informer and leader-election families to the same registry). Per cube they carry
// {namespace, cube}, per partition also {topic, partition}; a cube's series go when the cube goes,
// a partition's when no replica set reports it any more.
import type { Registry } from 'prom-client';
import { sharedCounter, sharedGauge, sharedHistogram } from '../observability/metrics.ts';
import { reassignPhases } from '../api/cube-assignment.ts';

/** A cube as its metric labels name it. */
export interface CubeLabels {
  namespace: string;
  cube: string;
}

const segmentStates = ['active', 'immutable', 'handedOff'] as const;
const reassignResults = ['completed', 'rolled_back'] as const;
/** The conditions of status.conditions exported for alerts. */
const exportedConditions = ['Ready', 'Degraded'] as const;

export function createOperatorMetrics(registry: Registry) {
  return {
    /**
     * By namespace, not by cube: 14 series a cube (buckets, sum, count) were a third of the
     * operator's series at 1,000 cubes, and rendering them took memory and time at each scrape.
     */
    reassignSeconds: sharedHistogram(registry, {
      name: 'streamcube_reassign_duration_seconds',
      help: 'Time from planning a reassign to Done',
      labelNames: ['namespace'],
      buckets: [0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300],
    }),
    reassignsTotal: sharedCounter(registry, {
      name: 'streamcube_reassigns_total',
      help: 'Reassigns finished, by result (completed, rolled_back)',
      labelNames: ['namespace', 'cube', 'result'],
    }),
    reassignPhase: sharedGauge(registry, {
      name: 'streamcube_reassign_phase',
      help: '1 for the phase a cube reassign is in, 0 for the others',
      labelNames: ['namespace', 'cube', 'phase'],
    }),
    partitionsUnassigned: sharedGauge(registry, {
      name: 'streamcube_partitions_unassigned',
      help: 'Partitions of the topic without a consuming owner',
      labelNames: ['namespace', 'cube'],
    }),
    tilingFindings: sharedGauge(registry, {
      name: 'streamcube_offset_tiling_findings',
      help: "Gaps and overlaps found at the last check in the cube's offsets across replica sets (0: every partition tiles)",
      labelNames: ['namespace', 'cube'],
    }),
    position: sharedGauge(registry, {
      name: 'streamcube_partition_position',
      help: 'Next offset to consume, as reported by one receiver of the owning replica set',
      labelNames: ['namespace', 'cube', 'topic', 'partition'],
    }),
    lag: sharedGauge(registry, {
      name: 'streamcube_partition_lag',
      help: 'High watermark minus position',
      labelNames: ['namespace', 'cube', 'topic', 'partition'],
    }),
    consumerGroupsDeleted: sharedCounter(registry, {
      name: 'streamcube_operator_consumer_groups_deleted_total',
      help: 'Empty consumer groups of a cube or receiver that no longer exists, deleted by the sweep, by reason (CubeGone, ReceiverGone)',
      labelNames: ['reason'],
    }),
    staleLeaderRefusals: sharedCounter(registry, {
      name: 'streamcube_operator_stale_leader_refusals_total',
      help: 'Receiver calls refused as coming from a stale leader term (the operator then stops leading)',
    }),
    replicaCubeMissing: sharedCounter(registry, {
      name: 'streamcube_operator_replica_cube_missing_total',
      help: 'Source replicas left out of a reassign because they do not hold the cube (404), once per reassign and replica',
      labelNames: ['cube', 'replica_set'],
    }),
    replicaCubeRestored: sharedCounter(registry, {
      name: 'streamcube_operator_replica_cube_restored_total',
      help: "Replicas that lacked the cube and were given it at their replica set's positions",
      labelNames: ['cube', 'replica_set'],
    }),
    replicaRepairs: sharedCounter(registry, {
      name: 'streamcube_operator_replica_repairs_total',
      help: "Calls that brought a replica to its replica set's state for a cube (a phase it missed, a restart), by kind: release, drain, assign, resume, pause, seal, raiseStops (Draining), fence (a release past its stop offset)",
      labelNames: ['cube', 'replica_set', 'repair'],
    }),
    segments: sharedGauge(registry, {
      name: 'streamcube_segments',
      help: 'Segments of the cube by state (one replica per replica set counted)',
      labelNames: ['namespace', 'cube', 'state'],
    }),
    cubeCondition: sharedGauge(registry, {
      name: 'streamcube_cube_condition',
      help: "The cube's Ready and Degraded conditions (status.conditions): one series each at 1, labelled with its status and reason (Unknown, '' while it has none)",
      labelNames: ['namespace', 'cube', 'type', 'status', 'reason'],
    }),
    /** The condition series set per cube (`namespace/cube`): what to remove when one changes. */
    conditionSeries: new Map<string, Map<string, Record<string, string>>>(),
    /** Partition series set per cube (`namespace/cube`), with their topic: what to remove later. */
    published: new Map<string, { topic: string; partitions: Set<number> }>(),
  };
}

export type OperatorMetrics = ReturnType<typeof createOperatorMetrics>;

export function setPhase(
  metrics: OperatorMetrics,
  labels: CubeLabels,
  phase: string | undefined,
): void {
  for (const p of reassignPhases)
    metrics.reassignPhase.set({ ...labels, phase: p }, p === phase ? 1 : 0);
}

/** The cube's Ready and Degraded conditions as the operator last wrote them, for alerts. */
export function publishConditions(
  metrics: OperatorMetrics,
  labels: CubeLabels,
  conditions: readonly { type: string; status: string; reason?: string | undefined }[] | undefined,
): void {
  const key = `${labels.namespace}/${labels.cube}`;
  const previous = metrics.conditionSeries.get(key);
  const now = new Map<string, Record<string, string>>();
  for (const type of exportedConditions) {
    const condition = conditions?.find((c) => c.type === type);
    const series = {
      ...labels,
      type,
      status: condition?.status ?? 'Unknown',
      reason: condition?.reason ?? '',
    };
    now.set(JSON.stringify(series), series);
  }
  for (const [id, series] of previous ?? []) if (!now.has(id)) metrics.cubeCondition.remove(series);
  for (const series of now.values()) metrics.cubeCondition.set(series, 1);
  metrics.conditionSeries.set(key, now);
}

/** Counters of finished reassigns exist at zero once a cube is seen, for rate() and alerts. */
export function initCube(metrics: OperatorMetrics, labels: CubeLabels): void {
  for (const result of reassignResults) metrics.reassignsTotal.inc({ ...labels, result }, 0);
}

export interface PartitionReading {
  partition: number;
  position: string;
  lag?: string;
}

/**
 * Sets the position and lag of every partition read this time; a partition published before and
 * missing now (no owner reports it: unassigned, or the topic's owner gone) loses its series.
 */
export function publishPartitions(
  metrics: OperatorMetrics,
  labels: CubeLabels & { topic: string },
  readings: PartitionReading[],
): void {
  const key = `${labels.namespace}/${labels.cube}`;
  const previous = metrics.published.get(key);
  const now = new Set(readings.map((r) => r.partition));
  if (previous) {
    for (const p of previous.partitions)
      if (!now.has(p) || previous.topic !== labels.topic)
        removePartition(metrics, { ...labels, topic: previous.topic }, p);
  }
  for (const r of readings) {
    const series = { ...labels, partition: String(r.partition) };
    metrics.position.set(series, Number(r.position));
    if (r.lag !== undefined) metrics.lag.set(series, Number(r.lag));
    else metrics.lag.remove(series);
  }
  metrics.published.set(key, { topic: labels.topic, partitions: now });
}

function removePartition(
  metrics: OperatorMetrics,
  labels: CubeLabels & { topic: string },
  partition: number,
): void {
  const series = { ...labels, partition: String(partition) };
  metrics.position.remove(series);
  metrics.lag.remove(series);
}

/** Removes every series of a cube that is gone. */
export function forgetCube(metrics: OperatorMetrics, labels: CubeLabels): void {
  const key = `${labels.namespace}/${labels.cube}`;
  const published = metrics.published.get(key);
  if (published)
    for (const p of published.partitions)
      removePartition(metrics, { ...labels, topic: published.topic }, p);
  metrics.published.delete(key);
  for (const phase of reassignPhases) metrics.reassignPhase.remove({ ...labels, phase });
  for (const result of reassignResults) metrics.reassignsTotal.remove({ ...labels, result });
  for (const state of segmentStates) metrics.segments.remove({ ...labels, state });
  metrics.partitionsUnassigned.remove(labels);
  metrics.tilingFindings.remove(labels);
  for (const series of metrics.conditionSeries.get(key)?.values() ?? [])
    metrics.cubeCondition.remove(series);
  metrics.conditionSeries.delete(key);
}
