// spec.suspend: every replica of the assignment pauses the cube's partitions, and status says
// the cube is suspended; nothing is planned or moved while it is.
import type { CubeAssignmentStatusPatch } from '../../api/cube-assignment.ts';
import { isStaleLeader } from '../../protocol/client.ts';
import type { ReconcileResult } from '../runtime/controller.ts';
import type { CubeEdges, CubePass } from './pass.ts';
import { conditionsWith } from './status-writer.ts';

export async function suspend(
  edges: CubeEdges,
  pass: CubePass,
  /** Written with this status: the spec roll-out's digest (spec-rollout.ts). */
  digestPatch: CubeAssignmentStatusPatch,
  resyncMs: number,
): Promise<ReconcileResult> {
  const { object, receivers, signal, key } = pass;
  for (const [rs, partitions] of Object.entries(object.status?.assignment ?? {})) {
    for (const endpoint of receivers.get(rs) ?? []) {
      if (partitions.length > 0)
        await edges.receivers
          .client(endpoint, key.namespace)
          .pause(key.name, partitions, signal)
          .catch((error: unknown) => {
            // Best effort, but a deposed leader goes no further.
            if (isStaleLeader(error)) throw error;
          });
    }
  }
  signal.throwIfAborted();
  await edges.status.status(object, {
    ...digestPatch,
    observedGeneration: object.metadata?.generation,
    conditions: conditionsWith(object, [
      {
        type: 'Ready',
        status: 'False',
        reason: 'Suspended',
        message: 'spec.suspend is true: consumption is paused',
      },
      { type: 'Progressing', status: 'False', reason: 'Suspended', message: 'suspended' },
    ]),
  });
  return { requeueAfterMs: resyncMs };
}
