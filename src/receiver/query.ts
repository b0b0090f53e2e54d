// The query over one cube's segments on this receiver: filter, group, combine measures. Pure: a
// function of the schema and the segments; handed-off segments answer from deep storage instead.
import type { CubeSchema } from '../api/cube.ts';
import type { QueryResponse } from '../protocol/admin-api.ts';
import { ChannelError } from './channel-error.ts';
import { type OffsetRange, addRange, rangeMapToJson } from './offset-ranges.ts';
import { type Segment, combine } from './segments.ts';

export interface CubeQuery {
  from?: number | undefined;
  to?: number | undefined;
  filters: Record<string, string[]>;
  groupBy: string[];
  measures?: string[] | undefined;
}

export function querySegments(
  cube: string,
  schema: CubeSchema,
  segments: Iterable<Segment>,
  q: CubeQuery,
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
  const groups = new Map<string, { dims: string[]; values: number[] }>();
  const covered = new Map<number, OffsetRange[]>();
  let answered = 0;
  for (const s of segments) {
    if (s.state === 'HANDED_OFF') continue;
    if (q.from !== undefined && s.windowEnd <= q.from) continue;
    if (q.to !== undefined && s.windowStart >= q.to) continue;
    answered += 1;
    for (const [p, ranges] of s.ranges) {
      const acc = covered.get(p) ?? [];
      for (const r of ranges) addRange(acc, r.from, r.to);
      covered.set(p, acc);
    }
    for (const row of s.rows.values()) {
      if (!filters.every((f) => f.values.has(row.dimensions[f.i] ?? ''))) continue;
      const dims = groupIdx.map((i) => row.dimensions[i] ?? '');
      const key = JSON.stringify(dims);
      const g = groups.get(key);
      if (!g) {
        groups.set(key, { dims, values: measureIdx.map((i) => row.values[i] ?? 0) });
      } else {
        measureIdx.forEach((mi, j) => {
          g.values[j] = combine(schema.measures[mi]!.function, g.values[j]!, row.values[mi]!);
        });
      }
    }
  }
  const rows = [...groups.values()]
    .sort((a, b) => (a.dims.join('\u0000') < b.dims.join('\u0000') ? -1 : 1))
    .map((g) => [...g.dims, ...g.values]);
  return {
    columns: [...q.groupBy, ...measureNames],
    rows,
    offsetRanges: rangeMapToJson(covered),
    segments: answered,
  };
}
