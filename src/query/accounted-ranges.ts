// Offsets an answer accounts for without counting them: ranges no piece holds and none ever will,
// each with the reason (`retention`: Kafka deleted them before any replica read them). They close
// a partition's gaps only where a source names them; a gap no source explains stays missing.
import type { CubeAssignment } from '../api/cube-assignment.ts';
import { type OffsetRange, addRange, rangeMapFromJson } from '../receiver/offset-ranges.ts';

export type AccountedReason = 'retention';

/** Per partition, the ranges known to be gone for `reason`, merged and sorted. */
export type AccountedRanges = Map<number, Map<AccountedReason, OffsetRange[]>>;

/** One range of a partition the answer accounts for apart, as an answer shows it. */
export interface AccountedRangeJson {
  from: string;
  to: string;
  reason: AccountedReason;
}

/** Adds `ranges` of each partition (JSON, as statuses and records hold them) under `reason`. */
export function addAccounted(
  into: AccountedRanges,
  reason: AccountedReason,
  ranges: Map<number, OffsetRange[]> | Record<string, [string, string][]> | undefined,
): AccountedRanges {
  const map = ranges instanceof Map ? ranges : rangeMapFromJson(ranges ?? {});
  for (const [p, list] of map) {
    let byReason = into.get(p);
    if (!byReason) into.set(p, (byReason = new Map<AccountedReason, OffsetRange[]>()));
    const acc = byReason.get(reason) ?? [];
    for (const r of list) addRange(acc, r.from, r.to);
    byReason.set(reason, acc);
  }
  return into;
}

/** The lost ranges the cube's status shows (its receivers' reports, through the operator). */
export function lostInStatus(cube: Pick<CubeAssignment, 'status'>): Map<number, OffsetRange[]> {
  const out = new Map<number, OffsetRange[]>();
  for (const row of cube.status?.partitions ?? []) {
    if (!row.lostRanges?.length) continue;
    const acc = out.get(row.partition) ?? [];
    for (const r of row.lostRanges) addRange(acc, BigInt(r.from), BigInt(r.to));
    out.set(row.partition, acc);
  }
  return out;
}

/**
 * The offsets before where a cube reading from the earliest offset began each partition: Kafka
 * had deleted them when the cube was first placed (its log start was past 0). Where it began is
 * `status.firstOffsets`; for a cube written before that field, `epochStarts` while the partition
 * is still in its first epoch. A cube reading from the latest offset never had them to read.
 */
export function deletedBeforeTheCube(
  cube: Pick<CubeAssignment, 'spec' | 'status'>,
): Map<number, OffsetRange[]> {
  const out = new Map<number, OffsetRange[]>();
  if (cube.spec.source.startingOffsets === 'latest') return out;
  for (const [p, first] of whereTheCubeBegan(cube))
    if (first > 0n) out.set(p, [{ from: 0n, to: first }]);
  return out;
}

/**
 * Partition → the offset the cube began reading it at, where known: `status.firstOffsets`; for a
 * cube written before that field, `epochStarts` while the partition is still in its first epoch.
 * An offset reset that restarted a partition before it (a cube from the latest offset reset to
 * the earliest) moves it back there: what it read again is the cube's.
 */
export function whereTheCubeBegan(cube: Pick<CubeAssignment, 'status'>): Map<number, bigint> {
  const status = cube.status;
  const out = new Map<number, bigint>();
  const partitions = new Set([
    ...Object.keys(status?.firstOffsets ?? {}),
    ...Object.keys(status?.epochStarts ?? {}),
  ]);
  for (const p of partitions) {
    const first =
      status?.firstOffsets?.[p] ??
      (status?.epochs?.[p] === 1 ? status.epochStarts?.[p] : undefined);
    if (first !== undefined) out.set(Number(p), BigInt(first));
  }
  for (const reset of status?.resets ?? [])
    for (const r of reset.partitions ?? []) {
      const first = out.get(r.partition);
      if (first !== undefined && BigInt(r.to) < first) out.set(r.partition, BigInt(r.to));
    }
  return out;
}

/**
 * What of `gaps` (a partition's offsets no piece holds, merged and sorted) the accounted ranges
 * explain, with their reasons, and the gaps left: those stay missing.
 */
export function explainGaps(
  gaps: OffsetRange[],
  accounted: Map<AccountedReason, OffsetRange[]> | undefined,
): { explained: AccountedRangeJson[]; left: OffsetRange[] } {
  const explained: (OffsetRange & { reason: AccountedReason })[] = [];
  const known: OffsetRange[] = [];
  for (const [reason, ranges] of accounted ?? [])
    for (const gap of gaps)
      for (const r of ranges) {
        const from = r.from > gap.from ? r.from : gap.from;
        const to = r.to < gap.to ? r.to : gap.to;
        if (from >= to) continue;
        explained.push({ from, to, reason });
        addRange(known, from, to);
      }
  explained.sort((a, b) => (a.from < b.from ? -1 : a.from > b.from ? 1 : 0));
  const left: OffsetRange[] = [];
  for (const gap of gaps) {
    let from = gap.from;
    for (const k of known) {
      if (k.to <= from || k.from >= gap.to) continue;
      if (k.from > from) left.push({ from, to: k.from });
      from = k.to;
    }
    if (from < gap.to) left.push({ from, to: gap.to });
  }
  return {
    explained: explained.map((r) => ({
      from: r.from.toString(),
      to: r.to.toString(),
      reason: r.reason,
    })),
    left,
  };
}
