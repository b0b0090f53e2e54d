// Which Draining sets of a pool may go: a set leaves only once no CubeAssignment uses it. A cube
// uses a set while it lists it (spec.replicaSets), holds partitions on it (status.assignment), has
// a move in flight or proposed touching it (status.reassign, status.proposal), or keeps data of
// partitions moved away from it that is not committed yet (status.releasedUncommitted). Pure.
import type { CubeAssignment } from '../../api/cube-assignment.ts';

export type SetUseKind = 'listed' | 'assigned' | 'moving' | 'proposed' | 'uncommitted';

export interface SetUse {
  /** `namespace/name` of the cube. */
  cube: string;
  how: SetUseKind;
}

/** The ways `cube` uses `set`, in the order above; none when it does not. */
export function usesOfSet(cube: CubeAssignment, set: string): SetUseKind[] {
  const { spec, status } = cube;
  const reassign = status?.reassign;
  const fenced = [reassign?.failover, reassign?.stopFence, reassign?.lostSets].flatMap(
    (f) => f?.replicaSets ?? [],
  );
  const found: [SetUseKind, boolean][] = [
    ['listed', (spec.replicaSets ?? []).includes(set)],
    ['assigned', (status?.assignment?.[set]?.length ?? 0) > 0],
    [
      'moving',
      (reassign?.moves ?? []).some((m) => m.from === set || m.to === set) || fenced.includes(set),
    ],
    ['proposed', (status?.proposal?.replicaSets ?? []).includes(set)],
    ['uncommitted', (status?.releasedUncommitted?.[set]?.length ?? 0) > 0],
  ];
  return found.filter(([, used]) => used).map(([how]) => how);
}

export interface ScaleInDecision {
  /** Draining sets no cube uses: their StatefulSet, Service and PDB may be deleted. */
  remove: string[];
  /** Draining sets still used, with every use (one per cube and kind). */
  held: { set: string; uses: SetUse[] }[];
}

export function decideScaleIn(
  draining: readonly string[],
  cubes: readonly CubeAssignment[],
): ScaleInDecision {
  const decision: ScaleInDecision = { remove: [], held: [] };
  for (const set of draining) {
    const uses = cubes.flatMap((cube) =>
      usesOfSet(cube, set).map((how) => ({
        cube: `${cube.metadata.namespace ?? ''}/${cube.metadata.name ?? ''}`,
        how,
      })),
    );
    if (uses.length === 0) decision.remove.push(set);
    else decision.held.push({ set, uses });
  }
  return decision;
}

/** One line a person reads in the SetsInUse condition and Event: which cubes hold which sets. */
export function setsInUseMessage(held: ScaleInDecision['held']): string {
  return held
    .map(({ set, uses }) => {
      const byCube = new Map<string, SetUseKind[]>();
      for (const u of uses) byCube.set(u.cube, [...(byCube.get(u.cube) ?? []), u.how]);
      const cubes = [...byCube].map(([cube, how]) => `${cube} (${how.join(', ')})`).join(', ');
      return `set ${set} is Draining but used by ${cubes}`;
    })
    .join('; ');
}
