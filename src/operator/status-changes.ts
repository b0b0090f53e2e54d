// What is worth a status write: a merge patch that changes nothing is not sent, and live
// positions (which move with every record) are written when their lag changes by an order of
// magnitude or once per resync, not on every observation.
import { isDeepStrictEqual } from 'node:util';
import type { ObservedPartition } from '../api/cube-assignment.ts';

const isPlainObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * Whether applying `patch` (RFC 7396: objects merge key by key, null deletes, anything else
 * replaces) to `current` would give something else. Timestamps are compared as they are
 * stored (strings): a patch built from the object's own conditions leaves them as they were.
 */
export function mergePatchChanges(current: unknown, patch: unknown): boolean {
  if (patch === undefined) return false;
  if (patch === null) return current !== undefined && current !== null;
  if (!isPlainObject(patch)) return !isDeepStrictEqual(current, patch);
  // An object patch over anything but an object makes an object.
  if (!isPlainObject(current)) return true;
  return Object.entries(patch).some(([key, value]) => mergePatchChanges(current[key], value));
}

/** `current` with `patch` applied (RFC 7396), as the API server applies it; neither is changed. */
export function applyMergePatch(current: unknown, patch: unknown): unknown {
  if (!isPlainObject(patch)) return patch;
  const out: Record<string, unknown> = isPlainObject(current) ? { ...current } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete out[key];
    else if (value !== undefined) out[key] = applyMergePatch(out[key], value);
  }
  return out;
}

/** The order of magnitude of a lag: 0, then 1 for 1–9, 2 for 10–99, and so on. */
export function lagBucket(lag: string | undefined): number {
  if (lag === undefined) return -1;
  return lag === '0' ? 0 : lag.length;
}

/**
 * Whether newly observed partition rows say something the written ones do not, beyond positions
 * moving on: another partition, owner or reporting field, or a lag of another magnitude.
 */
export function partitionRowsMoved(
  written: readonly ObservedPartition[] | undefined,
  observed: readonly ObservedPartition[],
): boolean {
  if (written?.length !== observed.length) return true;
  return observed.some((row, i) => {
    const before = written[i]!;
    return (
      before.partition !== row.partition ||
      before.replicaSet !== row.replicaSet ||
      (before.position === undefined) !== (row.position === undefined) ||
      (before.highWatermark === undefined) !== (row.highWatermark === undefined) ||
      lagBucket(before.lag) !== lagBucket(row.lag) ||
      before.lostOffsets !== row.lostOffsets
    );
  });
}
