// What the receivers' reports of a cube say, summed up without I/O: the status rows (position,
// lag, losses and committed-to per partition), segment counts, which partitions no replica
// consumes, whose consumer is down, whether the replicas' copies tile, and which sets keep data
// of partitions moved away not committed yet. observe.ts gathers the reports.
import type { ObservedPartition } from '../../api/cube-assignment.ts';
import type { CubeSummary } from '../../protocol/admin-api.ts';
import type { OffsetRange } from '../../receiver/offset-ranges.ts';
import { classifySourceError } from '../../kafka/source-security.ts';
import { mergeLostOffsets } from '../lost-offsets.ts';
import type { PartitionReading } from '../metrics.ts';
import type { Problem } from '../planner.ts';
import { checkTiling, type ReplicaCoverage, type TilingFinding } from '../tiling.ts';
import { partitionsReleasedUncommitted } from './released-uncommitted.ts';
import type { ReceiverReport } from './restore-cube.ts';

/** The reports of one replica set that owns partitions of the cube. */
export interface ReplicaSetReports {
  replicaSet: string;
  owned: number[];
  /** One per replica that answered holding the cube. */
  reports: ReceiverReport[];
}

export interface ObservationSummary {
  status: {
    partitions: ObservedPartition[];
    totalLag: string;
    segments: { active: number; immutable: number; handedOff: number };
  };
  /** Position and lag per partition, for the metrics. */
  readings: PartitionReading[];
  /** Partitions of the topic that no replica of their owner consumes (or drains). */
  unowned: number[];
  /** ConsumerFailed, one per receiver whose consumer is down. */
  failed: Problem[];
  /** Gaps and overlaps across the replicas' copies (meaningful at rest only). */
  tiling: TilingFinding[];
  /** Per set that reported, its released, uncommitted partitions. */
  releasedUncommitted: Map<string, number[]>;
}

/**
 * `partitions`: the topic's (undefined when the brokers did not say). `epochStarts`: where each
 * partition's current epoch began (status.epochStarts).
 */
export function summarizeObservation(
  sets: readonly ReplicaSetReports[],
  partitions: readonly number[] | undefined,
  epochStarts: Record<string, string>,
  /** Offsets offset resets skipped on purpose, by partition: no gap (status.resets). */
  skipped: ReadonlyMap<number, OffsetRange[]> = new Map(),
): ObservationSummary {
  const coverages: ReplicaCoverage[] = [];
  const rows: ObservedPartition[] = [];
  const readings: PartitionReading[] = [];
  const segments = { active: 0, immutable: 0, handedOff: 0 };
  const failed: Problem[] = [];
  const consuming = new Set<number>();
  const releasedUncommitted = new Map<string, number[]>();
  let totalLag = 0n;
  for (const { replicaSet: rs, owned, reports } of sets) {
    // Every replica's report counts for failures and coverage; one replica's for positions.
    for (const { receiver, status } of reports) {
      for (const p of status.partitions) {
        if (!owned.includes(p.partition)) continue;
        if (p.state === 'consuming' || p.state === 'draining') consuming.add(p.partition);
      }
      const failure = consumerFailed(receiver, rs, status, owned);
      if (failure) failed.push(failure);
      coverages.push(coverageOf(receiver, rs, status));
    }
    if (reports.length > 0)
      releasedUncommitted.set(
        rs,
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
      rows.push({
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
  rows.sort((a, b) => a.partition - b.partition);
  const tiling = checkTiling(coverages, epochStarts, skipped);
  for (const row of rows) {
    const to = tiling.handedOffTo.get(row.partition);
    if (to !== undefined) row.handedOffTo = to.toString();
  }
  return {
    status: { partitions: rows, totalLag: totalLag.toString(), segments },
    readings,
    unowned: (partitions ?? []).filter((p) => !consuming.has(p)),
    failed,
    tiling: tiling.findings,
    releasedUncommitted,
  };
}

/** A replica's copy of the cube, for the tiling check. */
function coverageOf(receiver: string, replicaSet: string, status: CubeSummary): ReplicaCoverage {
  return {
    receiver,
    replicaSet,
    coverage: status.coverage,
    // Offsets a fenced set committed, read over here (a failover), are accounted as lost ones
    // are: in no segment of this replica, and no gap.
    lost: new Map(
      status.partitions.map((p) => [
        p.partition,
        [...(p.lostRanges ?? []), ...(status.coverage?.[String(p.partition)]?.elsewhere ?? [])].map(
          ([from, to]) => ({ from: BigInt(from), to: BigInt(to) }),
        ),
      ]),
    ),
  };
}

/**
 * The Kafka consumer of one receiver is down: its partitions are not read there, whatever the
 * other replicas do. The message names the receiver and the error, and no changing figure.
 */
export function consumerFailed(
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
