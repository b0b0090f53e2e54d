// Where a reset request restarts each partition, checked against what the brokers hold: pure,
// from the partitions the cube owns and the brokers' offsets read by the caller.
import { type ResetRequest, describeTarget } from '../../api/offset-reset.ts';

export interface BrokerOffsets {
  /** The log start: the first offset the brokers still hold. */
  low: bigint;
  /** The high watermark: the offset the next record gets. */
  high: bigint;
}

export interface ResetInputs {
  request: ResetRequest;
  topic: string;
  /** status.assignment read as partition → owner. */
  owners: ReadonlyMap<number, string>;
  /** The brokers' offsets of every partition of the topic. */
  offsets: ReadonlyMap<number, BrokerOffsets>;
  /**
   * With a timestamp request: per partition, the offset of its first record at or after it (-1
   * or absent: none, the partition restarts at its high watermark).
   */
  atTimestamp?: ReadonlyMap<number, bigint>;
}

export type ResetResolution =
  { ok: true; targets: Record<string, string>; to: string } | { ok: false; message: string };

/** The partitions a request names: its list, the keys of its offsets, or every one owned. */
export function requestedPartitions(
  request: ResetRequest,
  owners: ReadonlyMap<number, string>,
): number[] {
  const to = request.to;
  const named =
    request.partitions ??
    (typeof to === 'object' && 'offsets' in to ? Object.keys(to.offsets).map(Number) : undefined);
  return [...(named ?? owners.keys())].sort((a, b) => a - b);
}

/**
 * Each requested partition's restart offset, or the first reason to refuse the request: a
 * partition the topic lacks or the cube has not placed, an offset outside what the brokers hold
 * ([log start, high watermark]). A refusal changes nothing.
 */
export function resolveResetTargets(inputs: ResetInputs): ResetResolution {
  const { request, topic, owners, offsets } = inputs;
  const refuse = (why: string): ResetResolution => ({
    ok: false,
    message: `reset ${request.id} refused, nothing changed: ${why}`,
  });
  const partitions = requestedPartitions(request, owners);
  if (partitions.length === 0) return refuse('the cube has no partition placed yet');
  const targets: Record<string, string> = {};
  for (const p of partitions) {
    const range = offsets.get(p);
    if (!range) {
      const known = [...offsets.keys()].sort((a, b) => a - b);
      return refuse(
        `partition ${p} is not a partition of topic ${topic} (it has ${known.length === 0 ? 'none' : `${known[0]}-${known.at(-1)}`})`,
      );
    }
    if (!owners.has(p)) return refuse(`partition ${p} has no owner yet: nothing reads it`);
    const to = request.to;
    let target: bigint;
    if (to === 'earliest') target = range.low;
    else if (to === 'latest') target = range.high;
    else if ('timestamp' in to) {
      const at = inputs.atTimestamp?.get(p);
      target = at === undefined || at < 0n ? range.high : at;
    } else target = BigInt(to.offsets[String(p)]!);
    if (target < range.low || target > range.high)
      return refuse(
        `partition ${p}: offset ${target} is outside what the brokers hold, [${range.low}, ${range.high}] (log start to high watermark)`,
      );
    targets[String(p)] = target.toString();
  }
  return { ok: true, targets, to: describeTarget(request.to) };
}
