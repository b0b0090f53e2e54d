// Consumer groups left behind. Each receiver keeps one group per cube it holds
// (`streamcube.<namespace>.<cube>.<receiver>`, src/kafka/consumer-group.ts) and deletes it when
// the cube leaves it. That deletion needs the receiver and the broker at the same moment: a cube
// deleted while its receiver was down, or a receiver scaled away with its volume, leaves a group
// whose lag grows for ever, and kafka_exporter/KMinion lag alerts fire on nothing. The leader
// sweeps such groups: an empty group (no member: no consumer uses it) is deleted when its cube no
// longer exists or no receiver pod of its name does. A group with members is never touched (Kafka
// refuses anyway), nor are groups of other applications. Deleting a group loses nothing: a
// receiver's positions are its checkpoint, and a group's commits only mirror them.
import type { Admin } from 'kafkajs';
import type { Logger } from '../observability/logger.ts';
import type { CubeAssignment } from '../api/cube-assignment.ts';
import {
  consumerGroupOwner,
  failedGroups,
  groupIdNotFound,
  nonEmptyGroup,
} from '../kafka/consumer-group.ts';

export interface ListedGroup {
  groupId: string;
  /** Kafka's group state: Empty, Stable, PreparingRebalance, CompletingRebalance, Dead. */
  state: string;
}

export type SweepReason = 'CubeGone' | 'ReceiverGone';

export interface SweepWorld {
  /** Whether cubes of the namespace are this operator's to judge (it watches the namespace). */
  watches(namespace: string): boolean;
  cubeExists(namespace: string, cube: string): boolean;
  receiverExists(receiver: string): boolean;
}

/** The groups to delete, each with why: empty, streamcube's, and of a cube or receiver gone. */
export function orphanGroups(
  groups: readonly ListedGroup[],
  world: SweepWorld,
): { groupId: string; reason: SweepReason }[] {
  const out: { groupId: string; reason: SweepReason }[] = [];
  for (const { groupId, state } of groups) {
    if (state !== 'Empty') continue;
    const owner = consumerGroupOwner(groupId);
    if (!owner || !world.watches(owner.namespace)) continue;
    if (!world.cubeExists(owner.namespace, owner.cube)) out.push({ groupId, reason: 'CubeGone' });
    else if (!world.receiverExists(owner.receiver)) out.push({ groupId, reason: 'ReceiverGone' });
  }
  return out;
}

/** streamcube's groups on one cluster, with their states. */
export async function listStreamcubeGroups(admin: Admin): Promise<ListedGroup[]> {
  const { groups } = await admin.listGroups();
  const ids = groups.map((g) => g.groupId).filter((id) => consumerGroupOwner(id) !== undefined);
  if (ids.length === 0) return [];
  const described = await admin.describeGroups(ids);
  return described.groups.map((g) => ({ groupId: g.groupId, state: g.state }));
}

/**
 * Deletes the groups; those a consumer joined since they were listed (Kafka refuses: non-empty)
 * or that are gone already count as not deleted. Returns the ids deleted.
 */
export async function deleteGroups(admin: Admin, ids: string[]): Promise<string[]> {
  if (ids.length === 0) return [];
  try {
    await admin.deleteGroups(ids);
    return ids;
  } catch (error) {
    const failed = failedGroups(error);
    const skipped = (code: number | undefined): boolean =>
      code === nonEmptyGroup || code === groupIdNotFound;
    if (!failed || !failed.every((g) => skipped(g.errorCode))) throw error;
    const notDeleted = new Set(failed.map((g) => g.groupId));
    return ids.filter((id) => !notDeleted.has(id));
  }
}

export interface GroupSweepOptions {
  /** The CubeAssignments this operator sees (its informer's cache). */
  cubes: () => readonly CubeAssignment[];
  /** Names of the receiver pods this operator sees. */
  receivers: () => readonly string[];
  /** The namespace this operator watches, or undefined for all: groups elsewhere are not its own. */
  namespace: string | undefined;
  /** The admin client of a cube's source cluster. */
  adminOf: (cube: CubeAssignment) => Promise<Admin>;
  deleted: (reason: SweepReason) => void;
  logger: Logger;
}

/**
 * One sweep over every Kafka cluster the cubes read. Groups are judged against the informers'
 * caches, so the caller sweeps only once they have synced. Returns the groups deleted.
 */
export async function sweepGroups(
  o: GroupSweepOptions,
): Promise<{ groupId: string; reason: SweepReason }[]> {
  const cubes = o.cubes();
  const existing = new Set(cubes.map((c) => `${c.metadata.namespace}/${c.metadata.name}`));
  const receivers = new Set(o.receivers());
  const world: SweepWorld = {
    watches: (namespace) => o.namespace === undefined || namespace === o.namespace,
    cubeExists: (namespace, cube) => existing.has(`${namespace}/${cube}`),
    receiverExists: (receiver) => receivers.has(receiver),
  };
  // One cube per cluster: sources that differ only in credentials list the same groups.
  const clusters = new Map<string, CubeAssignment>();
  for (const cube of cubes) {
    const key = [...cube.spec.source.brokers].sort().join(',');
    if (!clusters.has(key)) clusters.set(key, cube);
  }
  const deleted: { groupId: string; reason: SweepReason }[] = [];
  for (const [brokers, cube] of clusters) {
    try {
      const admin = await o.adminOf(cube);
      const orphans = orphanGroups(await listStreamcubeGroups(admin), world);
      const gone = new Set(
        await deleteGroups(
          admin,
          orphans.map((g) => g.groupId),
        ),
      );
      for (const g of orphans.filter((x) => gone.has(x.groupId))) {
        o.deleted(g.reason);
        o.logger.info('deleted a consumer group left behind', { ...g, brokers });
        deleted.push(g);
      }
    } catch (error) {
      o.logger.warn('cannot sweep the consumer groups of a cluster; the next sweep retries', {
        brokers,
        error: (error as Error).message,
      });
    }
  }
  return deleted;
}
