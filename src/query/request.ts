// A query of the query service: its body as one zod definition (shape), and its reading against
// the cube's schema (names, time range, granularity), every refusal a QueryError naming the field.
import { z } from 'zod';
import { type CubeSchema, identifier } from '../api/cube.ts';
import { parseDuration } from '../api/duration.ts';

export class QueryError extends Error {
  readonly status: 400 | 404 | 413 | 503;
  readonly field: string | undefined;
  constructor(status: QueryError['status'], message: string, field?: string) {
    super(message);
    this.name = 'QueryError';
    this.status = status;
    this.field = field;
  }
}

/** Epoch milliseconds, or an ISO-8601 date-time. */
const instant = z.union([z.number().int(), z.iso.datetime({ offset: true })]);

export const timeColumn = 'time';

export const queryBody = z.strictObject({
  /** Event-time range [from, to): windows that start before `to` and end after `from` answer. */
  from: instant.optional(),
  to: instant.optional(),
  /** `all` (one bucket), the cube's window, or a multiple of it: `5m`, `1h`, `1d`. */
  granularity: z.string().max(32).default('all'),
  /** dimension → values kept (`in`) or left out (`notIn`). */
  filters: z
    .record(
      identifier,
      z.union([
        z.strictObject({ in: z.array(z.string()).max(10_000) }),
        z.strictObject({ notIn: z.array(z.string()).max(10_000) }),
      ]),
    )
    .default({}),
  groupBy: z.array(identifier).max(32).default([]),
  /** Measures answered, in this order; all of the cube's when absent. */
  measures: z.array(identifier).max(64).optional(),
  /** Sort keys: a measure, a dimension of `groupBy`, or `time`; the default is time then groupBy. */
  orderBy: z
    .array(
      z.strictObject({
        field: z.string().max(64),
        direction: z.enum(['asc', 'desc']).default('asc'),
      }),
    )
    .max(8)
    .default([]),
  /** Rows answered at most, after ordering: the top N. */
  limit: z.number().int().min(1).optional(),
  /** Answer 503 with the reason rather than an answer that cannot prove it counted every offset. */
  requireComplete: z.boolean().default(false),
});
export type QueryBody = z.input<typeof queryBody>;

/** A query read against its cube's schema: every name known, every number in range. */
export interface ResolvedQuery {
  from: number | undefined;
  to: number | undefined;
  /** Bucket width in ms; undefined: `all`. */
  granularityMs: number | undefined;
  /** Kept values per dimension (`in`), and left-out values (`notIn`). */
  keep: Map<string, Set<string>>;
  drop: Map<string, Set<string>>;
  groupBy: string[];
  /** Indexes into the schema's measures, in answer order. */
  measures: number[];
  measureNames: string[];
  orderBy: { field: string; direction: 'asc' | 'desc' }[];
  limit: number | undefined;
  requireComplete: boolean;
}

const dayMs = 86_400_000;

/** A granularity's width: a duration (`1h30m`) or whole days (`1d`, `7d`). */
export function granularityMs(text: string): number | undefined {
  const days = /^([0-9]{1,4})d$/.exec(text);
  if (days) return Number(days[1]) * dayMs || undefined;
  return parseDuration(text);
}

const toMs = (value: number | string): number =>
  typeof value === 'number' ? value : Date.parse(value);

/** Reads `body` (parsed JSON) against the cube's schema; throws QueryError (400) naming the field. */
export function resolveQuery(body: unknown, schema: CubeSchema): ResolvedQuery {
  const parsed = queryBody.safeParse(body ?? {});
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const field = issue?.path.join('.') || undefined;
    throw new QueryError(400, `${field ?? 'body'}: ${issue?.message ?? 'invalid'}`, field);
  }
  const q = parsed.data;
  const dimension = (name: string, field: string): string => {
    if (!schema.dimensions.includes(name))
      throw new QueryError(
        400,
        `${field}: the cube has no dimension '${name}' (it has ${schema.dimensions.join(', ') || 'none'})`,
        field,
      );
    return name;
  };
  const from = q.from === undefined ? undefined : toMs(q.from);
  const to = q.to === undefined ? undefined : toMs(q.to);
  if (from !== undefined && to !== undefined && from > to)
    throw new QueryError(400, `from: ${q.from} is after to (${q.to})`, 'from');
  let bucket: number | undefined;
  if (q.granularity !== 'all') {
    const window = parseDuration(schema.window)!;
    bucket = granularityMs(q.granularity);
    if (bucket === undefined || bucket % window !== 0)
      throw new QueryError(
        400,
        `granularity: '${q.granularity}' is not 'all' nor a multiple of the cube's window (${schema.window})`,
        'granularity',
      );
  }
  const keep = new Map<string, Set<string>>();
  const drop = new Map<string, Set<string>>();
  for (const [name, f] of Object.entries(q.filters)) {
    dimension(name, `filters.${name}`);
    if ('in' in f) keep.set(name, new Set(f.in));
    else drop.set(name, new Set(f.notIn));
  }
  const groupBy = q.groupBy.map((d, i) => dimension(d, `groupBy.${i}`));
  if (new Set(groupBy).size !== groupBy.length)
    throw new QueryError(400, 'groupBy: a dimension is named twice', 'groupBy');
  const measureNames = q.measures ?? schema.measures.map((m) => m.name);
  const measures = measureNames.map((name, i) => {
    const at = schema.measures.findIndex((m) => m.name === name);
    if (at < 0)
      throw new QueryError(
        400,
        `measures.${i}: the cube has no measure '${name}' (it has ${schema.measures.map((m) => m.name).join(', ')})`,
        `measures.${i}`,
      );
    return at;
  });
  const sortable = new Set([...groupBy, ...measureNames, ...(bucket ? [timeColumn] : [])]);
  q.orderBy.forEach((o, i) => {
    if (!sortable.has(o.field))
      throw new QueryError(
        400,
        `orderBy.${i}.field: '${o.field}' is not in the answer (order by ${[...sortable].join(', ')})`,
        `orderBy.${i}.field`,
      );
  });
  return {
    from,
    to,
    granularityMs: bucket,
    keep,
    drop,
    groupBy,
    measures,
    measureNames,
    orderBy: q.orderBy,
    limit: q.limit,
    requireComplete: q.requireComplete,
  };
}
