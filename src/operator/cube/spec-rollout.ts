// A source edit (brokers, starting offsets: the CRD keeps topic and schema immutable) reaches every
// receiver that holds the cube before anything else runs under it, and before observedGeneration
// says it is applied. Other edits (placement, suspend) need no roll-out, and must not wait for
// receivers that are down.
import type { CubeAssignmentStatusPatch } from '../../api/cube-assignment.ts';
import { isStaleLeader } from '../../protocol/client.ts';
import type { Problem } from '../planner.ts';
import { assignRequest } from '../reassign/index.ts';
import type { ReconcileResult } from '../runtime/controller.ts';
import { requeueAfterMs } from './delays.ts';
import type { CubeEdges, CubePass } from './pass.ts';
import { conditionsWith } from './status-writer.ts';

export type SpecRollout =
  /** Every receiver runs the spec: `digestPatch` is written with the status written next. */
  | { kind: 'rolledOut'; digestPatch: CubeAssignmentStatusPatch }
  /** Some receiver does not run it yet: reported, and the cube runs again after `result`. */
  | { kind: 'notRolledOut'; result: ReconcileResult };

/** `specDigest`: cubeSpecDigest of the spec, as a receiver running it reports it. */
export async function rollOutSpec(
  edges: CubeEdges,
  pass: CubePass,
  specDigest: string,
): Promise<SpecRollout> {
  const { object } = pass;
  if (object.status?.specDigest === specDigest) return { kind: 'rolledOut', digestPatch: {} };
  const notRolledOut = await receiversNotRunning(edges, pass, specDigest);
  pass.signal.throwIfAborted();
  if (notRolledOut.length === 0) return { kind: 'rolledOut', digestPatch: { specDigest } };
  const message = notRolledOut.map((p) => p.message).join('; ');
  await edges.status.status(object, {
    conditions: conditionsWith(object, [
      {
        type: 'Progressing',
        status: 'True',
        reason: 'RollingOut',
        message: `rolling generation ${object.metadata?.generation ?? 0} of the spec out to the receivers`,
      },
      edges.degraded.condition(object, notRolledOut),
      { type: 'Ready', status: 'False', reason: notRolledOut[0]!.reason, message },
    ]),
  });
  return { kind: 'notRolledOut', result: { requeueAfterMs: requeueAfterMs.specNotRolledOut } };
}

/**
 * Brings every receiver that holds the cube to the spec's source: an assign with no partitions
 * makes a receiver reopen the cube through the new source from its checkpoint. Returns one
 * problem per receiver that does not run it yet.
 */
async function receiversNotRunning(
  edges: CubeEdges,
  pass: CubePass,
  specDigest: string,
): Promise<Problem[]> {
  const { object, receivers, signal, key } = pass;
  const replicaSets = new Set([
    ...Object.keys(object.status?.assignment ?? {}),
    ...(object.spec.replicaSets ?? []),
  ]);
  const problems: Problem[] = [];
  for (const rs of replicaSets) {
    for (const endpoint of receivers.get(rs) ?? []) {
      try {
        const status = await edges.receivers.summary(endpoint, key, signal);
        if (status === undefined) continue; // holds none of it
        if (status.specDigest !== specDigest)
          await edges.receivers
            .client(endpoint, key.namespace)
            .assign(key.name, assignRequest(object, rs, []), signal);
      } catch (error) {
        signal.throwIfAborted();
        if (isStaleLeader(error)) throw error;
        problems.push({
          reason: 'SpecNotRolledOut',
          message: `receiver ${endpoint.name} (${rs}) does not run generation ${object.metadata?.generation ?? 0} of the spec yet: ${(error as Error).message}`,
        });
      }
    }
  }
  return problems;
}
