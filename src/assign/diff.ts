// The plan of a reassignment (DESIGN.md §4 step 1): per partition, only the ones changing owner move;
// every other partition keeps consuming.
import { holdersByPartition, type Assignment, type Move } from './assignment.ts';

/**
 * One move per partition of `desired` whose owner changes, or that nobody consumes yet (no `from`),
 * sorted by partition. A partition listed by several replica sets (of a broken `current`) does not
 * move if one of them is its desired owner; otherwise it moves from the first by name. Partitions
 * only in `current` have no new owner and are not moves.
 */
export function diffAssignments(current: Assignment, desired: Assignment): Move[] {
  const currentHolders = holdersByPartition(current);
  const moves: Move[] = [];
  const desiredHolders = [...holdersByPartition(desired)].sort(([a], [b]) => a - b);
  for (const [partition, [to]] of desiredHolders) {
    if (to === undefined) continue;
    const holders = currentHolders.get(partition) ?? [];
    if (holders.includes(to)) continue;
    const [from] = holders;
    moves.push(from === undefined ? { partition, to } : { partition, from, to });
  }
  return moves;
}

export function countMoves(current: Assignment, desired: Assignment): number {
  return diffAssignments(current, desired).length;
}
