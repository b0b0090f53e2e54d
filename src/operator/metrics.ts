// The operator's own Prometheus metrics (the controller runtime adds reconcile, work-queue,
// informer and leader-election families to the same registry). Per cube they carry
// {namespace, cube}, per partition also {topic, partition}; a cube's series go when the cube goes,
// a partition's when no replica set reports it any more.
import type { Registry } from 'prom-client';
import { sharedCounter, sharedGauge, sharedHistogram } from '../observability/metrics.ts';

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
      help: '1 for the phase a cube reassign is in; no series for a cube at rest',
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
    /** streamcube_partition_position and streamcube_partition_lag, made at each scrape. */
    partitions: partitionSeries(registry),
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
    /** The phase series set per cube (`namespace/cube`): what to remove when the phase changes. */
    phases: new Map<string, string>(),
  };
}

export type OperatorMetrics = ReturnType<typeof createOperatorMetrics>;

/**
 * One series at 1 for the phase a cube's move is in, none at rest: seven series a cube, six of
 * them 0, were 35,000 of a 5,000-cube operator's series and 6 MiB of its heap.
 */
export function setPhase(
  metrics: OperatorMetrics,
  labels: CubeLabels,
  phase: string | undefined,
): void {
  const key = `${labels.namespace}/${labels.cube}`;
  const before = metrics.phases.get(key);
  if (before === phase) return;
  if (before !== undefined) metrics.reassignPhase.remove({ ...labels, phase: before });
  if (phase === undefined) metrics.phases.delete(key);
  else {
    metrics.reassignPhase.set({ ...labels, phase }, 1);
    metrics.phases.set(key, phase);
  }
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
 * The position and lag of every partition read this time; a partition published before and
 * missing now (no owner reports it: unassigned, or the topic's owner gone) has no series.
 */
export function publishPartitions(
  metrics: OperatorMetrics,
  labels: CubeLabels & { topic: string },
  readings: PartitionReading[],
): void {
  metrics.partitions.set(`${labels.namespace}/${labels.cube}`, { labels, readings });
}

/** Removes every series of a cube that is gone. */
export function forgetCube(metrics: OperatorMetrics, labels: CubeLabels): void {
  const key = `${labels.namespace}/${labels.cube}`;
  metrics.partitions.delete(key);
  setPhase(metrics, labels, undefined);
  for (const result of reassignResults) metrics.reassignsTotal.remove({ ...labels, result });
  for (const state of segmentStates) metrics.segments.remove({ ...labels, state });
  metrics.partitionsUnassigned.remove(labels);
  metrics.tilingFindings.remove(labels);
  for (const series of metrics.conditionSeries.get(key)?.values() ?? [])
    metrics.cubeCondition.remove(series);
  metrics.conditionSeries.delete(key);
}

/** A cube's partition readings as last published, with the labels of its series. */
interface PublishedPartitions {
  labels: CubeLabels & { topic: string };
  readings: PartitionReading[];
}

/**
 * The per-partition families, made from each cube's last readings when scraped. In prom-client's
 * gauges each series kept a labels object, a key string and an entry: at 5,000 cubes of 16
 * partitions, 160,000 series and about 37 MiB of the operator's heap, for values it reads again
 * at every pass anyway. Shared by every operator of a registry, as the other families are.
 */
function partitionSeries(registry: Registry): Map<string, PublishedPartitions> {
  const name = 'streamcube_partition_position';
  const existing = registry.getSingleMetric(name) as unknown as
    { cubes?: Map<string, PublishedPartitions> } | undefined;
  if (existing?.cubes) return existing.cubes;
  const cubes = new Map<string, PublishedPartitions>();
  const family = (
    familyName: string,
    help: string,
    value: (r: PartitionReading) => string | undefined,
  ) => {
    const get = () => {
      const values: { labels: Record<string, string>; value: number }[] = [];
      for (const { labels, readings } of cubes.values())
        for (const r of readings) {
          const v = value(r);
          if (v === undefined) continue;
          values.push({
            labels: { ...labels, partition: String(r.partition) },
            value: Number(v),
          });
        }
      return { name: familyName, help, type: 'gauge', aggregator: 'sum', values };
    };
    const metric = {
      name: familyName,
      help,
      type: 'gauge',
      aggregator: 'sum',
      cubes,
      get,
      reset: () => cubes.clear(),
    };
    registry.registerMetric(metric as unknown as Parameters<Registry['registerMetric']>[0]);
  };
  family(
    name,
    'Next offset to consume, as reported by one receiver of the owning replica set',
    (r) => r.position,
  );
  family('streamcube_partition_lag', 'High watermark minus position', (r) => r.lag);
  return cubes;
}
