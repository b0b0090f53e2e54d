// The events a pool's sets are behind, pure: for each cube that names the pool (spec.pool) or uses
// its sets (spec.replicaSets, status.assignment), each partition a set of the pool owns is behind
// by the brokers' high watermark (read by the operator at this look) minus the position the cube's
// status last recorded for it (status.partitions: at most one --resync old, so a healthy receiver
// may be up to one resync of traffic further than this says; a stopped one is exactly this far
// behind). A suspended cube's status is not refreshed, and partitions with no position recorded
// or whose brokers did not answer are unknown: listed, never counted as caught up.
import type { CubeAssignment } from '../../api/cube-assignment.ts';
import { isPoolSet } from './set-names.ts';

/** The high watermark of each partition of a cube's topic, or why it could not be read. */
export type HighWatermarks = Map<number, bigint> | { error: string };

/**
 * The position the status last recorded per cube (by uid) and partition: a row that went
 * missing (its owner did not answer) keeps its last position instead of vanishing from the sum.
 */
export class LastPositions {
  private readonly byCube = new Map<string, Map<number, bigint>>();

  static keyOf(cube: CubeAssignment): string {
    return cube.metadata.uid ?? cubeKey(cube);
  }

  /** Records the cube's rows and returns the positions known now, recorded or remembered. */
  update(cube: CubeAssignment): Map<number, bigint> {
    const uid = LastPositions.keyOf(cube);
    const known = this.byCube.get(uid) ?? new Map<number, bigint>();
    for (const row of cube.status?.partitions ?? [])
      if (row.position !== undefined) known.set(row.partition, BigInt(row.position));
    this.byCube.set(uid, known);
    return known;
  }

  /** Forgets every cube but these (the others were deleted or left the pool). */
  keepOnly(cubes: readonly CubeAssignment[]): void {
    const kept = new Set(cubes.map((c) => LastPositions.keyOf(c)));
    for (const uid of this.byCube.keys()) if (!kept.has(uid)) this.byCube.delete(uid);
  }
}

export const cubeKey = (cube: CubeAssignment): string =>
  `${cube.metadata.namespace ?? ''}/${cube.metadata.name ?? ''}`;

/**
 * Whether `cube` counts for pool `pool` (whose first sets may have adopted names, `setNames`): it
 * names it or lists or holds partitions on its sets.
 */
export function cubeUsesPool(
  cube: CubeAssignment,
  pool: string,
  setNames: readonly string[] = [],
): boolean {
  const ofPool = (set: string): boolean => isPoolSet(pool, set, setNames);
  return (
    cube.spec.pool === pool ||
    (cube.spec.replicaSets ?? []).some(ofPool) ||
    Object.entries(cube.status?.assignment ?? {}).some(([set, ps]) => ofPool(set) && ps.length > 0)
  );
}

/** The partitions of `cube` that a set of `pool` owns (status.assignment). */
export function partitionsOnPool(
  cube: CubeAssignment,
  pool: string,
  setNames: readonly string[] = [],
): number[] {
  return Object.entries(cube.status?.assignment ?? {})
    .filter(([set]) => isPoolSet(pool, set, setNames))
    .flatMap(([, ps]) => ps)
    .sort((a, b) => a - b);
}

export interface CubeLag {
  cube: string;
  /** Events behind over its partitions on the pool with a known figure. */
  lag: bigint;
  /** Why (part of) its figures are unknown, if they are. */
  unknown?: string;
  /** Its topic's partitions (or those on the pool, without the brokers' answer). */
  partitions: number;
}

export function cubeLag(
  cube: CubeAssignment,
  pool: string,
  positions: ReadonlyMap<number, bigint>,
  highWatermarks: HighWatermarks | undefined,
  setNames: readonly string[] = [],
): CubeLag {
  const key = cubeKey(cube);
  const owned = partitionsOnPool(cube, pool, setNames);
  if (cube.spec.suspend)
    return { cube: key, lag: 0n, unknown: `${key} (suspended)`, partitions: owned.length };
  if (highWatermarks === undefined || 'error' in highWatermarks)
    return {
      cube: key,
      lag: 0n,
      partitions: owned.length,
      ...(owned.length > 0
        ? { unknown: `${key} (high watermarks: ${highWatermarks?.error ?? 'not read'})` }
        : {}),
    };
  let lag = 0n;
  const missing: number[] = [];
  for (const p of owned) {
    const high = highWatermarks.get(p);
    const position = positions.get(p);
    if (high === undefined || position === undefined) {
      missing.push(p);
      continue;
    }
    if (high > position) lag += high - position;
  }
  const many = missing.length > 1;
  return {
    cube: key,
    lag,
    partitions: Math.max(highWatermarks.size, owned.length),
    ...(missing.length > 0
      ? {
          unknown: `${key} (no position or high watermark for partition${many ? 's' : ''} ${missing.join(', ')})`,
        }
      : {}),
  };
}

/** The pool's figures from its cubes' (the LagSample of autoscale-decision.ts without at/sets). */
export function sumLag(cubes: readonly CubeLag[]): {
  lag: number;
  unknown: string[];
  partitions: number;
} {
  return {
    lag: Number(cubes.reduce((sum, c) => sum + c.lag, 0n)),
    unknown: cubes.flatMap((c) => (c.unknown ? [c.unknown] : [])),
    partitions: Math.max(0, ...cubes.map((c) => c.partitions)),
  };
}
