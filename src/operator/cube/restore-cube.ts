// A replica of a set that does not hold the cube (its volume replaced, a replica added to the
// set) gets it as a target of a move would: the set's partitions at the positions, epochs and
// watermarks of a sibling replica whose consumer runs. Its data before those positions is not
// re-read: the sibling's copy is the data of that range.
import { cubeSummaryOf, type CubeSummary } from '../../protocol/admin-api.ts';
import { ReceiverApiError, isStaleLeader } from '../../protocol/client.ts';
import type { ReceiverEndpoint } from '../discovery.ts';
import type { Problem } from '../planner.ts';
import { assignRequest } from '../reassign/index.ts';
import type { CubeEdges, CubePass } from './pass.ts';

/** One receiver's summary of the cube. */
export interface ReceiverReport {
  receiver: string;
  status: CubeSummary;
}

/**
 * Gives `endpoint` the cube with its set's `owned` partitions, copied from a sibling among
 * `reports`. No sibling to copy from, a suspended cube, or a failed call: CubeNotOnReceiver. On
 * success the replica's report joins `reports`.
 */
export async function restoreCube(
  edges: CubeEdges,
  pass: CubePass,
  endpoint: ReceiverEndpoint,
  owned: number[],
  reports: ReceiverReport[],
): Promise<Problem | undefined> {
  const { object, signal } = pass;
  const cube = pass.key.name;
  const rs = endpoint.replicaSet;
  const lacks = `receiver ${endpoint.name} (${rs}) does not hold the cube, though partitions ${owned.join(', ')} are assigned to its replica set`;
  const sibling = reports.find((r) => r.status.consumer.state === 'running');
  if (!sibling || object.spec.suspend) return { reason: 'CubeNotOnReceiver', message: lacks };
  const epochs = object.status?.epochs ?? {};
  const starts = sibling.status.partitions
    .filter((p) => owned.includes(p.partition) && p.state !== 'released')
    .map((p) => ({
      partition: p.partition,
      position: p.position,
      epoch: epochs[String(p.partition)] ?? p.epoch,
      watermark: p.watermark,
    }));
  const client = edges.receivers.client(endpoint, pass.key.namespace);
  try {
    // The shared read may be up to a resync old: ask the receiver itself before giving it the
    // cube, so that a replica that holds the cube is never reset to its sibling's positions.
    const held = await client.cubeSummary(cube, signal).catch((error: unknown) => {
      if (error instanceof ReceiverApiError && error.status === 404) return undefined;
      throw error;
    });
    if (held) {
      reports.push({ receiver: endpoint.name, status: held });
      return undefined;
    }
    const status = cubeSummaryOf(
      await client.assign(cube, assignRequest(object, rs, starts), signal),
    );
    reports.push({ receiver: endpoint.name, status });
  } catch (error) {
    signal.throwIfAborted();
    if (isStaleLeader(error)) throw error;
    return {
      reason: 'CubeNotOnReceiver',
      message: `${lacks}; giving it the cube failed: ${(error as Error).message}`,
    };
  }
  edges.metrics.replicaCubeRestored.inc({ cube, replica_set: rs });
  const at = starts.map((p) => `${p.partition} at ${p.position}`).join(', ');
  edges.logger.info('cube restored on a replica', {
    cube,
    receiver: endpoint.name,
    replicaSet: rs,
    at,
  });
  edges.events.record(
    object,
    'Normal',
    'CubeRestoredOnReceiver',
    `receiver ${endpoint.name} (${rs}) did not hold the cube: given partition${starts.length > 1 ? 's' : ''} ${at}, the positions of ${sibling.receiver}`,
  );
  return undefined;
}
