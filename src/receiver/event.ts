// Turning one Kafka record into an event of a cube: parse, read the timestamp, the dimensions and
// the measure inputs, or say why the record is rejected (counted by reason, never thrown).
import type { CubeSchema } from '../api/cube.ts';
import { exactScaleOf, unitsOfJsonText } from '../api/scaled-sum.ts';

export const rejectReasons = [
  'bad_json',
  'not_an_object',
  'missing_timestamp',
  'bad_timestamp',
  'bad_dimension',
  'missing_measure',
  'bad_measure',
  'too_late',
  'window_sealed',
  // Records that could poison the data (event-bounds.ts): appended, so the codes before stay.
  'future_timestamp',
  'ancient_timestamp',
  'dimension_too_long',
  // A row past the partition's bound on distinct rows per window (row-budget.ts).
  'too_many_rows',
  // A record batch that decompresses past the bound: its records, none of them read.
  'batch_too_large',
] as const;
export type RejectReason = (typeof rejectReasons)[number];

export interface ParsedEvent {
  /** Event time, epoch milliseconds. */
  time: number;
  /** Dimension values in schema order, as strings ('' for null/absent). */
  dimensions: string[];
  /**
   * Measure inputs in schema order; count measures get 1, a sum with a scale its integer count
   * of 10^-scale units (read from the number's text, rounded half to even past the scale).
   */
  values: number[];
}

export type ParseResult = { ok: true; event: ParsedEvent } | { ok: false; reason: RejectReason };

/** A JavaScript Date holds ±8.64e15 ms; a window beyond that could not even be named. */
const maxTime = 8.64e15;

// Calendar date, optional time (seconds and fraction optional) and offset. A date-time without an
// offset is UTC, never the local zone of the machine: replicas anywhere must window alike.
const isoPattern =
  /^(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?([Zz]|[+-]\d{2}:?\d{2})?)?$/;

const isLeapYear = (y: number): boolean => (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0;

function daysInMonth(year: number, month: number): number {
  if (month === 2) return isLeapYear(year) ? 29 : 28;
  return month === 4 || month === 6 || month === 9 || month === 11 ? 30 : 31;
}

/** Epoch millis of an ISO-8601 date or date-time, or undefined for anything Date.parse guesses at. */
function isoTime(text: string): number | undefined {
  const m = isoPattern.exec(text);
  if (!m) return undefined;
  const [year, month, day] = [Number(m[1]), Number(m[2]), Number(m[3])];
  const [hour, minute, second] = [Number(m[4] ?? 0), Number(m[5] ?? 0), Number(m[6] ?? 0)];
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) return undefined;
  if (hour > 23 || minute > 59 || second > 59) return undefined;
  const millis = Number((m[7] ?? '').slice(0, 3).padEnd(3, '0'));
  let offsetMinutes = 0;
  const zone = m[8];
  if (zone !== undefined && zone !== 'Z' && zone !== 'z') {
    const [h, min] = [Number(zone.slice(1, 3)), Number(zone.slice(-2))];
    if (h > 23 || min > 59) return undefined;
    offsetMinutes = (zone[0] === '-' ? -1 : 1) * (h * 60 + min);
  }
  const date = new Date(0);
  // setUTCFullYear, unlike Date.UTC, does not read years 0-99 as 1900-1999.
  date.setUTCFullYear(year, month - 1, day);
  date.setUTCHours(hour, minute, second, millis);
  return date.getTime() - offsetMinutes * 60_000;
}

function eventTime(raw: unknown): number | undefined {
  let ms: number | undefined;
  if (typeof raw === 'number') ms = Number.isFinite(raw) ? Math.trunc(raw) : undefined;
  else if (typeof raw === 'string') {
    // Digits only: epoch millis sent as a string; anything else must be ISO-8601.
    ms = /^[0-9]+$/.test(raw) ? Number(raw) : isoTime(raw);
  }
  return ms !== undefined && Math.abs(ms) <= maxTime ? ms : undefined;
}

const rejection = (reason: RejectReason): ParseResult => Object.freeze({ ok: false, reason });
const rejected = Object.fromEntries(rejectReasons.map((r) => [r, rejection(r)])) as Record<
  RejectReason,
  ParseResult
>;

export type EventParser = (value: Buffer | null) => ParseResult;

/** The parser of one cube schema, with the schema's field lookups resolved once, not per record. */
export function eventParser(schema: CubeSchema): EventParser {
  const parseText = eventTextParser(schema);
  // toString() without arguments takes Node's direct UTF-8 path (no encoding lookup).
  return (value) => (value === null ? rejected.bad_json : parseText(value.toString()));
}

/** As eventParser, for a record value already decoded from UTF-8. */
export function eventTextParser(schema: CubeSchema): (text: string) => ParseResult {
  const timeField = schema.timestampField;
  const dimensionFields = [...schema.dimensions];
  // null for count, which reads no field.
  const measureFields = schema.measures.map((m) =>
    m.function === 'count' ? null : (m.field ?? ''),
  );
  // A field named like a member of Object.prototype (`constructor`, `valueOf`, `__proto__`) that
  // the event lacks must read as absent, not as the inherited member. Only such names pay for the
  // own-property check: the others are read directly, which matters on the hot path.
  const inherited = (name: string): boolean => name in Object.prototype;
  const guarded = [timeField, ...dimensionFields, ...measureFields].some(
    (name) => name !== null && inherited(name),
  );
  const read = (record: Record<string, unknown>, name: string): unknown =>
    guarded && !Object.hasOwn(record, name) ? undefined : record[name];
  const dimensionCount = dimensionFields.length;
  const measureCount = measureFields.length;
  const scales = schema.measures.map((m) => exactScaleOf(m));
  const numberText = numberTextReader(
    measureFields.filter((f, i): f is string => f !== null && scales[i] !== undefined),
  );
  return (text) => {
    let parsed: unknown;
    try {
      parsed = numberText.parse(text);
    } catch {
      return rejected.bad_json;
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
      return rejected.not_an_object;
    }
    const record = parsed as Record<string, unknown>;
    const rawTime = read(record, timeField);
    let time: number | undefined;
    // Epoch millis as a JSON number within the Date range: the common case, decided inline.
    if (typeof rawTime === 'number' && rawTime >= -maxTime && rawTime <= maxTime) {
      time = Math.trunc(rawTime);
    } else {
      if (rawTime === undefined || rawTime === null) return rejected.missing_timestamp;
      time = eventTime(rawTime);
      if (time === undefined) return rejected.bad_timestamp;
    }

    const dimensions: string[] = [];
    for (let i = 0; i < dimensionCount; i++) {
      const v = read(record, dimensionFields[i]!);
      if (typeof v === 'string') dimensions.push(v);
      else if (v === undefined || v === null) dimensions.push('');
      else if (typeof v === 'number' || typeof v === 'boolean') dimensions.push(String(v));
      else return rejected.bad_dimension;
    }
    const values: number[] = [];
    for (let i = 0; i < measureCount; i++) {
      const field = measureFields[i]!;
      if (field === null) {
        values.push(1);
        continue;
      }
      const v = read(record, field);
      if (typeof v === 'number') {
        if (!Number.isFinite(v)) return rejected.bad_measure;
        const scale = scales[i];
        if (scale === undefined) values.push(v);
        else {
          const units = unitsOfJsonText(numberText.sourceOf(record, field) ?? String(v), scale);
          if (Number.isNaN(units)) return rejected.bad_measure;
          values.push(units);
        }
      } else if (v === undefined || v === null) return rejected.missing_measure;
      else return rejected.bad_measure;
    }
    return { ok: true, event: { time, dimensions, values } };
  };
}

/**
 * JSON.parse that keeps the source text of the numbers of some top-level fields (a reviver's
 * `context.source`), so a scaled sum is read from its digits, not from the float JSON.parse made.
 * Without such fields it is JSON.parse itself.
 */
function numberTextReader(fields: string[]): {
  parse: (text: string) => unknown;
  sourceOf: (record: object, field: string) => string | undefined;
} {
  const wanted = new Set(fields);
  let seen: { holder: unknown; key: string; source: string }[] = [];
  function keepSource(
    this: unknown,
    key: string,
    value: unknown,
    context?: { source?: string },
  ): unknown {
    if (typeof value === 'number' && wanted.has(key) && context?.source !== undefined)
      seen.push({ holder: this, key, source: context.source });
    return value;
  }
  return {
    parse:
      wanted.size === 0
        ? (text) => JSON.parse(text) as unknown
        : (text) => {
            seen = [];
            return JSON.parse(text, keepSource) as unknown;
          },
    // A key given twice: JSON.parse keeps its last value, and so does this.
    sourceOf: (record, field) =>
      seen.findLast((s) => s.holder === record && s.key === field)?.source,
  };
}

const parsers = new WeakMap<CubeSchema, EventParser>();

/** Parses one record for `schema`; the schema's parser is made once and kept with the schema. */
export function parseEvent(schema: CubeSchema, value: Buffer | null): ParseResult {
  let parser = parsers.get(schema);
  if (!parser) {
    parser = eventParser(schema);
    parsers.set(schema, parser);
  }
  return parser(value);
}
