// The CubeChannel coordinator against a fake PartitionConsumer and fake time: admin requests turn
// into partition transitions and consumer calls, refusals carry a reason, a drain ends at its stop
// offset, checkpoints rewrite only what changed, and handed-off segments leave memory and the
// checkpoint after their retention without reopening their window.
import { jest } from '@jest/globals';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ChannelError } from '../../src/receiver/channel-error.ts';
import { CubeChannel } from '../../src/receiver/cube-channel.ts';
import { readCubeCheckpoint } from '../../src/receiver/cube-store.ts';
import {
  FakePartitionConsumer,
  countsByCountry,
  fakeChannelOptions,
} from '../support/fake-partition-consumer.ts';

const SECOND = 1_000;
const MINUTE = 60 * SECOND;
const T0 = Date.UTC(2026, 10, 30, 12, 0, 0);
const schema = countsByCountry('1m', '0s');
const retentionMs = 10 * MINUTE;

let dir: string;
let channel: CubeChannel;
let consumer: FakePartitionConsumer;

function openChannel(): Promise<void> {
  channel = new CubeChannel(
    fakeChannelOptions(dir, schema, (c) => (consumer = c), { handedOffRetentionMs: retentionMs }),
  );
  return channel.open();
}

beforeEach(async () => {
  jest.useFakeTimers({ now: T0 });
  dir = mkdtempSync(join(tmpdir(), 'streamcube-channel-'));
  await openChannel();
  await channel.assign(
    [0, 1].map((partition) => ({ partition, position: '0', epoch: 1, watermark: null })),
  );
});

afterEach(async () => {
  await channel.close();
  jest.useRealTimers();
  rmSync(dir, { recursive: true, force: true });
});

const checkpoint = () => readCubeCheckpoint(join(dir, 'data', 'cubes', 'default', 'orders'))!;
const records = () =>
  readdirSync(join(dir, 'data', 'cubes', 'default', 'orders', 'segments')).sort();
const refusal = async (f: () => unknown): Promise<{ reason: string; field?: string }> => {
  try {
    await f();
  } catch (error) {
    if (error instanceof ChannelError) return { reason: error.reason, field: error.field };
    throw error;
  }
  throw new Error('not refused');
};

describe('admin requests', () => {
  test('the same assign twice starts the consumer once; an older epoch is a Conflict', async () => {
    // One start at open (nothing assigned yet), one for the assign.
    expect(consumer.starts).toEqual([{}, { 0: '0', 1: '0' }]);
    await channel.assign([{ partition: 0, position: '0', epoch: 1, watermark: null }]);
    expect(consumer.starts).toHaveLength(2);
    await expect(
      channel.assign([{ partition: 0, position: '5', epoch: 0, watermark: null }]),
    ).rejects.toMatchObject({ reason: 'Conflict', field: 'partitions' });
  });

  test('a newer epoch starts the partition afresh from the given position, watermark carried', async () => {
    await channel.assign([{ partition: 1, position: '40', epoch: 2, watermark: T0 + MINUTE }]);
    expect(consumer.starts.at(-1)).toEqual({ 0: '0', 1: '40' });
    const p1 = channel.status().partitions.find((p) => p.partition === 1)!;
    expect(p1).toMatchObject({
      epoch: 2,
      position: '40',
      state: 'consuming',
      watermark: T0 + MINUTE,
    });
  });

  test("a failover's new owner reads over the offsets a fenced set committed: in no segment, reported as elsewhere, kept across a restart", async () => {
    await channel.assign([
      {
        partition: 1,
        position: '10',
        epoch: 2,
        watermark: null,
        committedElsewhere: [
          ['12', '15'],
          ['18', '19'],
        ],
      },
    ]);
    consumer.deliver(1, 10, 10, T0);
    const counted = channel.query({ filters: {}, groupBy: [] }).rows[0]?.[0];
    expect(counted).toBe(6);
    const status = channel.status();
    expect(status.partitions.find((p) => p.partition === 1)?.position).toBe('20');
    expect(status.coverage?.['1']).toEqual({
      kept: [
        ['10', '12'],
        ['15', '18'],
        ['19', '20'],
      ],
      handedOff: [],
      elsewhere: [
        ['12', '15'],
        ['18', '19'],
      ],
    });
    await channel.close();
    await openChannel();
    expect(channel.status().coverage?.['1']?.elsewhere).toEqual([
      ['12', '15'],
      ['18', '19'],
    ]);
  });

  test('pause is durable before it answers, and pauses the consumer', async () => {
    consumer.deliver(0, 0, 3, T0);
    const [p0] = await channel.pause([0]);
    expect(p0).toMatchObject({ state: 'paused', position: '3' });
    expect(consumer.paused).toEqual(new Set([0]));
    expect(checkpoint().partitions.find((p) => p.partition === 0)).toMatchObject({
      state: 'paused',
      position: '3',
    });
  });

  test('refusals carry a reason and the field, not a status code', async () => {
    expect(await refusal(() => channel.pause([7]))).toEqual({
      reason: 'NotFound',
      field: 'partitions',
    });
    await channel.release([1]);
    expect(await refusal(() => channel.resume([1]))).toEqual({
      reason: 'Conflict',
      field: 'partitions',
    });
    expect(await refusal(() => channel.query({ filters: {}, groupBy: ['city'] }))).toEqual({
      reason: 'Invalid',
      field: 'groupBy.0',
    });
  });

  test('a drain resumes a paused partition from its position and stops it at the stop offset', async () => {
    await channel.pause([0]);
    const drained = channel.drain({ 0: '5' }, 10 * SECOND);
    expect(consumer.resumes).toEqual([{ 0: '0' }]);
    consumer.deliver(0, 0, 8, T0);
    const answer = await drained;
    expect(answer.done).toBe(true);
    expect(answer.partitions[0]).toMatchObject({
      state: 'stopped',
      position: '5',
      stopOffset: '5',
    });
    expect(consumer.paused.has(0)).toBe(true);
  });

  test('a release short of its stop offset is refused; at it, released; past it, the segments holding the excess are fenced', async () => {
    // Partition 0 ran to 8 in the first window, partition 1 to 4 in the first and 2 in the next.
    consumer.deliver(0, 0, 8, T0);
    consumer.deliver(1, 0, 4, T0);
    consumer.deliver(1, 4, 2, T0 + MINUTE);
    await jest.advanceTimersByTimeAsync(0);
    expect(await refusal(() => channel.release([0], { 0: '9' }))).toEqual({
      reason: 'Conflict',
      field: 'stopOffsets.0',
    });
    expect((await channel.release([1], { 1: '6' }))[0]).toMatchObject({
      state: 'released',
      position: '6',
      stopOffset: '6',
    });
    expect(channel.segments.segments.size).toBe(2);
    // Its next owner starts partition 0 at 5: the window holding 5..7 is dropped, never handed off.
    expect((await channel.release([0], { 0: '5' }))[0]).toMatchObject({
      state: 'released',
      position: '8',
      stopOffset: '5',
    });
    expect([...channel.segments.segments.keys()]).toEqual([T0 + MINUTE]);
    expect(checkpoint().segments.map((s) => s.windowStart)).toEqual([T0 + MINUTE]);
    // Released already: the same release again changes nothing.
    expect((await channel.release([0], { 0: '5' }))[0]).toMatchObject({ state: 'released' });
  });
});

describe('checkpoints and retention', () => {
  /** Events in windows 0..n-1 on both partitions, then window n to push the watermarks past them. */
  function fillWindows(n: number): void {
    for (let w = 0; w <= n; w++) {
      consumer.produce(0, T0 + w * MINUTE);
      consumer.produce(1, T0 + w * MINUTE);
    }
  }

  /**
   * Lets the ticks fake time ran end (their file I/O is real, not faked): their flushes, the
   * hand-off passes after them and the flushes that record those.
   */
  const settle = (): Promise<void> => channel.whenIdle();

  test('a flush rewrites the records of changed segments only', async () => {
    fillWindows(3);
    await jest.advanceTimersByTimeAsync(2 * SECOND); // sealed, handed off, flushed
    await settle();
    const before = records();
    expect(before).toHaveLength(4);
    consumer.produce(0, T0 + 3 * MINUTE + SECOND); // the open window only
    await jest.advanceTimersByTimeAsync(SECOND);
    await settle();
    const after = records();
    expect(after.filter((r) => before.includes(r))).toHaveLength(3);
    expect(after.filter((r) => !before.includes(r))).toEqual([
      expect.stringMatching(new RegExp(`-${T0 + 3 * MINUTE}\\.json$`)),
    ]);
  });

  test('handed-off segments leave memory and the checkpoint after the retention', async () => {
    fillWindows(3);
    await jest.advanceTimersByTimeAsync(2 * SECOND);
    await settle();
    expect(channel.status().segmentCounts).toEqual({ ACTIVE: 1, IMMUTABLE: 0, HANDED_OFF: 3 });
    await jest.advanceTimersByTimeAsync(retentionMs);
    await settle();
    expect(channel.status().segmentCounts).toEqual({ ACTIVE: 1, IMMUTABLE: 0, HANDED_OFF: 0 });
    expect(checkpoint().segments.map((s) => s.windowStart)).toEqual([T0 + 3 * MINUTE]);
    expect(records()).toHaveLength(1);

    // An event is judged by its partition's clock alone, also after a restart: a partition new
    // here (no watermark, so not too late) with an event of a purged window opens it again, as
    // its previous replica set, where that window was open, would have taken it.
    await channel.close();
    await openChannel();
    await channel.assign([{ partition: 2, position: '0', epoch: 1, watermark: null }]);
    consumer.deliver(2, 0, 1, T0 + 30 * SECOND);
    expect(channel.status().rejected).toEqual({});
    expect(channel.status().segments.map((s) => s.windowStart)).toEqual([T0, T0 + 3 * MINUTE]);
  });

  test('an event for a window sealed here opens its next generation, which survives a restart', async () => {
    fillWindows(1);
    await jest.advanceTimersByTimeAsync(2 * SECOND);
    await settle();
    expect(channel.status().segments.map((s) => [s.windowStart, s.state])).toEqual([
      [T0, 'HANDED_OFF'],
      [T0 + MINUTE, 'ACTIVE'],
    ]);
    // Partition 2 comes from a replica set where window T0 was still open.
    await channel.assign([{ partition: 2, position: '7', epoch: 2, watermark: T0 + 20 * SECOND }]);
    consumer.deliver(2, 7, 2, T0 + 30 * SECOND);
    await jest.advanceTimersByTimeAsync(SECOND);
    await settle();
    const second = { windowStart: T0, generation: 1, state: 'ACTIVE' };
    expect(channel.status().rejected).toEqual({});
    expect(channel.status().segments[1]).toMatchObject({
      ...second,
      offsetRanges: { 2: [['7', '9']] },
    });
    await channel.close();
    await openChannel();
    expect(channel.status().segments[1]).toMatchObject({ ...second, rowCount: 1 });
    // Live: window T0 + 1 min's two events and the second generation's two (rows read back).
    expect(channel.query({ groupBy: [], filters: {} }).rows).toEqual([[4]]);
  });

  test("a release seals the segments holding the released partition: handed off and committed at once, while the kept partition's later events of the window open its next generation", async () => {
    consumer.produce(0, T0 + 10 * SECOND);
    consumer.produce(1, T0 + 10 * SECOND);
    consumer.produce(1, T0 + 20 * SECOND);
    await jest.advanceTimersByTimeAsync(0);
    await channel.release([1], { 1: '2' });
    // Partition 0 is well inside window T0, which seals for partition 1's sake.
    expect(
      channel.status().segments.map((s) => [s.windowStart, s.generation ?? 0, s.state]),
    ).toEqual([[T0, 0, 'IMMUTABLE']]);
    await jest.advanceTimersByTimeAsync(2 * SECOND);
    await settle();
    expect(channel.status().segments[0]!.state).toBe('HANDED_OFF');
    // Committed: what the set keeps of partition 1 is all handed off, so the operator's
    // releasedUncommitted leaves it.
    expect(channel.status().coverage?.['1']).toEqual({
      kept: [['0', '2']],
      handedOff: [['0', '2']],
    });

    consumer.produce(0, T0 + 30 * SECOND);
    await jest.advanceTimersByTimeAsync(0);
    expect(channel.status().rejected).toEqual({});
    expect(channel.status().segments.slice(1)).toEqual([
      expect.objectContaining({
        windowStart: T0,
        generation: 1,
        state: 'ACTIVE',
        offsetRanges: { 0: [['1', '2']] },
      }),
    ]);
    // Live: the open generation's event (the three handed off are in deep storage).
    expect(channel.query({ groupBy: [], filters: {} }).rows).toEqual([[1]]);
  });

  test('a checkpoint of an unknown version is refused by name', async () => {
    await channel.close();
    const { writeFileSync } = await import('node:fs');
    writeFileSync(
      join(dir, 'data', 'cubes', 'default', 'orders', 'checkpoint.json'),
      '{"version":9}',
    );
    expect(() => checkpoint()).toThrow(
      /checkpoint version 9; this receiver reads versions 1, 2, 3/,
    );
    await expect(openChannel()).rejects.toThrow(/version 9/);
  });
});
