// From the pieces the merge counted to the rows of an answer: filter, time buckets, group,
// combine measures, order, top N, and the bound on rows. Pure. A sum with a scale is held as
// bigint units from the piece on, and answered as a decimal string (src/api/scaled-sum.ts).
import type { CubeSchema, MeasureFunction } from '../api/cube.ts';
import { exactScaleOf, formatUnits, parseUnits } from '../api/scaled-sum.ts';
import { combine } from '../receiver/segments.ts';
import type { HandOffRow } from './committed-view.ts';
import { QueryError, type ResolvedQuery, timeColumn } from './request.ts';

/** Rows of one piece: values of fetchDimensions(q), then the query's measures. */
export interface PieceRow {
  dims: string[];
  /** bigint: units of a scaled sum's scale. */
  values: MeasureValue[];
}

export type MeasureValue = number | bigint;

type Schema = Pick<CubeSchema, 'dimensions' | 'measures'>;

/** The scale of each of the query's measures that is an exact sum; undefined for the others. */
const scalesOf = (schema: Schema, q: Pick<ResolvedQuery, 'measures'>): (number | undefined)[] =>
  q.measures.map((m) => exactScaleOf(schema.measures[m]!));

/** Two values of one measure combined: scaled sums add as bigint, the others by the function. */
export function combineValues(fn: MeasureFunction, a: MeasureValue, b: MeasureValue): MeasureValue {
  if (typeof a === 'bigint' && typeof b === 'bigint') return a + b;
  return combine(fn, Number(a), Number(b));
}

/**
 * The dimensions asked of every piece: the groupBy, then those a `notIn` filter reads (the
 * receivers filter `in` themselves; `notIn` is applied here).
 */
export function fetchDimensions(q: ResolvedQuery): string[] {
  return [...q.groupBy, ...[...q.drop.keys()].filter((d) => !q.groupBy.includes(d))];
}

/** A committed hand-off's rows (every dimension and measure) as a piece's rows, grouped. */
export function pieceRowsOfHandOff(
  rows: HandOffRow[],
  schema: Schema,
  q: ResolvedQuery,
): PieceRow[] {
  const scales = scalesOf(schema, q);
  const at = (d: string): number => schema.dimensions.indexOf(d);
  const keep = [...q.keep].map(([d, values]) => ({ i: at(d), values }));
  const dims = fetchDimensions(q).map(at);
  const groups = new Map<string, PieceRow>();
  for (const row of rows) {
    if (!keep.every((k) => k.values.has(row.dimensions[k.i] ?? ''))) continue;
    const key = dims.map((i) => row.dimensions[i] ?? '');
    const id = JSON.stringify(key);
    // A scaled sum comes as units already (committed-view.ts).
    const values = q.measures.map((m, j): MeasureValue =>
      scales[j] === undefined ? Number(row.values[m] ?? 0) : BigInt(row.values[m] ?? 0),
    );
    const g = groups.get(id);
    if (!g) groups.set(id, { dims: key, values });
    else
      q.measures.forEach((m, j) => {
        g.values[j] = combineValues(schema.measures[m]!.function, g.values[j]!, values[j]!);
      });
  }
  return [...groups.values()];
}

/**
 * A receiver's rows of one segment ([...fetchDimensions, ...measures]) as a piece's rows; a scaled
 * sum comes as a decimal string (as a number from a receiver of before).
 */
export function pieceRowsOfLive(
  rows: (string | number)[][],
  dimensions: number,
  schema: Schema,
  q: ResolvedQuery,
): PieceRow[] {
  const scales = scalesOf(schema, q);
  return rows.map((r) => ({
    dims: r.slice(0, dimensions).map(String),
    values: r.slice(dimensions).map((v, j) => {
      const scale = scales[j];
      return scale === undefined ? Number(v) : parseUnits(v, scale);
    }),
  }));
}

export interface AnswerRows {
  columns: string[];
  /** A scaled sum is a decimal string with its scale's digits. */
  rows: (string | number)[][];
}

/** What the answer's rows are made of: each counted piece's window start and rows. */
export interface CountedRows {
  windowStart: number;
  windowEnd: number;
  rows: PieceRow[];
}

const inTimeRange = (q: ResolvedQuery, start: number, end: number): boolean =>
  !(q.from !== undefined && end <= q.from) && !(q.to !== undefined && start >= q.to);

export function buildAnswer(
  pieces: Iterable<CountedRows>,
  schema: Schema,
  q: ResolvedQuery,
  maxRows: number,
): AnswerRows {
  const fetched = fetchDimensions(q);
  const drop = [...q.drop].map(([d, values]) => ({ i: fetched.indexOf(d), values }));
  const functions = q.measures.map((m) => schema.measures[m]!.function);
  const scales = scalesOf(schema, q);
  const groups = new Map<
    string,
    { time: number | undefined; dims: string[]; values: MeasureValue[] }
  >();
  for (const piece of pieces) {
    if (!inTimeRange(q, piece.windowStart, piece.windowEnd)) continue;
    const time =
      q.granularityMs === undefined
        ? undefined
        : Math.floor(piece.windowStart / q.granularityMs) * q.granularityMs;
    for (const row of piece.rows) {
      if (drop.some((f) => f.values.has(row.dims[f.i] ?? ''))) continue;
      const dims = row.dims.slice(0, q.groupBy.length);
      const id = JSON.stringify([time, dims]);
      const g = groups.get(id);
      if (!g) groups.set(id, { time, dims, values: [...row.values] });
      else
        functions.forEach((fn, j) => {
          g.values[j] = combineValues(fn, g.values[j]!, row.values[j]!);
        });
    }
  }
  const columns = [
    ...(q.granularityMs === undefined ? [] : [timeColumn]),
    ...q.groupBy,
    ...q.measureNames,
  ];
  const rows = [...groups.values()].map((g): (string | number | bigint)[] => [
    ...(g.time === undefined ? [] : [new Date(g.time).toISOString()]),
    ...g.dims,
    ...g.values,
  ]);
  const order =
    q.orderBy.length > 0
      ? q.orderBy
      : columns
          .slice(0, columns.length - q.measureNames.length)
          .map((field) => ({ field, direction: 'asc' as const }));
  const keys = order.map((o) => ({
    i: columns.indexOf(o.field),
    sign: o.direction === 'asc' ? 1 : -1,
  }));
  rows.sort((a, b) => {
    for (const k of keys) {
      const x = a[k.i]!;
      const y = b[k.i]!;
      if (x !== y) return (x < y ? -1 : 1) * k.sign;
    }
    return 0;
  });
  const limited = q.limit === undefined ? rows : rows.slice(0, q.limit);
  if (limited.length > maxRows)
    throw new QueryError(
      400,
      `limit: the answer has ${limited.length} rows, more than the bound of ${maxRows}: set a limit, a coarser granularity or fewer groupBy dimensions`,
      'limit',
    );
  const firstMeasure = columns.length - q.measureNames.length;
  return {
    columns,
    rows: limited.map((row) =>
      row.map((v, i) =>
        typeof v === 'bigint' ? formatUnits(v, scales[i - firstMeasure] ?? 0) : v,
      ),
    ),
  };
}
