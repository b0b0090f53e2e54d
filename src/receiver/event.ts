// Turning one Kafka record into an event of a cube: parse, read the timestamp, the dimensions and
// the measure inputs, or say why the record is rejected (counted by reason, never thrown).
import type { CubeSchema } from '../api/cube.ts';

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
] as const;
export type RejectReason = (typeof rejectReasons)[number];

export interface ParsedEvent {
  /** Event time, epoch milliseconds. */
  time: number;
  /** Dimension values in schema order, as strings ('' for null/absent). */
  dimensions: string[];
  /** Measure inputs in schema order; count measures get 1. */
  values: number[];
}

export type ParseResult = { ok: true; event: ParsedEvent } | { ok: false; reason: RejectReason };

function eventTime(raw: unknown): number | undefined {
  if (typeof raw === 'number') return Number.isFinite(raw) ? Math.trunc(raw) : undefined;
  if (typeof raw === 'string' && raw.length > 0) {
    // Digits only: epoch millis sent as a string; anything else must be ISO-8601.
    if (/^[0-9]+$/.test(raw)) return Number(raw);
    if (!/^\d{4}-\d{2}-\d{2}/.test(raw)) return undefined;
    const ms = Date.parse(raw);
    return Number.isNaN(ms) ? undefined : ms;
  }
  return undefined;
}

export function parseEvent(schema: CubeSchema, value: Buffer | null): ParseResult {
  if (value === null) return { ok: false, reason: 'bad_json' };
  let parsed: unknown;
  try {
    parsed = JSON.parse(value.toString('utf8'));
  } catch {
    return { ok: false, reason: 'bad_json' };
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    return { ok: false, reason: 'not_an_object' };
  }
  const record = parsed as Record<string, unknown>;
  const rawTime = record[schema.timestampField];
  if (rawTime === undefined || rawTime === null) return { ok: false, reason: 'missing_timestamp' };
  const time = eventTime(rawTime);
  if (time === undefined) return { ok: false, reason: 'bad_timestamp' };

  const dimensions: string[] = [];
  for (const name of schema.dimensions) {
    const v = record[name];
    if (v === undefined || v === null) dimensions.push('');
    else if (typeof v === 'string') dimensions.push(v);
    else if (typeof v === 'number' || typeof v === 'boolean') dimensions.push(String(v));
    else return { ok: false, reason: 'bad_dimension' };
  }
  const values: number[] = [];
  for (const m of schema.measures) {
    if (m.function === 'count') {
      values.push(1);
      continue;
    }
    const v = record[m.field ?? ''];
    if (v === undefined || v === null) return { ok: false, reason: 'missing_measure' };
    if (typeof v !== 'number' || !Number.isFinite(v)) return { ok: false, reason: 'bad_measure' };
    values.push(v);
  }
  return { ok: true, event: { time, dimensions, values } };
}
