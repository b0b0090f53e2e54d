// Offsets Kafka deleted before a replica set read them, as the operator shows them: per partition
// the ranges its receivers report, merged, and which of them no status written before names yet —
// each of those is one OffsetsLost Event, once, however often it is observed.
import type { ObservedPartition } from '../api/cube-assignment.ts';
import type { PartitionStatus } from '../protocol/admin-api.ts';

type Range = [string, string];
type RangeRow = NonNullable<ObservedPartition['lostRanges']>[number];

const rangeKey = ([from, to]: Range): string => `${from}-${to}`;
const rowKey = ({ from, to }: RangeRow): string => `${from}-${to}`;

/** The replicas' lost offsets of one partition: the largest total, the union of the ranges. */
export function mergeLostOffsets(
  reports: readonly Pick<PartitionStatus, 'lostOffsets' | 'lostRanges'>[],
  listed = 10,
): Pick<ObservedPartition, 'lostOffsets' | 'lostRanges'> {
  let total: bigint | undefined;
  const ranges = new Map<string, Range>();
  for (const r of reports) {
    if (r.lostOffsets !== undefined && (total === undefined || BigInt(r.lostOffsets) > total))
      total = BigInt(r.lostOffsets);
    for (const range of r.lostRanges ?? []) ranges.set(rangeKey(range), range);
  }
  if (total === undefined) return {};
  const sorted = [...ranges.values()].sort((a, b) => {
    const d = BigInt(a[0]) - BigInt(b[0]);
    return d < 0n ? -1 : d > 0n ? 1 : 0;
  });
  return {
    lostOffsets: total.toString(),
    lostRanges: sorted.slice(-listed).map(([from, to]) => ({ from, to })),
  };
}

/** Ranges of the observed rows that the written rows do not name: to be told, once each. */
export function newlyLostRanges(
  written: readonly ObservedPartition[] | undefined,
  observed: readonly ObservedPartition[],
): { partition: number; replicaSet: string; range: Range }[] {
  const told = new Set(
    (written ?? []).flatMap((row) =>
      (row.lostRanges ?? []).map((r) => `${row.partition}/${rowKey(r)}`),
    ),
  );
  return observed.flatMap((row) =>
    (row.lostRanges ?? [])
      .filter((r) => !told.has(`${row.partition}/${rowKey(r)}`))
      .map(({ from, to }) => ({
        partition: row.partition,
        replicaSet: row.replicaSet,
        range: [from, to] as Range,
      })),
  );
}

/** The Event's text for one lost range: where, how many, and what it means for the cube. */
export function offsetsLostMessage(lost: {
  partition: number;
  replicaSet: string;
  range: Range;
}): string {
  const [from, to] = lost.range;
  const count = BigInt(to) - BigInt(from);
  return `partition ${lost.partition}: offsets [${from}, ${to}) (${count} record${count === 1n ? '' : 's'}) were deleted by Kafka (retention) before replica set ${lost.replicaSet} read them; the cube does not contain them, and consumption goes on from offset ${to}`;
}
