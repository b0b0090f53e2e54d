// Before a CubeAssignment goes, every receiver that has the cube releases it, seals, hands off and
// drops it; only then is the finalizer removed. A replica set that may hold the cube's data (one
// of the assignment, or a target a reassign already started) but has no ready receiver holds the
// deletion up, Degraded, rather than lose that data.
import { ReceiverApiError } from '../../protocol/client.ts';
import type { ReconcileResult } from '../runtime/controller.ts';
import { requeueDelayMs } from '../reassign/index.ts';
import { requeueAfterMs, sealPollMs } from './delays.ts';
import type { CubeEdges, CubePass } from './pass.ts';
import { sealAndDrop } from '../seal-and-drop.ts';
import { conditionsWith } from './status-writer.ts';

export const finalizer = 'streamcube.io/finalizer';

/** The object carries the finalizer (added when the operator first sees the cube). */
export async function ensureFinalizer(edges: CubeEdges, pass: CubePass): Promise<void> {
  const finalizers = pass.object.metadata?.finalizers ?? [];
  if (finalizers.includes(finalizer)) return;
  pass.object = await edges.status.finalizers(pass.object, [...finalizers, finalizer], pass.signal);
}

export async function finalize(edges: CubeEdges, pass: CubePass): Promise<ReconcileResult | void> {
  const { object, receivers, signal } = pass;
  const cube = pass.key.name;
  const assignment = object.status?.assignment ?? {};
  const targets = (object.status?.reassign?.moves ?? []).map((m) => m.to);
  const holders = new Set([
    ...Object.entries(assignment)
      .filter(([, ps]) => ps.length > 0)
      .map(([rs]) => rs),
    ...targets,
  ]);
  const unavailable = [...holders].filter((rs) => (receivers.get(rs) ?? []).length === 0).sort();
  if (unavailable.length > 0) {
    const many = unavailable.length > 1;
    const message = `deletion waits for replica set${many ? 's' : ''} ${unavailable.join(', ')}: ${many ? 'they hold' : 'it holds'} data of the cube but ha${many ? 've' : 's'} no ready receiver to hand it off (remove the finalizer ${finalizer} to delete without handing off)`;
    const problem = { reason: 'FinalizeBlocked', message };
    await edges.status.status(
      object,
      {
        conditions: conditionsWith(object, [
          edges.degraded.condition(object, [problem]),
          { type: 'Ready', status: 'False', reason: problem.reason, message },
        ]),
      },
      signal,
    );
    return { requeueAfterMs: requeueAfterMs.finalizeBlocked };
  }
  // Each receiver says what it holds: a reassign cut short leaves partitions on a target that
  // status.assignment does not name yet.
  const replicaSets = new Set([
    ...Object.keys(assignment),
    ...(object.spec.replicaSets ?? []),
    ...targets,
  ]);
  // The seal waits briefly for the hand-off; a receiver whose hand-off is still pending is asked
  // again on the next reconcile instead of holding a worker until it is done.
  let handOffPending = false;
  for (const rs of replicaSets) {
    for (const endpoint of receivers.get(rs) ?? []) {
      const client = edges.receivers.client(endpoint, pass.key.namespace);
      try {
        const held = (await client.cubeSummary(cube, signal)).partitions
          .filter((p) => p.state !== 'released')
          .map((p) => p.partition);
        if (held.length > 0) await client.release(cube, held, signal);
        if ((await sealAndDrop(client, cube, { sealPollMs, signal })) === 'handOffPending')
          handOffPending = true;
      } catch (error) {
        if (error instanceof ReceiverApiError && error.status === 404) continue;
        throw error;
      }
    }
  }
  if (handOffPending) return { requeueAfterMs: requeueDelayMs.handOffPending };
  edges.events.record(
    object,
    'Normal',
    'Finalized',
    'sealed and handed off the cube on every receiver, then unassigned it',
  );
  await edges.status.finalizers(
    object,
    (object.metadata?.finalizers ?? []).filter((f) => f !== finalizer),
    signal,
  );
}
