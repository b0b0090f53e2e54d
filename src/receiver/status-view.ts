// What a cube on this receiver shows of itself in the admin API's status: partitions, segments,
// consumer (its Prometheus series are in channel-metrics.ts). Pure views of the channel's state;
// old handed-off segments are counted, not listed, so that a status stays small however long the
// cube runs.
import type {
  ConsumerStatus,
  CubeStatus,
  PartitionStatus,
  SegmentStatus,
} from '../protocol/admin-api.ts';
import type { ConsumerHealth } from './consumer-supervisor.ts';
import type { HandOffReport } from './hand-off-scheduler.ts';
import type { LostOffsetsJson } from './lost-offsets.ts';
import { type OffsetRange, rangeMapToJson, rangesToJson } from './offset-ranges.ts';
import { type PartitionState, lagOf, reportedState } from './partition-state.ts';
import { type Segment, type SegmentState, epochsToJson, generationOf } from './segments.ts';

/** Handed-off segments a status lists, the latest ones; older ones are only counted. */
export const listedHandedOffSegments = 100;

export function partitionStatus(
  ps: PartitionState,
  watermark: number | null,
  health: ConsumerHealth,
  lost?: LostOffsetsJson,
): PartitionStatus {
  const reported = reportedState(ps.state, health.state === 'failed');
  const lag = lagOf(ps);
  return {
    partition: ps.partition,
    ...reported,
    ...(health.state === 'failed' && reported.state === 'failed'
      ? { error: `${health.error.name}: ${health.error.message}` }
      : {}),
    epoch: ps.epoch,
    position: ps.position.toString(),
    highWatermark: ps.highWatermark?.toString() ?? null,
    lag: lag?.toString() ?? null,
    stopOffset: ps.stopOffset?.toString() ?? null,
    watermark,
    ...(lost ? { lostOffsets: lost.total, lostRanges: lost.ranges } : {}),
    ...(ps.consumedAt === undefined ? {} : { consumedAt: new Date(ps.consumedAt).toISOString() }),
    ...(ps.firstConsumedAt === undefined
      ? {}
      : { firstConsumedAt: new Date(ps.firstConsumedAt).toISOString() }),
  };
}

export function consumerStatus(health: ConsumerHealth): ConsumerStatus {
  if (health.state === 'running') return { state: 'running', failures: health.failures };
  return {
    state: 'failed',
    failures: health.failures,
    error: { name: health.error.name, message: health.error.message },
    failedSince: new Date(health.since).toISOString(),
  };
}

export function segmentStatus(
  s: Segment,
  rowCount: number,
  handOff: HandOffReport | undefined,
  lost: Map<number, OffsetRange[]>,
): SegmentStatus {
  return {
    windowStart: s.windowStart,
    windowEnd: s.windowEnd,
    ...(generationOf(s) > 0 ? { generation: generationOf(s) } : {}),
    state: s.state,
    rowCount,
    offsetRanges: rangeMapToJson(s.ranges),
    ...(lost.size > 0 ? { lostRanges: rangeMapToJson(lost) } : {}),
    epochs: epochsToJson(s.epochs),
    ...(handOff ? { handOff } : {}),
  };
}

/**
 * The segments a status lists — every ACTIVE and IMMUTABLE one, and the latest `handedOff` of
 * the handed-off ones — in window order, and how many are held in each state.
 */
export function segmentsView(
  segments: Iterable<Segment>,
  handedOff = listedHandedOffSegments,
): { listed: Segment[]; counts: Record<SegmentState, number> } {
  const counts = { ACTIVE: 0, IMMUTABLE: 0, HANDED_OFF: 0 };
  const sorted = [...segments].sort((a, b) => a.key - b.key);
  for (const s of sorted) counts[s.state] += 1;
  let skip = Math.max(0, counts.HANDED_OFF - handedOff);
  const listed = sorted.filter((s) => s.state !== 'HANDED_OFF' || skip-- <= 0);
  return { listed, counts };
}

/** A cube status's coverage field: absent when the receiver does not know it. */
export function coverageStatus(
  coverage: Map<number, { kept: OffsetRange[]; handedOff: OffsetRange[] }> | null,
  elsewhere: ReadonlyMap<number, OffsetRange[]> = new Map(),
): Pick<CubeStatus, 'coverage'> {
  if (!coverage) return {};
  const out: NonNullable<CubeStatus['coverage']> = Object.fromEntries(
    [...coverage].map(([p, c]) => [
      String(p),
      { kept: rangesToJson(c.kept), handedOff: rangesToJson(c.handedOff) },
    ]),
  );
  for (const [p, ranges] of elsewhere) {
    if (ranges.length === 0) continue;
    const c = (out[String(p)] ??= { kept: [], handedOff: [] });
    c.elsewhere = rangesToJson(ranges);
  }
  return { coverage: out };
}
