// A cube's Kafka consumer group on a receiver: one stable id per (namespace, cube, receiver); its
// committed offsets mirror every checkpoint's positions, released partitions leave it (the
// consumer restarts without them), and the cube's namespace survives a restart.
import { jest } from '@jest/globals';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { consumerGroupId } from '../../src/kafka/consumer-group.ts';
import { CubeChannel } from '../../src/receiver/cube-channel.ts';
import {
  FakePartitionConsumer,
  countsByCountry,
  fakeChannelOptions,
} from '../support/fake-partition-consumer.ts';

const T0 = Date.UTC(2026, 10, 30, 12, 0, 0);
const schema = countsByCountry('1m', '0s');

describe('consumerGroupId', () => {
  test.each([
    {
      name: 'plain names',
      args: ['team-a', 'orders', 'rs-a-0'],
      id: 'streamcube.team-a.orders.rs-a-0',
    },
    {
      name: 'a receiver id with dots stays after the third dot',
      args: ['a', 'b', 'rs.c.0'],
      id: 'streamcube.a.b.rs.c.0',
    },
  ])('$name', ({ args, id }) => {
    expect(consumerGroupId(args[0]!, args[1]!, args[2]!)).toBe(id);
  });

  test.each([
    { name: 'a namespace with a dot', args: ['a.b', 'orders', 'r'] },
    { name: 'a cube name with a dot (ids would be ambiguous)', args: ['a', 'b.c', 'r'] },
    { name: 'an empty receiver id', args: ['a', 'orders', ''] },
  ])('refuses $name', ({ args }) => {
    expect(() => consumerGroupId(args[0]!, args[1]!, args[2]!)).toThrow();
  });
});

describe('a channel and its group', () => {
  let dir: string;
  let channel: CubeChannel;
  let consumer: FakePartitionConsumer;

  const open = async (namespace?: string): Promise<void> => {
    channel = new CubeChannel(
      fakeChannelOptions(dir, schema, (c) => (consumer = c), namespace ? { namespace } : {}),
    );
    await channel.open();
  };

  beforeEach(() => {
    jest.useFakeTimers({ now: T0 });
    dir = mkdtempSync(join(tmpdir(), 'streamcube-group-'));
  });

  afterEach(async () => {
    await channel.close();
    jest.useRealTimers();
    rmSync(dir, { recursive: true, force: true });
  });

  test('the group is named by namespace, cube and receiver; `default` when the namespace is unknown', async () => {
    await open('team-a');
    expect(channel.consumerGroup).toBe('streamcube.team-a.orders.rs-a-0');
    await channel.close();
    await open();
    expect(channel.consumerGroup).toBe('streamcube.default.orders.rs-a-0');
  });

  test('the namespace is checkpointed, so a restarted receiver reuses the same group', async () => {
    await open('team-a');
    await channel.assign([{ partition: 0, position: '0', epoch: 1, watermark: null }]);
    await channel.close();
    expect(
      CubeChannel.readSpec(join(dir, 'data'), { namespace: 'team-a', name: 'orders' })?.namespace,
    ).toBe('team-a');
  });

  test('commits mirror each checkpoint: paused and stopped partitions included, released ones not', async () => {
    await open('team-a');
    await channel.assign(
      [0, 1, 2].map((partition) => ({ partition, position: '0', epoch: 1, watermark: null })),
    );
    consumer.deliver(0, 0, 5, T0);
    consumer.deliver(1, 0, 3, T0);
    await jest.advanceTimersByTimeAsync(0);
    await channel.pause([1]);
    expect(consumer.commits.at(-1)).toEqual({ 0: '5', 1: '3', 2: '0' });
    await channel.release([2]);
    expect(consumer.commits.at(-1)).toEqual({ 0: '5', 1: '3' });
  });

  test('a release restarts the consumer without the released partitions, paused ones paused again', async () => {
    await open('team-a');
    await channel.assign(
      [0, 1, 2].map((partition) => ({ partition, position: '0', epoch: 1, watermark: null })),
    );
    await channel.pause([1]);
    const starts = consumer.starts.length;
    await channel.release([2]);
    await jest.advanceTimersByTimeAsync(0);
    expect(consumer.starts.slice(starts)).toEqual([{ 0: '0', 1: '0' }]);
    expect([...consumer.paused]).toEqual([1]);
    // Released again: nothing changes, no restart.
    await channel.release([2]);
    await jest.advanceTimersByTimeAsync(0);
    expect(consumer.starts).toHaveLength(starts + 1);
  });

  test('deleting the group goes to the consumer', async () => {
    await open('team-a');
    await channel.close();
    await channel.deleteConsumerGroup();
    expect(consumer.groupDeletions).toBe(1);
  });
});
