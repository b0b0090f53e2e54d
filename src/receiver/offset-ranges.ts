// Sorted, disjoint, half-open offset ranges [from, to): the per-partition coverage of a segment,
// and the check that the segments of a partition tile its log with no gap and no overlap.

export interface OffsetRange {
  from: bigint;
  to: bigint;
}

/**
 * Adds [from, to) to sorted disjoint `ranges` in place, merging with neighbours it touches. The
 * place is found by binary search: an out-of-order offset costs O(log n) comparisons, not a sort.
 */
export function addRange(ranges: OffsetRange[], from: bigint, to: bigint): void {
  if (to <= from) return;
  const last = ranges[ranges.length - 1];
  // The common case: offsets arrive in order, extending the last run.
  if (last && from >= last.from && from <= last.to) {
    if (to > last.to) last.to = to;
    return;
  }
  // First range that ends at or after `from`: the first one [from, to) can touch.
  let lo = 0;
  let hi = ranges.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (ranges[mid]!.to < from) lo = mid + 1;
    else hi = mid;
  }
  // Every range from `lo` that starts at or before `to` touches it and merges into one.
  let end = lo;
  let mergedFrom = from;
  let mergedTo = to;
  while (end < ranges.length && ranges[end]!.from <= to) {
    const r = ranges[end]!;
    if (r.from < mergedFrom) mergedFrom = r.from;
    if (r.to > mergedTo) mergedTo = r.to;
    end += 1;
  }
  if (end === lo + 1) {
    const r = ranges[lo]!;
    r.from = mergedFrom;
    r.to = mergedTo;
  } else {
    ranges.splice(lo, end - lo, { from: mergedFrom, to: mergedTo });
  }
}

export type RangeJson = [string, string];

export const rangesToJson = (ranges: OffsetRange[]): RangeJson[] =>
  ranges.map((r) => [r.from.toString(), r.to.toString()]);

export const rangesFromJson = (json: RangeJson[]): OffsetRange[] =>
  json.map(([from, to]) => ({ from: BigInt(from), to: BigInt(to) }));

/** Per-partition ranges as JSON, keyed by partition number: status, query, checkpoint, manifest. */
export const rangeMapToJson = (ranges: Map<number, OffsetRange[]>): Record<string, RangeJson[]> =>
  Object.fromEntries([...ranges].map(([p, r]) => [String(p), rangesToJson(r)]));

export const rangeMapFromJson = (json: Record<string, RangeJson[]>): Map<number, OffsetRange[]> =>
  new Map(Object.entries(json).map(([p, r]) => [Number(p), rangesFromJson(r)]));

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
