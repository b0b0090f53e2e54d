// Sorted, disjoint, half-open offset ranges [from, to): the per-partition coverage of a segment,
// and the check that the segments of a partition tile its log with no gap and no overlap.

export interface OffsetRange {
  from: bigint;
  to: bigint;
}

/** Adds [from, to) to sorted disjoint `ranges` in place, merging with neighbours it touches. */
export function addRange(ranges: OffsetRange[], from: bigint, to: bigint): void {
  if (to <= from) return;
  const last = ranges[ranges.length - 1];
  // The common case: offsets arrive in order, extending the last run.
  if (last && from >= last.from && from <= last.to) {
    if (to > last.to) last.to = to;
    return;
  }
  ranges.push({ from, to });
  ranges.sort((a, b) => (a.from < b.from ? -1 : a.from > b.from ? 1 : 0));
  const merged: OffsetRange[] = [];
  for (const r of ranges) {
    const prev = merged[merged.length - 1];
    if (prev && r.from <= prev.to) {
      if (r.to > prev.to) prev.to = r.to;
    } else merged.push({ ...r });
  }
  ranges.splice(0, ranges.length, ...merged);
}

export type RangeJson = [string, string];

export const rangesToJson = (ranges: OffsetRange[]): RangeJson[] =>
  ranges.map((r) => [r.from.toString(), r.to.toString()]);

export const rangesFromJson = (json: RangeJson[]): OffsetRange[] =>
  json.map(([from, to]) => ({ from: BigInt(from), to: BigInt(to) }));

export interface TilingProblem {
  kind: 'gap' | 'overlap';
  from: bigint;
  to: bigint;
}

/**
 * Checks that `ranges` (from any number of segments) cover [start, end) exactly once. Returns the
 * gaps and overlaps found, empty when the ranges tile the interval.
 */
export function tilingProblems(ranges: OffsetRange[], start: bigint, end: bigint): TilingProblem[] {
  const sorted = [...ranges].sort((a, b) => (a.from < b.from ? -1 : a.from > b.from ? 1 : 0));
  const problems: TilingProblem[] = [];
  let cursor = start;
  for (const r of sorted) {
    if (r.from > cursor) problems.push({ kind: 'gap', from: cursor, to: r.from });
    if (r.from < cursor)
      problems.push({ kind: 'overlap', from: r.from, to: r.to < cursor ? r.to : cursor });
    if (r.to > cursor) cursor = r.to;
  }
  if (cursor < end) problems.push({ kind: 'gap', from: cursor, to: end });
  if (cursor > end) problems.push({ kind: 'overlap', from: end, to: cursor });
  return problems;
}
