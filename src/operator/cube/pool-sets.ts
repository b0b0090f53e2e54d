// A cube on a pool (spec.pool) is served by the pool's Active sets. They are resolved once, at the
// start of a pass, into the pass's spec.replicaSets, so that every branch (plan, failover, seal)
// reads one list; a pool that does not exist keeps the partitions where they are.
import type { CubeAssignment } from '../../api/cube-assignment.ts';
import type { Problem } from '../planner.ts';

/** The Active sets of a pool (`<pool>-0` … `<pool>-<spec.sets - 1>`), or undefined when there is none. */
export type PoolSets = (namespace: string, pool: string) => string[] | undefined;

/**
 * `object` (a pass's own copy) with spec.replicaSets resolved from spec.pool; the problem to
 * report when the pool is missing. A cube listing its sets is returned as it is.
 */
export function resolvePoolSets(
  object: CubeAssignment,
  poolSets: PoolSets,
  receiverNamespace: string,
): Problem | undefined {
  const pool = object.spec.pool;
  if (pool === undefined) return undefined;
  const sets = poolSets(receiverNamespace, pool);
  if (sets !== undefined) {
    object.spec.replicaSets = sets;
    return undefined;
  }
  // Nowhere to move to: every partition stays with its owner.
  object.spec.replicaSets = Object.keys(object.status?.assignment ?? {}).sort();
  return {
    reason: 'PoolNotFound',
    message: `spec.pool names ReceiverPool ${receiverNamespace}/${pool}, which does not exist: partitions stay where they are`,
    keepsReady: true,
  };
}
