// The ground truth of a cube, computed from what was produced and the design's rules alone (event
// time → window, per-partition event-time watermark, too late past window end + lateness), with
// none of the receiver's code, so that tests compare the receiver with an independent answer.
import type { AssignCubeRequest } from '../../src/protocol/admin-api.ts';
import { type ProducedRecord, type TestEvent, isBadRecord } from './events.ts';

type Schema = AssignCubeRequest['schema'];

/** A row as the query API and the hand-off files give it: dimension values, then measures. */
export type ModelRow = (string | number)[];

export interface CubeModel {
  /** windowStart → rows (all dimensions), sorted by their dimension values. */
  windows: Map<number, ModelRow[]>;
  /** Rejections by reason, as the receiver's status counts them. */
  rejected: Record<string, number>;
  /** partition → highest accepted event time. */
  watermarks: Map<number, number | null>;
  windowMs: number;
  latenessMs: number;
}

function durationMs(text: string): number {
  let total = 0;
  for (const [, n, unit] of text.matchAll(/([0-9]+)(ms|s|m|h)/g)) {
    total +=
      Number(n) * { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[unit as 'ms' | 's' | 'm' | 'h'];
  }
  return total;
}

const fieldOf = (event: TestEvent, name: string): string | number =>
  (event as unknown as Record<string, string | number>)[name]!;

export function sortRows(rows: ModelRow[], dimensionCount: number): ModelRow[] {
  const key = (r: ModelRow): string => r.slice(0, dimensionCount).join('\u0000');
  return [...rows].sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
}

/** Replays each partition's records in offset order; partitions are independent of each other. */
export function modelCube(schema: Schema, partitions: Map<number, ProducedRecord[]>): CubeModel {
  const windowMs = durationMs(schema.window);
  const latenessMs = durationMs(schema.allowedLateness ?? '0s');
  const dimensions = schema.dimensions ?? [];
  const groups = new Map<number, Map<string, ModelRow>>();
  const rejected: Record<string, number> = {};
  const watermarks = new Map<number, number | null>();
  for (const [partition, records] of partitions) {
    let watermark: number | null = null;
    for (const record of records) {
      if (isBadRecord(record)) {
        rejected[record.reason] = (rejected[record.reason] ?? 0) + 1;
        continue;
      }
      const windowStart = Math.floor(record.ts / windowMs) * windowMs;
      if (watermark !== null && watermark >= windowStart + windowMs + latenessMs) {
        rejected.too_late = (rejected.too_late ?? 0) + 1;
        continue;
      }
      watermark = Math.max(watermark ?? record.ts, record.ts);
      const dims = dimensions.map((d) => String(fieldOf(record, d)));
      const rows = groups.get(windowStart) ?? new Map<string, ModelRow>();
      groups.set(windowStart, rows);
      const key = JSON.stringify(dims);
      const row = rows.get(key);
      const values = schema.measures.map((m) =>
        m.function === 'count' ? 1 : Number(fieldOf(record, m.field!)),
      );
      if (!row) {
        rows.set(key, [...dims, ...values]);
        continue;
      }
      schema.measures.forEach((m, i) => {
        const at = dimensions.length + i;
        const [a, b] = [row[at] as number, values[i]!];
        row[at] =
          m.function === 'min' ? Math.min(a, b) : m.function === 'max' ? Math.max(a, b) : a + b;
      });
    }
    watermarks.set(partition, watermark);
  }
  const windows = new Map(
    [...groups]
      .sort(([a], [b]) => a - b)
      .map(([w, rows]) => [w, sortRows([...rows.values()], dimensions.length)]),
  );
  return { windows, rejected, watermarks, windowMs, latenessMs };
}

/** Windows every partition's watermark has passed (end + lateness): the receiver seals these. */
export function sealedWindows(model: CubeModel): number[] {
  const marks = [...model.watermarks.values()];
  if (marks.some((w) => w === null)) return [];
  const low = Math.min(...(marks as number[]));
  return [...model.windows.keys()].filter((w) => w + model.windowMs + model.latenessMs <= low);
}

/** Rows of several windows merged per dimension values (for totals over windows). */
export function mergeRows(schema: Schema, rows: ModelRow[]): ModelRow[] {
  const d = (schema.dimensions ?? []).length;
  const byKey = new Map<string, ModelRow>();
  for (const r of rows) {
    const key = JSON.stringify(r.slice(0, d));
    const acc = byKey.get(key);
    if (!acc) {
      byKey.set(key, [...r]);
      continue;
    }
    schema.measures.forEach((m, i) => {
      const [a, b] = [acc[d + i] as number, r[d + i] as number];
      acc[d + i] =
        m.function === 'min' ? Math.min(a, b) : m.function === 'max' ? Math.max(a, b) : a + b;
    });
  }
  return sortRows([...byKey.values()], d);
}
