// The leader's sweep of consumer groups left behind: which groups it deletes (empty, streamcube's,
// of a cube or a receiver that is gone, in a namespace it watches) and how it reads Kafka's
// answers to the deletion (a group a consumer joined meanwhile is not counted as deleted).
import type { Admin } from 'kafkajs';
import type { CubeAssignment } from '../../src/api/cube-assignment.ts';
import { consumerGroupId, consumerGroupOwner } from '../../src/kafka/consumer-group.ts';
import {
  type ListedGroup,
  deleteGroups,
  orphanGroups,
  sweepGroups,
} from '../../src/operator/group-sweep.ts';
import { createLogger } from '../../src/observability/logger.ts';

describe('consumerGroupOwner', () => {
  test.each([
    ['team-a', 'orders', 'rs-a-0'],
    ['a', 'b', 'rs.c.0'],
  ])('reads back what consumerGroupId wrote (%s, %s, %s)', (namespace, cube, receiver) => {
    expect(consumerGroupOwner(consumerGroupId(namespace, cube, receiver))).toEqual({
      namespace,
      cube,
      receiver,
    });
  });

  test.each(['billing.orders', 'streamcube.a.b', 'streamcube.A.b.c', 'streamcube..b.c', 'x.a.b.c'])(
    '%s is not a streamcube group',
    (groupId) => expect(consumerGroupOwner(groupId)).toBeUndefined(),
  );
});

describe('orphanGroups', () => {
  const world = {
    watches: (namespace: string) => namespace !== 'elsewhere',
    cubeExists: (namespace: string, cube: string) => namespace === 'ns' && cube === 'orders',
    receiverExists: (receiver: string) => receiver === 'rs-a-0',
  };
  test.each<[string, ListedGroup, string | undefined]>([
    ['live group', { groupId: 'streamcube.ns.orders.rs-a-0', state: 'Empty' }, undefined],
    ['cube gone', { groupId: 'streamcube.ns.gone.rs-a-0', state: 'Empty' }, 'CubeGone'],
    ['receiver gone', { groupId: 'streamcube.ns.orders.rs-a-9', state: 'Empty' }, 'ReceiverGone'],
    [
      'both gone: the cube is named',
      { groupId: 'streamcube.ns.gone.x', state: 'Empty' },
      'CubeGone',
    ],
    ['a member left', { groupId: 'streamcube.ns.gone.rs-a-0', state: 'Stable' }, undefined],
    ['rebalancing', { groupId: 'streamcube.ns.gone.x', state: 'PreparingRebalance' }, undefined],
    ['not streamcube', { groupId: 'billing.ns.gone.x', state: 'Empty' }, undefined],
    [
      'a namespace not watched',
      { groupId: 'streamcube.elsewhere.gone.x', state: 'Empty' },
      undefined,
    ],
  ])('%s', (_, group, reason) => {
    expect(orphanGroups([group], world)).toEqual(
      reason ? [{ groupId: group.groupId, reason }] : [],
    );
  });
});

function fakeAdmin(answer: {
  groups?: ListedGroup[];
  deleteError?: { groupId: string; errorCode: number }[];
}): Admin & { deleted: string[][] } {
  const deleted: string[][] = [];
  return {
    deleted,
    listGroups: () =>
      Promise.resolve({
        groups: (answer.groups ?? []).map((g) => ({
          groupId: g.groupId,
          protocolType: 'consumer',
        })),
      }),
    describeGroups: (ids: string[]) =>
      Promise.resolve({
        groups: (answer.groups ?? []).filter((g) => ids.includes(g.groupId)),
      }),
    deleteGroups: (ids: string[]) => {
      deleted.push(ids);
      if (answer.deleteError) {
        return Promise.reject(
          Object.assign(new Error('Error in DeleteGroups'), { groups: answer.deleteError }),
        );
      }
      return Promise.resolve(ids.map((groupId) => ({ groupId, errorCode: 0 })));
    },
  } as unknown as Admin & { deleted: string[][] };
}

describe('deleteGroups', () => {
  test('a group a consumer joined meanwhile (non-empty) or already gone is not counted', async () => {
    const admin = fakeAdmin({
      deleteError: [
        { groupId: 'b', errorCode: 68 },
        { groupId: 'c', errorCode: 69 },
      ],
    });
    expect(await deleteGroups(admin, ['a', 'b', 'c'])).toEqual(['a']);
  });

  test('any other refusal is thrown', async () => {
    const admin = fakeAdmin({ deleteError: [{ groupId: 'a', errorCode: 30 }] });
    await expect(deleteGroups(admin, ['a'])).rejects.toThrow('Error in DeleteGroups');
  });

  test('nothing to delete asks nothing', async () => {
    const admin = fakeAdmin({});
    expect(await deleteGroups(admin, [])).toEqual([]);
    expect(admin.deleted).toEqual([]);
  });
});

describe('sweepGroups', () => {
  const cube = (namespace: string, name: string, brokers: string[]): CubeAssignment =>
    ({
      metadata: { namespace, name },
      spec: { source: { brokers, topic: 't' } },
    }) as unknown as CubeAssignment;

  test('one pass per cluster; groups of namespaces it does not watch stay', async () => {
    const admin = fakeAdmin({
      groups: [
        { groupId: 'streamcube.ns.orders.rs-a-0', state: 'Empty' },
        { groupId: 'streamcube.ns.gone.rs-a-0', state: 'Empty' },
        { groupId: 'streamcube.other.gone.rs-a-0', state: 'Empty' },
        { groupId: 'streamcube.other.gone.rs-b-5', state: 'Empty' },
        { groupId: 'streamcube.ns.orders.rs-a-9', state: 'Empty' },
      ],
    });
    const adminCalls: string[] = [];
    const reasons: string[] = [];
    const deleted = await sweepGroups({
      // Two cubes on one cluster (brokers in another order): one listing.
      cubes: () => [
        cube('ns', 'orders', ['b:9092', 'a:9092']),
        cube('ns', 'x', ['a:9092', 'b:9092']),
      ],
      receivers: () => ['rs-a-0'],
      namespace: 'ns',
      adminOf: (c) => {
        adminCalls.push(c.metadata.name!);
        return Promise.resolve(admin);
      },
      deleted: (reason) => reasons.push(reason),
      logger: createLogger('test', 'error'),
    });
    expect(adminCalls).toEqual(['orders']);
    expect(deleted).toEqual([
      { groupId: 'streamcube.ns.gone.rs-a-0', reason: 'CubeGone' },
      { groupId: 'streamcube.ns.orders.rs-a-9', reason: 'ReceiverGone' },
    ]);
    expect(reasons).toEqual(['CubeGone', 'ReceiverGone']);
  });

  test('a cluster that cannot be reached is left for the next sweep, the others are swept', async () => {
    const admin = fakeAdmin({ groups: [{ groupId: 'streamcube.ns.gone.r', state: 'Empty' }] });
    const deleted = await sweepGroups({
      cubes: () => [cube('ns', 'a', ['down:9092']), cube('ns', 'b', ['up:9092'])],
      receivers: () => ['r'],
      namespace: undefined,
      adminOf: (c) =>
        c.metadata.name === 'a' ? Promise.reject(new Error('unreachable')) : Promise.resolve(admin),
      deleted: () => undefined,
      logger: createLogger('test', 'error'),
    });
    expect(deleted).toEqual([{ groupId: 'streamcube.ns.gone.r', reason: 'CubeGone' }]);
  });
});
