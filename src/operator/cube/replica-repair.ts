// Per-replica convergence (DESIGN §4): every ready replica of every replica set that holds the
// cube is set against the state its set should be in (status.assignment and epochs at rest, or
// the moves of a journal past Starting) and brought there: a replica that missed a phase,
// restarted, is new, or lost its volume. What to do is decided by replica-convergence.ts (pure);
// this file makes the calls, counts them and tells them in one Event per replica.
import type { ReassignJournal } from '../../api/cube-assignment.ts';
import type { CubeSummary } from '../../protocol/admin-api.ts';
import { isStaleLeader } from '../../protocol/client.ts';
import type { ReceiverEndpoint } from '../discovery.ts';
import type { Problem } from '../planner.ts';
import {
  assignRequest,
  describeOffsets,
  fencedMessage,
  fencedPartitions,
} from '../reassign/index.ts';
import {
  desiredAtRest,
  desiredInMove,
  noRepairs,
  replicaRepairs,
  type Repairs,
} from '../replica-convergence.ts';
import { drainPollMs, sealPollMs } from './delays.ts';
import type { CubeEdges, CubePass } from './pass.ts';
import { sealAndDrop } from '../seal-and-drop.ts';

export interface Convergence {
  /** ReplicaNotConverged, one per replica a repair failed on or could not be decided for. */
  problems: Problem[];
  /** A drain or a hand-off is still under way on some replica. */
  pending: boolean;
}

/**
 * Brings the ready replicas that hold the cube to their set's state: at rest (`journal`
 * undefined), or to the end state of the moves of a journal past Starting. One shared summary per
 * receiver. At rest, a replica that does not hold the cube is observation's (restoreCube); an
 * unreachable one too.
 */
export async function convergeReplicas(
  edges: CubeEdges,
  pass: CubePass,
  journal: ReassignJournal | undefined,
): Promise<Convergence> {
  const { object, receivers, signal, key } = pass;
  const assignment = object.status?.assignment ?? {};
  const epochs = object.status?.epochs ?? {};
  const problems: Problem[] = [];
  let pending = false;
  for (const [rs, endpoints] of receivers) {
    const reports: { endpoint: ReceiverEndpoint; status: CubeSummary | undefined }[] = [];
    for (const endpoint of endpoints) {
      try {
        const status = await edges.receivers.summary(endpoint, key, signal);
        // At rest, observation restores a replica that lacks the cube (restoreCube); in a move,
        // a target replica that lacks it takes the moving partitions from the stop offsets.
        if (status || journal) reports.push({ endpoint, status });
      } catch (error) {
        signal.throwIfAborted();
        if (isStaleLeader(error)) throw error;
      }
    }
    for (const { endpoint, status } of reports) {
      const held = status?.partitions ?? [];
      const siblings = reports.flatMap((r) =>
        r.endpoint === endpoint || !r.status
          ? []
          : [{ running: r.status.consumer.state === 'running', partitions: r.status.partitions }],
      );
      const view = {
        epochs,
        epochStarts: object.status?.epochStarts ?? {},
        resets: object.status?.resets ?? [],
        siblings,
      };
      const desired = journal
        ? desiredInMove(journal, assignment, rs, held, view)
        : desiredAtRest(assignment, rs, held, view);
      const repairs = replicaRepairs(held, desired, {
        suspended: object.spec.suspend === true,
        ownsNothing: !journal && (assignment[rs] ?? []).length === 0,
      });
      const outcome = await repairReplica(edges, pass, endpoint, repairs);
      if (outcome.problem) problems.push(outcome.problem);
      pending ||= outcome.pending;
    }
  }
  return { problems, pending };
}

/**
 * One replica's repairs, made in order: releases at the stop offsets, drains short of them,
 * assigns, resumes, pauses, then the seal of a replica whose set owns nothing. Each kind made is
 * counted, and the whole told in one Event. Returns a problem when a call failed or something
 * could not be decided, and whether a drain or a hand-off is still under way.
 */
async function repairReplica(
  edges: CubeEdges,
  pass: CubePass,
  endpoint: ReceiverEndpoint,
  repairs: Repairs,
): Promise<{ problem?: Problem; pending: boolean }> {
  const { object, signal } = pass;
  const cube = pass.key.name;
  const rs = endpoint.replicaSet;
  const where = `receiver ${endpoint.name} (${rs})`;
  const unresolved = repairs.unresolved.map((u) => `partition ${u.partition} ${u.reason}`);
  const notConverged = (detail: string): Problem => ({
    reason: 'ReplicaNotConverged',
    message: `${where} is not at its replica set's state for the cube: ${detail}`,
    // Its siblings carry the set's partitions; the cube is still consumed.
    keepsReady: true,
  });
  if (noRepairs(repairs)) {
    return unresolved.length > 0
      ? { problem: notConverged(unresolved.join('; ')), pending: false }
      : { pending: false };
  }
  const client = edges.receivers.client(endpoint, pass.key.namespace);
  const made: string[] = [];
  let pending = false;
  const count = (repair: string, what: string): void => {
    edges.metrics.replicaRepairs.inc({ cube, replica_set: rs, repair });
    made.push(what);
  };
  const partitionList = (ps: number[]): string =>
    `partition${ps.length > 1 ? 's' : ''} ${ps.join(', ')}`;
  let failure: unknown;
  try {
    if (repairs.release) {
      const { partitions, stopOffsets } = repairs.release;
      const answer = await client.release(cube, partitions, signal, stopOffsets);
      const fenced = fencedPartitions(answer.partitions);
      if (fenced.length > 0) {
        edges.metrics.replicaRepairs.inc({ cube, replica_set: rs, repair: 'fence' });
        edges.events.record(object, 'Warning', 'ExcessFenced', fencedMessage(endpoint, fenced));
      }
      count(
        'release',
        `released ${partitionList(partitions)} at the offsets their owners start from (${describeOffsets(stopOffsets)})`,
      );
    }
    if (repairs.drain) {
      const answer = await client.drain(
        cube,
        { stopOffsets: repairs.drain, timeoutMs: drainPollMs },
        signal,
      );
      pending ||= !answer.done;
      count(
        'drain',
        `drained ${describeOffsets(repairs.drain)} (the stop offsets of a move it missed)`,
      );
    }
    if (repairs.assign.length > 0) {
      await client.assign(cube, assignRequest(object, rs, repairs.assign), signal);
      const given = repairs.assign.map((p) => `${p.partition} at ${p.position} (epoch ${p.epoch})`);
      count('assign', `assigned ${given.join(', ')}`);
    }
    if (repairs.resume.length > 0) {
      await client.resume(cube, repairs.resume, signal);
      count('resume', `resumed ${partitionList(repairs.resume)}`);
    }
    if (repairs.pause.length > 0) {
      await client.pause(cube, repairs.pause, signal);
      count('pause', `paused ${partitionList(repairs.pause)}, which its set does not own`);
    }
    if (repairs.seal) {
      if ((await sealAndDrop(client, cube, { sealPollMs, signal })) === 'handOffPending')
        pending = true;
      else count('seal', 'sealed, handed off and dropped the cube, of which its set owns nothing');
    }
  } catch (error) {
    signal.throwIfAborted();
    if (isStaleLeader(error)) throw error;
    failure = error;
  }
  if (made.length > 0) {
    const text = `${where} brought to its replica set's state: ${made.join('; ')}`;
    edges.logger.info('replica repaired', {
      cube,
      receiver: endpoint.name,
      replicaSet: rs,
      repairs: made.join('; '),
    });
    edges.events.record(object, 'Normal', 'ReplicaRepaired', text);
  }
  const problems = [...unresolved];
  if (failure !== undefined) problems.push(`a repair failed: ${(failure as Error).message}`);
  return problems.length > 0
    ? { problem: notConverged(problems.join('; ')), pending }
    : { pending };
}
