// The names and labels of a pool's sets: set `i` of pool `p` is `p-i`, the name of its
// StatefulSet, Service and PodDisruptionBudget, and the value of its pods' replica-set label.
import { poolLabel } from '../../api/receiver-pool.ts';
import { replicaSetLabel } from '../discovery.ts';

export { poolLabel, replicaSetLabel };

export function setName(pool: string, index: number): string {
  return `${pool}-${index}`;
}

/** The index of `name` as a set of `pool` (`p-3` → 3), or undefined when it is none. */
export function setIndexOf(pool: string, name: string): number | undefined {
  if (!name.startsWith(`${pool}-`)) return undefined;
  const digits = name.slice(pool.length + 1);
  return /^(0|[1-9][0-9]*)$/.test(digits) ? Number(digits) : undefined;
}

/** What selects the pods (and claims) of one set: its StatefulSet's, Service's and PDB's selector. */
export function setSelector(pool: string, set: string): Record<string, string> {
  return { [poolLabel]: pool, [replicaSetLabel]: set };
}

/** The selector of every receiver pod of the pool (status.selector, the scale subresource's). */
export function poolSelector(pool: string): string {
  return `${poolLabel}=${pool}`;
}

/** The pool an object belongs to, by its label. */
export function poolOf(labels: Record<string, string> | undefined): string | undefined {
  return labels?.[poolLabel];
}

/** The names of the pool's Active sets: `<pool>-0` to `<pool>-<spec.sets - 1>`. */
export function activeSets(pool: {
  metadata: { name?: string };
  spec: { sets: number };
}): string[] {
  const name = pool.metadata.name ?? '';
  return Array.from({ length: pool.spec.sets }, (_, index) => setName(name, index));
}
