// A topic's offsets as kafkajs's admin reads them, with the workaround the operator and the
// receivers both need: kafkajs's admin keeps a topic's metadata for five minutes, so partitions
// added to the topic since are missing from its answer until a fresh client reads them.
import type { Admin } from 'kafkajs';

export interface PartitionOffsets {
  low: bigint;
  high: bigint;
}

/**
 * The offsets of `topic` by partition. When one of `expected` is missing and `renew` is given,
 * `renew` replaces the client (the next `admin()` connects afresh) and the read is made once more.
 * A partition still missing after that is left out: the caller decides what that means.
 */
export async function readTopicOffsets(
  topic: string,
  expected: Iterable<number>,
  admin: () => Promise<Admin>,
  renew?: () => Promise<void>,
): Promise<Map<number, PartitionOffsets>> {
  const read = async (): Promise<Map<number, PartitionOffsets>> =>
    new Map(
      (await (await admin()).fetchTopicOffsets(topic)).map((o) => [
        o.partition,
        { low: BigInt(o.low), high: BigInt(o.high) },
      ]),
    );
  const offsets = await read();
  if (!renew || [...expected].every((p) => offsets.has(p))) return offsets;
  await renew();
  return read();
}
