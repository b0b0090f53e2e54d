// The receiver's Prometheus metrics. Labels are bounded by configuration: namespace, cube, topic,
// partition, reason, state, route; never offsets or ids. One cube's series are set and removed
// through its ChannelMetrics (channel-metrics.ts).
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { registerBuildInfo } from '../observability/metrics.ts';

export function createReceiverMetrics(registry = new Registry()) {
  collectDefaultMetrics({ register: registry });
  registerBuildInfo(registry, 'receiver');
  const r = [registry];
  return {
    registry,
    position: new Gauge({
      name: 'streamcube_receiver_partition_position',
      help: 'Next offset to consume, per cube partition',
      labelNames: ['namespace', 'cube', 'topic', 'partition'],
      registers: r,
    }),
    highWatermark: new Gauge({
      name: 'streamcube_receiver_partition_high_watermark',
      help: 'High watermark of the partition as last seen',
      labelNames: ['namespace', 'cube', 'topic', 'partition'],
      registers: r,
    }),
    lag: new Gauge({
      name: 'streamcube_receiver_partition_lag',
      help: 'High watermark minus position (0 when caught up)',
      labelNames: ['namespace', 'cube', 'topic', 'partition'],
      registers: r,
    }),
    newestEventTime: new Gauge({
      name: 'streamcube_receiver_newest_event_timestamp_seconds',
      help: 'Event time of the newest event accepted from the partition (freshness: time() minus this)',
      labelNames: ['namespace', 'cube', 'topic', 'partition'],
      registers: r,
    }),
    ingested: new Counter({
      name: 'streamcube_receiver_events_ingested_total',
      help: 'Events aggregated into segments',
      labelNames: ['namespace', 'cube'],
      registers: r,
    }),
    rejected: new Counter({
      name: 'streamcube_receiver_events_rejected_total',
      help: 'Records skipped, by reason',
      labelNames: ['namespace', 'cube', 'reason'],
      registers: r,
    }),
    offsetsLost: new Counter({
      name: 'streamcube_receiver_offsets_lost_total',
      help: 'Offsets Kafka deleted (retention) before they were read: skipped, never consumed',
      labelNames: ['namespace', 'cube', 'topic', 'partition'],
      registers: r,
    }),
    segments: new Gauge({
      name: 'streamcube_receiver_segments',
      help: 'Segments held, by state',
      labelNames: ['namespace', 'cube', 'state'],
      registers: r,
    }),
    flushSeconds: new Histogram({
      name: 'streamcube_receiver_flush_duration_seconds',
      help: 'Time to write fragments and the checkpoint',
      labelNames: ['namespace', 'cube'],
      buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5],
      registers: r,
    }),
    handOffSeconds: new Histogram({
      name: 'streamcube_receiver_handoff_duration_seconds',
      help: 'Time to write a sealed segment to deep storage',
      labelNames: ['namespace', 'cube'],
      buckets: [0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30],
      registers: r,
    }),
    handOffFailures: new Counter({
      name: 'streamcube_receiver_handoff_failures_total',
      help: 'Hand-off attempts that failed (retried)',
      labelNames: ['namespace', 'cube'],
      registers: r,
    }),
    segmentsFenced: new Counter({
      name: 'streamcube_receiver_segments_fenced_total',
      help: 'Segments dropped, never handed off, because they held offsets a partition consumed past the stop offset its next owner starts from',
      labelNames: ['namespace', 'cube'],
      registers: r,
    }),
    commits: new Counter({
      name: 'streamcube_receiver_window_commits_total',
      help: "Commits of this receiver's hand-offs of a window (one committed copy per window and replica set), by outcome: committed (its copy is the data now), covered (another replica's committed copy covers as much), behind (another replica's covers offsets this one has not handed off yet)",
      labelNames: ['namespace', 'cube', 'outcome'],
      registers: r,
    }),
    consumerFailures: new Counter({
      name: 'streamcube_receiver_consumer_failures_total',
      help: 'Crashes and failed starts of the Kafka consumer of a cube (each restarted with backoff)',
      labelNames: ['namespace', 'cube'],
      registers: r,
    }),
    consumerUp: new Gauge({
      name: 'streamcube_receiver_consumer_up',
      help: 'Whether the Kafka consumer of a cube runs (1) or has failed and waits for a restart (0)',
      labelNames: ['namespace', 'cube'],
      registers: r,
    }),
    staleLeaderRequests: new Counter({
      name: 'streamcube_receiver_stale_leader_requests_total',
      help: 'Mutating admin calls refused (409 StaleLeader) because they carried a leader term lower than one already seen for the cube',
      labelNames: ['namespace', 'cube'],
      registers: r,
    }),
    leaderTerm: new Gauge({
      name: 'streamcube_receiver_leader_term',
      help: 'The highest leader term a mutating admin call carried for the cube',
      labelNames: ['namespace', 'cube'],
      registers: r,
    }),
    unexpectedErrors: new Counter({
      name: 'streamcube_receiver_http_unexpected_errors_total',
      help: 'HTTP requests that failed unexpectedly and were answered 500 (a bug: the log has each one under its request id)',
      registers: r,
    }),
    adminSeconds: new Histogram({
      name: 'streamcube_receiver_admin_request_duration_seconds',
      help: 'Admin API requests by route and status',
      labelNames: ['method', 'route', 'status'],
      buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30],
      registers: r,
    }),
  };
}

export type ReceiverMetrics = ReturnType<typeof createReceiverMetrics>;
