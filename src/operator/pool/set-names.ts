// The names and labels of a pool's sets: set `i` of pool `p` is `p-i`, the name of its
// StatefulSet, Service and PodDisruptionBudget, and the value of its pods' replica-set label.
// A pool's spec.setNames renames its first sets as the chart named its receivers before pools:
// set `i` is replica set `setNames[i]`, its objects `p-<setNames[i]>`.
import { poolLabel } from '../../api/receiver-pool.ts';
import { replicaSetLabel } from '../discovery.ts';

export { poolLabel, replicaSetLabel };

/** The replica set of index `index`: `setNames[index]`, else `<pool>-<index>`. */
export function setName(pool: string, index: number, setNames: readonly string[] = []): string {
  return setNames[index] ?? `${pool}-${index}`;
}

/** The name of the StatefulSet, Service and PDB of set `index`: `<pool>-<setNames[index]>`, else `<pool>-<index>`. */
export function setObjectName(
  pool: string,
  index: number,
  setNames: readonly string[] = [],
): string {
  return `${pool}-${setNames[index] ?? index}`;
}

/**
 * The index of the set whose objects are called `name` (`p-3` → 3; `p-rs-a` → 0 when setNames
 * starts with rs-a), or undefined when it is none. An index below setNames' length is known by
 * its adopted name only.
 */
export function setIndexOf(
  pool: string,
  name: string,
  setNames: readonly string[] = [],
): number | undefined {
  if (!name.startsWith(`${pool}-`)) return undefined;
  const suffix = name.slice(pool.length + 1);
  const adopted = setNames.indexOf(suffix);
  if (adopted >= 0) return adopted;
  if (!/^(0|[1-9][0-9]*)$/.test(suffix)) return undefined;
  const index = Number(suffix);
  return index < setNames.length ? undefined : index;
}

/** Whether replica set `set` is one of pool `pool`'s: an adopted name, or `<pool>-<index>` past them. */
export function isPoolSet(pool: string, set: string, setNames: readonly string[] = []): boolean {
  if (setNames.includes(set)) return true;
  // Past the adopted names a set is named as its objects are (`<pool>-<index>`).
  const index = setIndexOf(pool, set, setNames);
  return index !== undefined && index >= setNames.length;
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

/** The names of the pool's Active sets: `<pool>-0` to `<pool>-<spec.sets - 1>` (or their setNames). */
export function activeSets(pool: {
  metadata: { name?: string };
  spec: { sets: number; setNames?: readonly string[] | undefined };
}): string[] {
  const name = pool.metadata.name ?? '';
  return Array.from({ length: pool.spec.sets }, (_, index) =>
    setName(name, index, pool.spec.setNames),
  );
}
