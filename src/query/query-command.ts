// `streamcube query`: one question to a query server, the answer as a table (or JSON, CSV), and
// whether it is complete: every offset of the cube counted once, or which are missing and why.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { ConfigError } from '../config-error.ts';
import { readTokenFile } from '../protocol/token-file.ts';
import type { QueryBody } from './request.ts';
import type { PartitionCoverage } from './merge.ts';
import type { CubeAnswer, PartitionAnswer } from './service.ts';

export const queryUsage = `Usage: streamcube query [options] CUBE

Asks a query server (streamcube query-server) one question over the whole cube.

Options (environment variable in brackets):
  --server URL          the query server              [STREAMCUBE_QUERY_SERVER, default: http://127.0.0.1:8082]
  --token-file FILE     its bearer token (first line) [STREAMCUBE_QUERY_TOKEN_FILE, required]
  -n, --namespace NS    the cube's namespace          [default: default]
  --from TIME --to TIME event time range [from, to): ISO-8601 or epoch milliseconds
  --granularity G       all (default), the cube's window, or a multiple: 5m, 1h, 1d
  --group-by A,B        dimensions to group by
  --measures A,B        measures to answer (default: all)
  --filter DIM=V1,V2    keep only these values (repeatable); DIM!=V1,V2 leaves them out
  --order-by F[:desc]   sort by a measure, dimension or time (repeatable)
  --limit N             the top N rows
  --require-complete    fail (503) rather than answer without proof that every offset counted once
  -o, --output FORMAT   table (default), json, csv
`;

export interface QueryCommand {
  server: string;
  token: string;
  namespace: string;
  cube: string;
  body: QueryBody;
  output: 'table' | 'json' | 'csv';
}

const splitList = (text: string | undefined): string[] | undefined =>
  text === undefined
    ? undefined
    : text
        .split(',')
        .map((s) => s.trim())
        .filter((s) => s !== '');

const instant = (text: string | undefined): number | string | undefined =>
  text === undefined ? undefined : /^-?[0-9]+$/.test(text) ? Number(text) : text;

export function parseQueryCommand(argv: string[], env: NodeJS.ProcessEnv): QueryCommand {
  const { values, positionals } = parseArgs({
    args: argv,
    options: {
      server: { type: 'string' },
      'token-file': { type: 'string' },
      namespace: { type: 'string', short: 'n' },
      from: { type: 'string' },
      to: { type: 'string' },
      granularity: { type: 'string' },
      'group-by': { type: 'string' },
      measures: { type: 'string' },
      filter: { type: 'string', multiple: true },
      'order-by': { type: 'string', multiple: true },
      limit: { type: 'string' },
      'require-complete': { type: 'boolean' },
      output: { type: 'string', short: 'o' },
    },
    allowPositionals: true,
    strict: true,
  });
  const [cube, ...extra] = positionals;
  if (cube === undefined || extra.length > 0)
    throw new ConfigError('name one cube: streamcube query [options] CUBE');
  const tokenFile = values['token-file'] ?? env.STREAMCUBE_QUERY_TOKEN_FILE;
  if (!tokenFile)
    throw new ConfigError('--token-file (or STREAMCUBE_QUERY_TOKEN_FILE) is required');
  const output = values.output ?? 'table';
  if (output !== 'table' && output !== 'json' && output !== 'csv')
    throw new ConfigError(`-o must be table, json or csv, got '${output}'`);
  const filters: NonNullable<QueryBody['filters']> = {};
  for (const f of values.filter ?? []) {
    const m = /^([A-Za-z_][A-Za-z0-9_]*)(!=|=)(.*)$/.exec(f);
    if (!m) throw new ConfigError(`--filter must be DIM=V1,V2 or DIM!=V1,V2, got '${f}'`);
    const list = splitList(m[3]) ?? [];
    filters[m[1]!] = m[2] === '=' ? { in: list } : { notIn: list };
  }
  const limit = values.limit === undefined ? undefined : Number(values.limit);
  if (limit !== undefined && !(Number.isInteger(limit) && limit > 0))
    throw new ConfigError(`--limit must be a positive integer, got '${values.limit}'`);
  const from = instant(values.from);
  const to = instant(values.to);
  const groupBy = splitList(values['group-by']);
  const measures = splitList(values.measures);
  return {
    server: (values.server ?? env.STREAMCUBE_QUERY_SERVER ?? 'http://127.0.0.1:8082').replace(
      /\/$/,
      '',
    ),
    token: readTokenFile(tokenFile, readTokenText(tokenFile)),
    namespace: values.namespace ?? 'default',
    cube,
    output,
    body: {
      ...(from === undefined ? {} : { from }),
      ...(to === undefined ? {} : { to }),
      ...(values.granularity ? { granularity: values.granularity } : {}),
      ...(Object.keys(filters).length > 0 ? { filters } : {}),
      ...(groupBy ? { groupBy } : {}),
      ...(measures ? { measures } : {}),
      ...(values['order-by']
        ? {
            orderBy: values['order-by'].map((o) => {
              const [field = '', direction] = o.split(':');
              return { field, direction: direction === 'desc' ? 'desc' : 'asc' };
            }),
          }
        : {}),
      ...(limit === undefined ? {} : { limit }),
      ...(values['require-complete'] ? { requireComplete: true } : {}),
    },
  };
}

function readTokenText(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    throw new ConfigError(`cannot read the token file ${path}: ${(error as Error).message}`);
  }
}

type Cell = string | number;

/** Columns padded to their widest cell; numbers right-aligned. */
/** A decimal string, as an exact sum (a measure with a scale) is answered. */
const decimalText = /^-?\d+(\.\d+)?$/;

export function formatTable(columns: string[], rows: Cell[][]): string {
  const widths = columns.map((c, i) =>
    Math.max(c.length, ...rows.map((r) => String(r[i] ?? '').length)),
  );
  // Numbers right-aligned, and so is a column of decimal strings (an exact sum).
  const numeric = columns.map(
    (_, i) =>
      rows.length > 0 &&
      rows.every((r) => typeof r[i] === 'number' || decimalText.test(String(r[i]))),
  );
  const line = (cells: Cell[], header = false): string =>
    cells
      .map((v, i) =>
        typeof v === 'number' || (!header && numeric[i])
          ? String(v).padStart(widths[i]!)
          : String(v).padEnd(widths[i]!),
      )
      .join('  ')
      .trimEnd();
  return (
    [
      line(
        columns.map((c) => c.toUpperCase()),
        true,
      ),
      ...rows.map((r) => line(r)),
    ].join('\n') + '\n'
  );
}

/** RFC 4180: a cell with a comma, quote or line break is quoted, quotes doubled. */
export function formatCsv(columns: string[], rows: Cell[][]): string {
  const cell = (v: Cell): string => {
    const text = String(v);
    return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
  };
  return [columns, ...rows].map((r) => r.map(cell).join(',')).join('\r\n') + '\r\n';
}

/**
 * What an answer says of completeness, of the rejected records among its offsets and of those
 * lost; `lost` optional: a query server of before does not say.
 */
type Completeness = Pick<CubeAnswer, 'complete'> & {
  partitions: (Omit<PartitionCoverage, 'lost'> &
    Partial<Pick<PartitionCoverage, 'lost'>> &
    Partial<Pick<PartitionAnswer, 'rejected' | 'rejectedKnown'>>)[];
};

type ReasonedRange = { from: string; to: string; reason: string };

/**
 * The footer's word on ranges of offsets grouped by their reason: how many each, where (the first
 * three ranges), said by `say(count, reason)`.
 */
function rangesNote(
  answer: Completeness,
  rangesOf: (p: Completeness['partitions'][number]) => readonly ReasonedRange[] | undefined,
  say: (count: bigint, reason: string) => string,
): string {
  const byReason = new Map<string, { count: bigint; where: string[] }>();
  for (const p of answer.partitions)
    for (const r of rangesOf(p) ?? []) {
      const entry = byReason.get(r.reason) ?? { count: 0n, where: [] };
      entry.count += BigInt(r.to) - BigInt(r.from);
      entry.where.push(`partition ${p.partition} [${r.from}, ${r.to})`);
      byReason.set(r.reason, entry);
    }
  const shown = 3;
  return [...byReason]
    .map(
      ([reason, { count, where }]) =>
        `; ${say(count, reason)} (${where.slice(0, shown).join(', ')}${where.length > shown ? `, and ${where.length - shown} more ranges` : ''})`,
    )
    .join('');
}

/** The footer's word on offsets accounted for but not counted: how many, why, and where. */
export const lostNote = (answer: Completeness): string =>
  rangesNote(
    answer,
    (p) => p.lost,
    (count, reason) => `${count} of them lost to ${reason}, in no row`,
  );

/**
 * The footer's word on offset resets (their reason names the reset): offsets a reset forward
 * skipped, in no row, and offsets a reset back read again, counted once more on purpose.
 */
export const resetNote = (answer: Completeness): string =>
  rangesNote(
    answer,
    (p) => p.resets,
    (count, reason) =>
      `${count} ${reason}${reason.startsWith('re-read') ? ', counted again on purpose' : ', in no row'}`,
  );

/** The footer's word on rejected records: how many of the offsets counted no row holds, and why. */
export function rejectedNote(answer: Completeness): string {
  const byReason = new Map<string, number>();
  for (const p of answer.partitions)
    for (const [reason, n] of Object.entries(p.rejected ?? {}))
      byReason.set(reason, (byReason.get(reason) ?? 0) + n);
  const total = [...byReason.values()].reduce((a, b) => a + b, 0);
  const unknown = answer.partitions
    .filter((p) => p.rejectedKnown === false)
    .map((p) => p.partition);
  const parts: string[] = [];
  if (total > 0)
    parts.push(
      `${total} of them rejected records, in no row (${[...byReason]
        .sort(([a], [b]) => (a < b ? -1 : 1))
        .map(([reason, n]) => `${reason}: ${n}`)
        .join(', ')})`,
    );
  if (unknown.length > 0)
    parts.push(`rejected records not known for partitions ${unknown.join(', ')}`);
  return parts.length > 0 ? `; ${parts.join('; ')}` : '';
}

/** What the table's footer says of completeness. */
export function completenessNote(answer: Completeness): string {
  const lost = lostNote(answer) + resetNote(answer);
  if (answer.complete)
    return `complete: every offset of ${answer.partitions.length} partitions ${lost ? 'accounted for' : 'counted'} once${lost}${rejectedNote(answer)}\n`;
  const lines = answer.partitions
    .filter((p) => !p.complete)
    .flatMap((p) =>
      p.missing.map(
        (m) =>
          `  partition ${p.partition}: offsets from ${m.from}${m.to === undefined ? '' : ` to ${m.to}`}: ${m.reason}`,
      ),
    );
  return `INCOMPLETE: some offsets are not counted${lost}${rejectedNote(answer)}\n${lines.join('\n')}\n`;
}

/** Runs the command; answers the exit code (0 answered, 1 refused or unreachable). */
export async function runQueryCommand(
  argv: string[],
  io: { out: (t: string) => void; err: (t: string) => void },
  env: NodeJS.ProcessEnv = process.env,
): Promise<number> {
  const c = parseQueryCommand(argv, env);
  const url = `${c.server}/v1/namespaces/${encodeURIComponent(c.namespace)}/cubes/${encodeURIComponent(c.cube)}/query`;
  let response: Response;
  try {
    response = await fetch(url, {
      method: 'POST',
      headers: { authorization: `Bearer ${c.token}`, 'content-type': 'application/json' },
      body: JSON.stringify(c.body),
      signal: AbortSignal.timeout(120_000),
    });
  } catch (error) {
    io.err(`streamcube query: ${url}: ${(error as Error).message}\n`);
    return 1;
  }
  const text = await response.text();
  if (!response.ok) {
    let reason = text;
    try {
      const body = JSON.parse(text) as { reason?: string; field?: string };
      reason = `${body.reason ?? text}${body.field ? ` (field ${body.field})` : ''}`;
    } catch {
      // not JSON: the text as it is
    }
    io.err(`streamcube query: ${response.status}: ${reason}\n`);
    return 1;
  }
  const answer = JSON.parse(text) as CubeAnswer;
  if (c.output === 'json') io.out(`${JSON.stringify(answer, null, 2)}\n`);
  else if (c.output === 'csv') io.out(formatCsv(answer.columns, answer.rows));
  else {
    io.out(formatTable(answer.columns, answer.rows));
    io.out(`\n${answer.rows.length} rows; ${completenessNote(answer)}`);
  }
  return 0;
}
