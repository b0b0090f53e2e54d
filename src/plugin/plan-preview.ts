// `kubectl streamcube plan`, pure: what applying a manifest would do to a cube, computed with the
// operator's own planner (planAssignment) against what the API server says now: the cube's
// applied assignment and the replica sets with a Ready receiver pod. Nothing is written. What the
// plugin cannot see (sets lost or converging, the topic's partitions of a cube not created yet) is
// said, not guessed.
import {
  cubeAssignmentSpec,
  type CubeAssignment,
  type CubeAssignmentSpec,
} from '../api/cube-assignment.ts';
import { planAssignment, type Problem } from '../operator/planner.ts';
import type { Move } from '../assign/assignment.ts';
import { sortedNames } from '../assign/assignment.ts';
import { ownersOf, table } from './status-view.ts';

/** A manifest's spec, validated as the API server would (defaults applied), or the fields wrong. */
export function parseManifestSpec(
  spec: unknown,
): { spec: CubeAssignmentSpec } | { errors: string[] } {
  const parsed = cubeAssignmentSpec.safeParse(spec);
  if (parsed.success) return { spec: parsed.data };
  return {
    errors: parsed.error.issues.map(
      (issue) =>
        `spec${issue.path.map((k) => (typeof k === 'number' ? `[${k}]` : `.${String(k)}`)).join('')}: ${issue.message}`,
    ),
  };
}

export interface PlanPreview {
  /** Spec fields whose value the manifest changes, as `field: before → after` lines. */
  changes: string[];
  moves: Move[];
  problems: Problem[];
  /** What the preview could not know, or what happens besides the moves. */
  notes: string[];
}

const shown = (value: unknown): string =>
  value === undefined ? '(unset)' : JSON.stringify(value).replaceAll('"', '');

export function previewPlan(
  spec: CubeAssignmentSpec,
  live: CubeAssignment | undefined,
  readyReplicaSets: ReadonlySet<string>,
): PlanPreview {
  const notes: string[] = [];
  if (live === undefined) {
    notes.push(
      'The cube does not exist: applying the manifest creates it. Its first placement needs no approval; the operator reads the topic for its partitions and places them over the replica sets with a Ready receiver.',
    );
    const missing = (spec.replicaSets ?? []).filter((rs) => !readyReplicaSets.has(rs));
    if (missing.length > 0)
      notes.push(`No Ready receiver pod now in replica set(s) ${missing.join(', ')}.`);
    return { changes: [], moves: [], problems: [], notes };
  }
  const changes: string[] = [];
  const before = live.spec as unknown as Record<string, unknown>;
  const after = spec as unknown as Record<string, unknown>;
  for (const key of sortedNames(new Set([...Object.keys(before), ...Object.keys(after)]))) {
    if (JSON.stringify(before[key]) === JSON.stringify(after[key])) continue;
    changes.push(
      key === 'source' || key === 'schema'
        ? `${key}: changed (rolled out to every receiver holding the cube; no partition moves for it)`
        : `${key}: ${shown(before[key])} → ${shown(after[key])}`,
    );
  }
  const owners = ownersOf(live);
  const current = live.status?.assignment;
  if (current === undefined || owners.size === 0) {
    notes.push(
      'The cube has no partition placed yet: the operator places them when it reads the topic.',
    );
    return { changes, moves: [], problems: [], notes };
  }
  const plan = planAssignment({
    strategy: spec.strategy,
    // A cube on a pool (spec.pool) is previewed over no sets: the plugin does not read pools.
    replicaSets: spec.replicaSets ?? [],
    pins: spec.pins,
    current,
    partitions: [...owners.keys()],
    availableReplicaSets: new Set(readyReplicaSets),
  });
  if (live.status?.reassign)
    notes.push(
      `A move is in flight (phase ${live.status.reassign.phase}): this edit is planned once it completes, from the assignment it leaves.`,
    );
  if (spec.suspend) notes.push('spec.suspend is true: no move starts while the cube is suspended.');
  if (plan.moves.length > 0 && spec.approval === 'manual')
    notes.push(
      'spec.approval is manual: the operator writes these moves as status.proposal and waits for `kubectl streamcube approve`.',
    );
  notes.push(
    'Computed from the partitions placed now and the replica sets with a Ready receiver pod; a replica set lost or converging, or partitions the topic gained since, can change what the operator plans.',
  );
  return { changes, moves: plan.moves, problems: plan.problems, notes };
}

export function renderPlan(
  name: string,
  namespace: string,
  preview: PlanPreview,
  live: CubeAssignment | undefined,
): string {
  const lines: string[] = [`Plan for CubeAssignment ${namespace}/${name} (nothing applied):`];
  if (preview.changes.length > 0) {
    lines.push('', 'Spec changes:');
    for (const c of preview.changes) lines.push(`  ${c}`);
  } else if (live) {
    lines.push('', 'The manifest changes nothing in the spec.');
  }
  if (preview.moves.length > 0) {
    const lag = new Map(
      (live?.status?.partitions ?? []).map((r) => [r.partition, r.lag ?? '-'] as const),
    );
    const touched = sortedNames(
      new Set(preview.moves.flatMap((m) => (m.from ? [m.from, m.to] : [m.to]))),
    );
    lines.push(
      '',
      `${preview.moves.length} partition${preview.moves.length === 1 ? '' : 's'} would move, touching ${touched.join(', ')} (every other set keeps consuming):`,
      table([
        ['PARTITION', 'FROM', 'TO', 'LAG'],
        ...[...preview.moves]
          .sort((a, b) => a.partition - b.partition)
          .map((m) => [String(m.partition), m.from ?? '-', m.to, lag.get(m.partition) ?? '-']),
      ]),
    );
  } else if (live?.status?.assignment) {
    lines.push('', 'No partition would move.');
  }
  if (preview.problems.length > 0) {
    lines.push('', 'Problems the operator would report (Degraded):');
    for (const p of preview.problems) lines.push(`  ${p.reason}: ${p.message}`);
  }
  if (preview.notes.length > 0) {
    lines.push('');
    for (const n of preview.notes) lines.push(n);
  }
  return `${lines.join('\n')}\n`;
}
