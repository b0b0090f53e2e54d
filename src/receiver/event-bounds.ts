// The bounds a record must keep to count, so that one record cannot poison its partition: an event
// time past its Kafka batch's timestamp plus the cube's skew would move the partition's watermark
// (and its next owner's) so far that every later record is too late; one before the floor is a
// unit mistake (seconds for milliseconds) or garbage; a huge dimension value would be held in
// every row and dictionary it reaches. Each is decided from the record and its batch alone, never
// the wall clock, so that the replicas of a set and a partition's next owner decide alike.
import type { CubeSchema } from '../api/cube.ts';
import { parseDuration } from '../api/duration.ts';
import { rejectReasons } from './event.ts';

/** How far an event time may lie past its batch's timestamp when the cube does not say. */
export const defaultMaxEventTimeSkewMs = 3_600_000;
/** The longest dimension value, in UTF-8 bytes, when the cube does not say. */
export const defaultMaxDimensionBytes = 4096;
/** Event times before 2000-01-01T00:00:00Z are `ancient_timestamp`. */
export const eventTimeFloor = Date.UTC(2000, 0, 1);

const futureCode = 1 + rejectReasons.indexOf('future_timestamp');
const ancientCode = 1 + rejectReasons.indexOf('ancient_timestamp');
export const dimensionTooLongCode = 1 + rejectReasons.indexOf('dimension_too_long');

export const maxEventTimeSkewOf = (schema: CubeSchema): number =>
  schema.maxEventTimeSkew === undefined
    ? defaultMaxEventTimeSkewMs
    : (parseDuration(schema.maxEventTimeSkew) ?? defaultMaxEventTimeSkewMs);

export const maxDimensionBytesOf = (schema: CubeSchema): number =>
  schema.maxDimensionBytes ?? defaultMaxDimensionBytes;

/**
 * Marks the parsed events of a batch whose time is out of bounds, in `reasons` (0 for an event,
 * else 1 + its reason's index, as the parser writes them): `ancient_timestamp` before the floor,
 * `future_timestamp` more than `skewMs` past `timestamps[i]` (the record's batch's maxTimestamp;
 * −1, or no timestamps at all, bounds nothing). Marked records are rejected as any other, so they
 * move no watermark.
 */
export function markOutOfBoundsTimes(
  columns: { count: number; times: Float64Array; reasons: Uint8Array },
  timestamps: Float64Array | undefined,
  skewMs: number,
): void {
  const { count, times, reasons } = columns;
  for (let i = 0; i < count; i++) {
    if (reasons[i] !== 0) continue;
    const time = times[i]!;
    if (time < eventTimeFloor) reasons[i] = ancientCode;
    else if (timestamps !== undefined) {
      const bound = timestamps[i]!;
      if (bound >= 0 && time > bound + skewMs) reasons[i] = futureCode;
    }
  }
}

/** Whether a dimension value is longer than `maxBytes` in UTF-8, counting bytes only when needed. */
export function dimensionTooLong(text: string, maxBytes: number): boolean {
  // A UTF-16 code unit is one to three UTF-8 bytes.
  if (text.length * 3 <= maxBytes) return false;
  return text.length > maxBytes || Buffer.byteLength(text) > maxBytes;
}
