// What a reset did to a partition's offsets, for the accounting (tiling, the query's answers): a
// reset forward skipped [from, to) on purpose, one backward reads [to, from) again on purpose.
import type { ResetRecord } from './offset-reset.ts';

export interface ResetRange {
  partition: number;
  kind: 'skipped' | 'reread';
  from: bigint;
  to: bigint;
  /** The reset's id. */
  reset: string;
  /** The epoch the partition restarted under. */
  epoch: number;
}

/** The range one partition's reset skipped or re-reads; undefined when it restarted where it was. */
export function resetRange(
  reset: string,
  p: { partition: number; from: string; to: string; epoch: number },
): ResetRange | undefined {
  const from = BigInt(p.from);
  const to = BigInt(p.to);
  if (from === to) return undefined;
  return from < to
    ? { partition: p.partition, kind: 'skipped', from, to, reset, epoch: p.epoch }
    : { partition: p.partition, kind: 'reread', from: to, to: from, reset, epoch: p.epoch };
}

/** Every applied reset's ranges, oldest first. */
export function resetRanges(records: readonly ResetRecord[] | undefined): ResetRange[] {
  return (records ?? [])
    .filter((r) => r.result === 'Applied')
    .flatMap((r) => (r.partitions ?? []).flatMap((p) => resetRange(r.id, p) ?? []));
}

/**
 * The replay a partition's epoch belongs to: how many resets backward the partition had at or
 * before that epoch. Two copies of an offset in different replays are both counted (the user
 * asked to read it again); within one replay an offset counts once.
 */
export function replayOf(ranges: readonly ResetRange[], partition: number, epoch: number): number {
  let n = 0;
  for (const r of ranges)
    if (r.partition === partition && r.kind === 'reread' && r.epoch <= epoch) n++;
  return n;
}

/** The text an answer gives a range: "skipped by reset <id>" or "re-read after reset <id>". */
export const resetRangeReason = (r: Pick<ResetRange, 'kind' | 'reset'>): string =>
  r.kind === 'skipped' ? `skipped by reset ${r.reset}` : `re-read after reset ${r.reset}`;

/** What a reader of the cube's offsets needs of its resets (the query's merge). */
export interface ResetAccounting {
  ranges: ResetRange[];
  /** partition, epoch → its replay (replayOf). */
  replayOf: (partition: number, epoch: number) => number;
  /** Names the applied resets: a merge kept under another key counted without some of them. */
  key: string;
}

export function resetAccounting(records: readonly ResetRecord[] | undefined): ResetAccounting {
  const ranges = resetRanges(records);
  const rereads = ranges.filter((r) => r.kind === 'reread');
  return {
    ranges,
    replayOf: (p, epoch) => (rereads.length === 0 ? 0 : replayOf(rereads, p, epoch)),
    key: [...new Set(ranges.map((r) => r.reset))].join(','),
  };
}

/** The offsets resets skipped, by partition, merged: accounted for, never a gap. */
export function skippedByResets(
  records: readonly ResetRecord[] | undefined,
): Map<number, { from: bigint; to: bigint }[]> {
  const out = new Map<number, { from: bigint; to: bigint }[]>();
  for (const r of resetRanges(records)) {
    if (r.kind !== 'skipped') continue;
    const list = out.get(r.partition) ?? [];
    list.push({ from: r.from, to: r.to });
    out.set(
      r.partition,
      list.sort((a, b) => (a.from < b.from ? -1 : a.from > b.from ? 1 : 0)),
    );
  }
  return out;
}
