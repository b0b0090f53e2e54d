// The operator's own Prometheus metrics (the controller runtime adds reconcile, work-queue,
// informer and leader-election families to the same registry).
import type { Registry } from 'prom-client';
import { sharedCounter, sharedGauge, sharedHistogram } from '../observability/metrics.ts';
import { reassignPhases } from '../api/cube-assignment.ts';

export function createOperatorMetrics(registry: Registry) {
  return {
    reassignSeconds: sharedHistogram(registry, {
      name: 'streamcube_reassign_duration_seconds',
      help: 'Time from planning a reassign to Done',
      labelNames: ['cube'],
      buckets: [0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300],
    }),
    reassignsTotal: sharedCounter(registry, {
      name: 'streamcube_reassigns_total',
      help: 'Reassigns finished, by result (completed, rolled_back)',
      labelNames: ['cube', 'result'],
    }),
    reassignPhase: sharedGauge(registry, {
      name: 'streamcube_reassign_phase',
      help: '1 for the phase a cube reassign is in, 0 for the others',
      labelNames: ['cube', 'phase'],
    }),
    partitionsUnassigned: sharedGauge(registry, {
      name: 'streamcube_partitions_unassigned',
      help: 'Partitions of the topic without a consuming owner',
      labelNames: ['cube'],
    }),
    position: sharedGauge(registry, {
      name: 'streamcube_partition_position',
      help: 'Next offset to consume, as reported by one receiver of the owning replica set',
      labelNames: ['cube', 'partition'],
    }),
    lag: sharedGauge(registry, {
      name: 'streamcube_partition_lag',
      help: 'High watermark minus position',
      labelNames: ['cube', 'partition'],
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
    segments: sharedGauge(registry, {
      name: 'streamcube_segments',
      help: 'Segments of the cube by state (one replica per replica set counted)',
      labelNames: ['cube', 'state'],
    }),
  };
}

export type OperatorMetrics = ReturnType<typeof createOperatorMetrics>;

export function setPhase(metrics: OperatorMetrics, cube: string, phase: string | undefined): void {
  for (const p of reassignPhases)
    metrics.reassignPhase.set({ cube, phase: p }, p === phase ? 1 : 0);
}
