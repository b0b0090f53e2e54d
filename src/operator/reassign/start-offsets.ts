// Where partitions start when no replica set's position says so: new partitions at the brokers'
// starting offsets, and a partition's current epoch where status.epochStarts recorded it.
import { classifySourceError } from '../../kafka/source-security.ts';
import type { ReassignContext } from './context.ts';
import { noOffsetsReported, offsetsUnreadable } from './messages.ts';
import { PhaseBlocked } from './outcome.ts';

/**
 * Where new partitions start, as the brokers say. A Kafka error (brokers down, a partition whose
 * leader is not elected yet) blocks the phase, reported as Degraded and retried at the blocked
 * pace like a receiver's failure, not left to the controller's growing backoff.
 */
export async function startingOffsetsOf(
  ctx: ReassignContext,
  partitions: number[],
): Promise<Map<number, bigint>> {
  ctx.signal.throwIfAborted();
  try {
    const offsets = await ctx.startingOffsets(partitions);
    const missing = partitions.filter((p) => !offsets.has(p));
    if (missing.length > 0) throw new Error(noOffsetsReported(missing));
    return offsets;
  } catch (error) {
    ctx.signal.throwIfAborted();
    const { topic, brokers } = ctx.object.spec.source;
    const cause = error instanceof Error ? error : new Error(String(error));
    throw new PhaseBlocked(
      classifySourceError(error) ?? 'SourceUnavailable',
      offsetsUnreadable(partitions, topic, brokers, cause.message),
      { cause },
    );
  }
}

/**
 * Where each of `partitions`' current epoch began (status.epochStarts), or, where none is
 * recorded, where it starts by spec.source.startingOffsets.
 */
export async function epochStartOf(
  ctx: ReassignContext,
  partitions: number[],
): Promise<(partition: number) => bigint> {
  const epochStarts = ctx.object.status?.epochStarts ?? {};
  const unknown = partitions.filter((p) => epochStarts[String(p)] === undefined);
  const fallback = unknown.length > 0 ? await startingOffsetsOf(ctx, unknown) : new Map();
  return (p) => BigInt(epochStarts[String(p)] ?? String(fallback.get(p) ?? 0n));
}
