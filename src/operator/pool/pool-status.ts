// The status of a pool from what a pass found: every set with its state and Ready receivers, the
// counts the scale subresource and printer columns read, and the Ready and Degraded conditions.
// Pure; the reconciler writes it only when it differs from the stored status.
import { setCondition, type Condition } from '../../api/conditions.ts';
import type { PoolSetStatus, ReceiverPool, ReceiverPoolStatus } from '../../api/receiver-pool.ts';
import { setsInUseMessage, type ScaleInDecision } from './scale-in.ts';
import { poolSelector } from './set-names.ts';

export interface ObservedSet {
  name: string;
  index: number;
  /** The StatefulSet's status.replicas and readyReplicas (0 before its controller wrote any). */
  replicas: number;
  readyReplicas: number;
}

export interface PoolFindings {
  /** The sets whose StatefulSet exists after this pass's applies and deletions. */
  sets: ObservedSet[];
  held: ScaleInDecision['held'];
  /** Sets the API server refused to apply, with its reason. */
  applyFailures: { set: string; message: string }[];
}

export interface Problem {
  reason: string;
  message: string;
}

export function poolProblems(findings: PoolFindings): Problem[] {
  return [
    ...findings.applyFailures.map((f) => ({
      reason: 'ApplyFailed',
      message: `set ${f.set}: ${f.message}`,
    })),
    ...(findings.held.length > 0
      ? [{ reason: 'SetsInUse', message: setsInUseMessage(findings.held) }]
      : []),
  ];
}

/** The pool's status (conditions at `now`, transition times kept when a status stays). */
export function poolStatus(
  pool: ReceiverPool,
  findings: PoolFindings,
  now: Date,
): ReceiverPoolStatus {
  const wanted = pool.spec.sets;
  const sets: PoolSetStatus[] = [...findings.sets]
    .sort((a, b) => a.index - b.index)
    .map((s) => ({
      name: s.name,
      index: s.index,
      state: s.index < wanted ? 'Active' : 'Draining',
      replicas: s.replicas,
      readyReplicas: s.readyReplicas,
    }));
  const active = sets.filter((s) => s.state === 'Active');
  const ready = active.filter((s) => s.readyReplicas >= pool.spec.replicas);
  const missing = wanted - active.length;
  const problems = poolProblems(findings);
  const notReady = active.filter((s) => s.readyReplicas < pool.spec.replicas);
  const readyCondition =
    findings.applyFailures.length > 0
      ? { status: 'False' as const, reason: 'ApplyFailed', message: problems[0]!.message }
      : notReady.length > 0 || missing > 0
        ? {
            status: 'False' as const,
            reason: 'ReceiversNotReady',
            message: [
              ...notReady.map((s) => `${s.name}: ${s.readyReplicas}/${pool.spec.replicas} Ready`),
              ...(missing > 0 ? [`${missing} sets not created yet`] : []),
            ].join(', '),
          }
        : {
            status: 'True' as const,
            reason: 'SetsReady',
            message: `${ready.length} of ${wanted} sets have every receiver Ready`,
          };
  const degradedCondition =
    problems.length === 0
      ? { status: 'False' as const, reason: 'AsExpected', message: 'no problem found' }
      : {
          status: 'True' as const,
          reason: problems[0]!.reason,
          message: problems.map((p) => p.message).join('; '),
        };
  const generation = pool.metadata.generation;
  let conditions: Condition[] | undefined = pool.status?.conditions;
  for (const update of [
    { type: 'Ready', ...readyCondition },
    { type: 'Degraded', ...degradedCondition },
  ]) {
    conditions = setCondition(
      conditions,
      { ...update, ...(generation === undefined ? {} : { observedGeneration: generation }) },
      now,
    );
  }
  return {
    ...(generation === undefined ? {} : { observedGeneration: generation }),
    replicas: sets.length,
    readySets: ready.length,
    selector: poolSelector(pool.metadata.name ?? ''),
    sets,
    conditions: conditions ?? [],
  };
}
