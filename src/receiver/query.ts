// The query over one cube's segments on this receiver: filter, group, combine measures. Pure: a
// function of the schema and the segments; handed-off segments answer from deep storage instead.
// By segment, it also answers each live segment apart with its offsets, for the query service's
// merge with the committed view (src/query/). A sum with a scale answers as a decimal string,
// added in the units its segments hold (src/api/scaled-sum.ts).
import type { CubeSchema } from '../api/cube.ts';
import { exactScaleOf, formatUnits } from '../api/scaled-sum.ts';
import type { QueryPiece, QueryResponse } from '../protocol/admin-api.ts';
import { ChannelError } from './channel-error.ts';
import { type OffsetRange, addRange, rangeMapToJson, rangesToJson } from './offset-ranges.ts';
import {
  type PartitionClock,
  type Row,
  type Segment,
  combine,
  epochsToJson,
  generationOf,
  reasonCountsToJson,
  rejectedToJson,
} from './segments.ts';

export interface CubeQuery {
  from?: number | undefined;
  to?: number | undefined;
  filters: Record<string, string[]>;
  groupBy: string[];
  measures?: string[] | undefined;
  bySegment?: boolean | undefined;
}

type Rows = QueryResponse['rows'];

export function querySegments(
  cube: string,
  schema: CubeSchema,
  segments: Iterable<Segment>,
  q: CubeQuery,
  clocks?: ReadonlyMap<
    number,
    Readonly<Pick<PartitionClock, 'pending'> & Partial<Pick<PartitionClock, 'pendingRejected'>>>
  >,
  /** The offsets Kafka deleted right before a segment's ranges (LostOffsets.before). */
  lostBefore?: (segment: Segment) => Map<number, OffsetRange[]>,
): QueryResponse {
  const dimIndex = (name: string, field: string): number => {
    const i = schema.dimensions.indexOf(name);
    if (i < 0) throw new ChannelError('Invalid', `cube ${cube} has no dimension '${name}'`, field);
    return i;
  };
  const groupIdx = q.groupBy.map((d, i) => dimIndex(d, `groupBy.${i}`));
  const filters = Object.entries(q.filters).map(([d, values]) => ({
    i: dimIndex(d, `filters.${d}`),
    values: new Set(values),
  }));
  const measureNames = q.measures ?? schema.measures.map((m) => m.name);
  const measureIdx = measureNames.map((name, i) => {
    const idx = schema.measures.findIndex((m) => m.name === name);
    if (idx < 0)
      throw new ChannelError('Invalid', `cube ${cube} has no measure '${name}'`, `measures.${i}`);
    return idx;
  });
  const scales = measureIdx.map((i) => exactScaleOf(schema.measures[i]!));
  const valueOf = (row: Row, j: number): number | bigint => {
    const v = row.values[measureIdx[j]!] ?? 0;
    return scales[j] === undefined ? v : BigInt(v);
  };
  type Groups = Map<string, { dims: string[]; values: (number | bigint)[] }>;
  const addRows = (groups: Groups, s: Segment): void => {
    for (const row of s.rows.values()) {
      if (!filters.every((f) => f.values.has(row.dimensions[f.i] ?? ''))) continue;
      const dims = groupIdx.map((i) => row.dimensions[i] ?? '');
      const key = JSON.stringify(dims);
      const g = groups.get(key);
      if (!g) {
        groups.set(key, { dims, values: measureIdx.map((_, j) => valueOf(row, j)) });
      } else {
        measureIdx.forEach((mi, j) => {
          const a = g.values[j]!;
          const b = valueOf(row, j);
          g.values[j] =
            typeof a === 'bigint'
              ? a + (b as bigint)
              : combine(schema.measures[mi]!.function, a, b as number);
        });
      }
    }
  };
  const rowsOf = (groups: Groups): Rows =>
    [...groups.values()]
      .sort((a, b) => (a.dims.join('\u0000') < b.dims.join('\u0000') ? -1 : 1))
      .map((g) => [
        ...g.dims,
        ...g.values.map((v, j) => (typeof v === 'bigint' ? formatUnits(v, scales[j]!) : v)),
      ]);

  const groups: Groups = new Map();
  const covered = new Map<number, OffsetRange[]>();
  const pieces: QueryPiece[] = [];
  const heldTo = new Map<number, bigint>();
  const holds = (p: number, to: bigint): void => {
    if (to > (heldTo.get(p) ?? -1n)) heldTo.set(p, to);
  };
  let answered = 0;
  for (const s of segments) {
    for (const [p, ranges] of s.ranges) for (const r of ranges) holds(p, r.to);
    if (s.state === 'HANDED_OFF') continue;
    const inRange =
      !(q.from !== undefined && s.windowEnd <= q.from) &&
      !(q.to !== undefined && s.windowStart >= q.to);
    if (q.bySegment) {
      const own: Groups = new Map();
      if (inRange) addRows(own, s);
      const generation = generationOf(s);
      const lost = lostBefore?.(s);
      pieces.push({
        windowStart: s.windowStart,
        windowEnd: s.windowEnd,
        ...(generation > 0 ? { generation } : {}),
        epochs: epochsToJson(s.epochs),
        offsetRanges: rangeMapToJson(s.ranges),
        inRange,
        rows: rowsOf(own),
        ...(s.rejected ? { rejected: rejectedToJson(s.rejected) } : {}),
        ...(lost && lost.size > 0 ? { lostRanges: rangeMapToJson(lost) } : {}),
      });
    }
    if (!inRange) continue;
    answered += 1;
    for (const [p, ranges] of s.ranges) {
      const acc = covered.get(p) ?? [];
      for (const r of ranges) addRange(acc, r.from, r.to);
      covered.set(p, acc);
    }
    addRows(groups, s);
  }
  const answer: QueryResponse = {
    columns: [...q.groupBy, ...measureNames],
    rows: rowsOf(groups),
    offsetRanges: rangeMapToJson(covered),
    segments: answered,
  };
  if (!q.bySegment) return answer;
  const held: NonNullable<QueryResponse['held']> = {};
  for (const [p, clock] of clocks ?? []) for (const r of clock.pending) holds(p, r.to);
  for (const [p, to] of heldTo) {
    const clock = clocks?.get(p);
    held[String(p)] = {
      to: to.toString(),
      pending: rangesToJson(clock?.pending ?? []),
      ...(clock?.pendingRejected
        ? { pendingRejected: reasonCountsToJson(clock.pendingRejected) }
        : {}),
    };
  }
  return { ...answer, pieces, held };
}
