// Pausing: every replica of each source pauses the moving partitions; stop = max position.
import type { ReassignJournal } from '../../../api/cube-assignment.ts';
import type { ReassignContext } from '../context.ts';
import { waitForNotReadyReplicas } from '../not-ready-replicas.ts';
import { bySource } from '../moves.ts';
import { phaseDone, type PhaseRun } from '../outcome.ts';
import {
  callReceiver,
  crashPointAfterReceiver,
  eachSetAtOnce,
  forEachReplicaWithCube,
} from '../receivers.ts';
import { startingOffsetsOf } from '../start-offsets.ts';

/**
 * Pauses the moving partitions on every replica of each source and writes down stop = the highest
 * position over them; a move without a source stops at the brokers' starting offset.
 */
export async function pausing(ctx: ReassignContext, journal: ReassignJournal): Promise<PhaseRun> {
  const waiting = waitForNotReadyReplicas(ctx, journal, 'sources');
  if (waiting) return waiting;
  const stop = new Map<number, bigint>();
  await eachSetAtOnce(bySource(journal), ([rs, partitions]) =>
    forEachReplicaWithCube(ctx, journal, rs, async (endpoint) => {
      const answer = await callReceiver(ctx, endpoint, 'pause', 'PauseFailed', (c) =>
        c.pause(ctx.cube, partitions, ctx.signal),
      );
      crashPointAfterReceiver('Pausing');
      const epochs = ctx.object.status?.epochs ?? {};
      for (const p of answer.partitions) {
        // A replica behind status (a move it missed, not yet converged) holds another epoch's
        // position: it says nothing of where this one is.
        if (p.epoch < (epochs[String(p.partition)] ?? 0)) continue;
        const position = BigInt(p.position);
        if ((stop.get(p.partition) ?? -1n) < position) stop.set(p.partition, position);
      }
      return true;
    }),
  );
  const fresh = journal.moves.filter((m) => m.from === undefined).map((m) => m.partition);
  if (fresh.length > 0) {
    for (const [p, o] of await startingOffsetsOf(ctx, fresh)) stop.set(p, o);
  }
  const stopOffsets = Object.fromEntries([...stop].map(([p, o]) => [String(p), o.toString()]));
  return phaseDone({ stopOffsets });
}
