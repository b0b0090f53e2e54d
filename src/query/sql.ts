// The SQL subset of the query service (POST /v1/sql): one SELECT over one cube, read by a
// maintained parser (pgsql-ast-parser, PostgreSQL's grammar) and translated into the JSON query
// body, so that both answer through the same service with the same coverage and checks. Anything
// outside the subset is a 400 naming its clause:
//
//   SELECT <dimension> | time_bucket('<granularity>', time) | <measure> | SUM|MIN|MAX(<measure>)
//          [AS <alias>], …
//   FROM [<namespace>.]<cube>
//   [WHERE <condition> AND …]   time >= | > | < | <= <ISO-8601 string or epoch ms>,
//                               <dimension> = | <> | != '<value>', <dimension> [NOT] IN ('…', …)
//   [GROUP BY <dimension> | <alias> | time_bucket(…), …]   exactly the selected non-measures
//   [ORDER BY <column> | <alias> | <aggregate> [ASC | DESC], …]
//   [LIMIT <n>]
import { type Expr, type SelectedColumn, type Statement, parse } from 'pgsql-ast-parser';
import { z } from 'zod';
import { type CubeSchema, type MeasureFunction, cubeName } from '../api/cube.ts';
import { QueryError, type QueryBody, timeColumn } from './request.ts';
import type { CubeAnswer, QueryService } from './service.ts';

/** A SELECT read into a query body: where it asks, and how its columns are named and ordered. */
export interface SqlQuery {
  /** The namespace `FROM <namespace>.<cube>` names, if it names one. */
  namespace: string | undefined;
  cube: string;
  /** The query body, minus what needs the cube's schema (see `bodyFor`). */
  select: SelectItem[];
  where: Expr | undefined;
  groupBy: Expr[];
  orderBy: { by: Expr; direction: 'asc' | 'desc' }[];
  limit: number | undefined;
}

/** One column of the SELECT list, before the cube's schema says what its name is. */
interface SelectItem {
  expr: Expr;
  alias: string | undefined;
  /** Where it stands in the SELECT list, for error messages. */
  index: number;
}

/** What a SELECT column is, once the schema is known: a dimension, the time bucket or a measure. */
type Resolved =
  | { kind: 'dimension'; name: string }
  | { kind: 'time'; granularity: string }
  | { kind: 'measure'; name: string };

const refused = (clause: string, message: string): QueryError =>
  new QueryError(400, `${clause}: ${message}`, `sql.${clause}`);

/** The aggregate a measure is read with: its rollup (count and sum add up, min and max keep theirs). */
const aggregateOf: Record<MeasureFunction, string> = {
  count: 'sum',
  sum: 'sum',
  min: 'min',
  max: 'max',
};

/** Parses `text`; throws QueryError (400) naming the clause for anything outside the subset. */
export function parseSql(text: string): SqlQuery {
  let statements: Statement[];
  try {
    statements = parse(text);
  } catch (error) {
    const first = ((error as Error).message ?? String(error)).split('\n')[0];
    throw new QueryError(400, `sql: not valid SQL: ${first}`, 'sql');
  }
  if (statements.length !== 1) throw refused('statement', 'one SELECT statement, and nothing else');
  const s = statements[0]!;
  if (s.type !== 'select') throw refused('statement', `${s.type} is not a SELECT`);
  if (s.distinct) throw refused('select', 'DISTINCT is not supported (GROUP BY groups)');
  if (s.having) throw refused('having', 'HAVING is not supported');
  if (s.for) throw refused('for', 'FOR UPDATE/SHARE is not supported');
  if (s.skip) throw refused('skip', 'SKIP is not supported');
  if (s.limit?.offset) throw refused('offset', 'OFFSET is not supported');
  if (!s.from || s.from.length !== 1) throw refused('from', 'name exactly one cube');
  const from = s.from[0]!;
  if (from.type !== 'table') throw refused('from', 'a cube, not a subquery, join or function');
  if (from.join) throw refused('from', 'JOIN is not supported');
  const columns: SelectedColumn[] = s.columns ?? [];
  if (columns.length === 0) throw refused('select', 'list the columns to answer');
  let limit: number | undefined;
  if (s.limit?.limit) {
    const l = s.limit.limit;
    if (l.type !== 'integer' || l.value < 1) throw refused('limit', 'a positive integer');
    limit = l.value;
  }
  return {
    namespace: from.name.schema,
    cube: from.name.name,
    select: columns.map((c, index) => ({ expr: c.expr, alias: c.alias?.name, index })),
    where: s.where ?? undefined,
    groupBy: s.groupBy ?? [],
    orderBy: (s.orderBy ?? []).map((o) => {
      if (o.nulls) throw refused('order by', 'NULLS FIRST/LAST is not supported');
      return { by: o.by, direction: o.order === 'DESC' ? 'desc' : 'asc' };
    }),
    limit,
  };
}

/** `time` or Druid's `__time`: the event time of the cube's windows. */
const isTime = (e: Expr): boolean =>
  e.type === 'ref' && (e.name === timeColumn || e.name === '__time');

/** A literal instant: an ISO-8601 string or epoch milliseconds. */
function instantOf(e: Expr, clause: string): string | number {
  if (e.type === 'string' && !Number.isNaN(Date.parse(e.value))) return e.value;
  if (e.type === 'integer') return e.value;
  throw refused(clause, 'compare time with an ISO-8601 string or epoch milliseconds');
}

function stringsOf(e: Expr, clause: string): string[] {
  if (e.type === 'string') return [e.value];
  if (e.type === 'list' && e.expressions.every((x) => x.type === 'string'))
    return e.expressions.map((x) => (x as { value: string }).value);
  throw refused(clause, "compare a dimension with a string or a list of strings ('a', 'b')");
}

/** The parts of a WHERE joined by AND. */
function conjuncts(e: Expr | undefined): Expr[] {
  if (!e) return [];
  if (e.type === 'binary' && e.op === 'AND') return [...conjuncts(e.left), ...conjuncts(e.right)];
  return [e];
}

/**
 * The query body `sql` asks of a cube with `schema`, and the answer's columns as the SELECT names
 * them, in its order: `answerColumn` is the column of the service's answer each one is read from.
 */
export function bodyFor(
  sql: SqlQuery,
  schema: CubeSchema,
): { body: QueryBody; columns: { name: string; answerColumn: string }[] } {
  const measureOf = (name: string) => schema.measures.find((m) => m.name === name);
  const resolve = (e: Expr, clause: string): Resolved => {
    if (e.type === 'ref') {
      if (e.name === '*') throw refused(clause, 'name the columns; * is not supported');
      if (schema.dimensions.includes(e.name)) return { kind: 'dimension', name: e.name };
      if (measureOf(e.name)) return { kind: 'measure', name: e.name };
      throw refused(
        clause,
        `the cube has no dimension or measure '${e.name}' (dimensions ${schema.dimensions.join(', ') || 'none'}; measures ${schema.measures.map((m) => m.name).join(', ')})`,
      );
    }
    if (e.type === 'call') {
      const fn = e.function.name.toLowerCase();
      if (fn === 'time_bucket') {
        const [width, column] = e.args;
        if (e.args.length !== 2 || width?.type !== 'string' || !column || !isTime(column))
          throw refused(
            clause,
            "time_bucket takes a granularity and the time: time_bucket('1h', time)",
          );
        return { kind: 'time', granularity: width.value };
      }
      if (['sum', 'min', 'max', 'count', 'avg'].includes(fn)) {
        const [arg] = e.args;
        const measure = arg?.type === 'ref' ? measureOf(arg.name) : undefined;
        if (e.args.length !== 1 || !measure || e.distinct || e.filter || e.over || e.orderBy)
          throw refused(
            clause,
            `${fn.toUpperCase()}(…) takes one measure of the cube (${schema.measures.map((m) => m.name).join(', ')})`,
          );
        const expected = aggregateOf[measure.function];
        if (fn !== expected)
          throw refused(
            clause,
            `measure '${measure.name}' (${measure.function}) is read with ${expected.toUpperCase()}(${measure.name}), not ${fn.toUpperCase()}`,
          );
        return { kind: 'measure', name: measure.name };
      }
      throw refused(
        clause,
        `function ${e.function.name} is not supported (time_bucket, SUM, MIN, MAX)`,
      );
    }
    throw refused(clause, `a ${e.type} is not supported here`);
  };

  const selected = sql.select.map((item) => ({
    ...item,
    resolved: resolve(item.expr, 'select'),
  }));
  const aliases = new Map<string, Resolved>();
  for (const item of selected) if (item.alias) aliases.set(item.alias, item.resolved);
  const resolveRef = (e: Expr, clause: string): Resolved =>
    e.type === 'ref' && aliases.has(e.name) ? aliases.get(e.name)! : resolve(e, clause);

  const times = selected.filter((i) => i.resolved.kind === 'time');
  if (times.length > 1) throw refused('select', 'one time_bucket at most');
  const granularity = times[0] ? (times[0].resolved as { granularity: string }).granularity : 'all';
  const dimensions = selected.flatMap((i) =>
    i.resolved.kind === 'dimension' ? [i.resolved.name] : [],
  );
  const measures = selected.flatMap((i) =>
    i.resolved.kind === 'measure' ? [i.resolved.name] : [],
  );
  if (new Set(measures).size !== measures.length)
    throw refused('select', 'a measure is selected twice');

  // GROUP BY names exactly what is selected besides the measures.
  const grouped = sql.groupBy.map((e) => resolveRef(e, 'group by'));
  if (grouped.some((g) => g.kind === 'measure'))
    throw refused('group by', 'group by dimensions and the time bucket, not measures');
  const key = (r: Resolved): string =>
    r.kind === 'time' ? `time:${r.granularity}` : `${r.kind}:${r.name}`;
  const wanted = new Set(
    selected.filter((i) => i.resolved.kind !== 'measure').map((i) => key(i.resolved)),
  );
  const got = new Set(grouped.map(key));
  if (wanted.size !== got.size || [...wanted].some((k) => !got.has(k)))
    throw refused(
      'group by',
      'group by exactly the selected dimensions and time bucket (every measure is aggregated)',
    );

  const body: QueryBody = { granularity, groupBy: dimensions, measures, filters: {}, orderBy: [] };
  const filters: NonNullable<QueryBody['filters']> = {};
  for (const c of conjuncts(sql.where)) {
    if (c.type === 'binary' && isTime(c.left) && ['>=', '>', '<', '<='].includes(c.op)) {
      const at = instantOf(c.right, 'where');
      if (c.op === '>=' || c.op === '>') {
        if (body.from !== undefined) throw refused('where', 'time has two lower bounds');
        body.from = at;
      } else {
        if (body.to !== undefined) throw refused('where', 'time has two upper bounds');
        body.to = at;
      }
      continue;
    }
    if (
      c.type === 'binary' &&
      c.left.type === 'ref' &&
      ['=', '!=', '<>', 'IN', 'NOT IN'].includes(c.op)
    ) {
      const name = c.left.name;
      if (!schema.dimensions.includes(name))
        throw refused('where', `filter on a dimension; the cube has no dimension '${name}'`);
      if (filters[name]) throw refused('where', `dimension '${name}' is filtered twice`);
      const values = stringsOf(c.right, 'where');
      filters[name] = c.op === '=' || c.op === 'IN' ? { in: values } : { notIn: values };
      continue;
    }
    throw refused(
      'where',
      'conditions joined by AND, each on time (>=, >, <, <=) or on a dimension (=, <>, IN, NOT IN)',
    );
  }
  body.filters = filters;

  // ORDER BY a selected column (by its name, its alias, or the same expression).
  const answerColumnOf = (r: Resolved): string => (r.kind === 'time' ? timeColumn : r.name);
  body.orderBy = sql.orderBy.map((o) => {
    const r = resolveRef(o.by, 'order by');
    if (!selected.some((i) => key(i.resolved) === key(r)))
      throw refused('order by', 'order by a column of the SELECT list');
    return { field: answerColumnOf(r), direction: o.direction };
  });
  if (sql.limit !== undefined) body.limit = sql.limit;
  return {
    body,
    columns: selected.map((i) => ({
      name: i.alias ?? (i.expr.type === 'ref' ? i.expr.name : answerColumnOf(i.resolved)),
      answerColumn: answerColumnOf(i.resolved),
    })),
  };
}

/** The answer's rows re-cut to the SELECT's columns, in its order and with its names. */
export function selectColumns<T extends { columns: string[]; rows: (string | number)[][] }>(
  answer: T,
  columns: { name: string; answerColumn: string }[],
): T {
  const at = columns.map((c) => answer.columns.indexOf(c.answerColumn));
  return {
    ...answer,
    columns: columns.map((c) => c.name),
    rows: answer.rows.map((row) => at.map((i) => row[i]!)),
  };
}

/** The body of POST /v1/sql and /v1/namespaces/<ns>/sql. */
export const sqlBody = z.strictObject({
  query: z.string().min(1).max(65_536),
  /** As in the JSON query: a 503 with the reason rather than an answer that is not complete. */
  requireComplete: z.boolean().default(false),
});

/**
 * The answer to a SQL question: `FROM <namespace>.<cube>`, or `FROM <cube>` of the path's
 * namespace (`/v1/namespaces/<ns>/sql`). Throws QueryError (400 naming the clause, 404, 503).
 */
export async function answerSql(
  service: Pick<QueryService, 'answer' | 'schemaOf'>,
  pathNamespace: string | undefined,
  body: unknown,
): Promise<CubeAnswer> {
  const parsed = sqlBody.safeParse(body ?? {});
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const field = issue?.path.join('.') || undefined;
    throw new QueryError(400, `${field ?? 'body'}: ${issue?.message ?? 'invalid'}`, field);
  }
  const sql = parseSql(parsed.data.query);
  if (sql.namespace !== undefined && pathNamespace !== undefined && sql.namespace !== pathNamespace)
    throw refused('from', `names namespace '${sql.namespace}', the path '${pathNamespace}'`);
  const namespace = sql.namespace ?? pathNamespace;
  if (namespace === undefined)
    throw refused(
      'from',
      'name the cube as <namespace>.<cube>, or POST to /v1/namespaces/<ns>/sql',
    );
  for (const [what, value] of [
    ['namespace', namespace],
    ['cube', sql.cube],
  ] as const)
    if (!cubeName.safeParse(value).success)
      throw refused('from', `${what} name '${value}' must be a DNS label`);
  const { body: query, columns } = bodyFor(sql, service.schemaOf(namespace, sql.cube));
  query.requireComplete = parsed.data.requireComplete;
  return selectColumns(await service.answer(namespace, sql.cube, query), columns);
}
