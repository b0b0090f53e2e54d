// The partition table of a cube: events applied all or none (a refusal names the partition and
// the cube and changes nothing), a new epoch a new state object and the same epoch the one held,
// the effects picked out of outcomes, the ranges read over, and a drain waiting for its stop.
import { jest } from '@jest/globals';
import { ChannelError } from '../../src/receiver/channel-error.ts';
import type { PartitionEvent } from '../../src/receiver/partition-state.ts';
import {
  PartitionTable,
  allStopped,
  changedAny,
  withEffect,
} from '../../src/receiver/partition-table.ts';

const NOW = 1_000;
const assign = (epoch: number, position: bigint): PartitionEvent => ({
  kind: 'assign',
  epoch,
  position,
});

/** A table holding partitions 0 and 1 at position 10 under epoch 1. */
function table(): PartitionTable {
  const t = new PartitionTable('orders');
  t.apply(
    [
      [0, assign(1, 10n)],
      [1, assign(1, 10n)],
    ],
    NOW,
  );
  return t;
}

/** What `f` threw. */
function thrownBy(f: () => unknown): unknown {
  try {
    f();
  } catch (error) {
    return error;
  }
  throw new Error('nothing thrown');
}

test('a refused event leaves every partition of the request as it was', () => {
  const t = table();
  const before = t.sorted().map((ps) => ({ ...ps }));
  const refusal = thrownBy(() =>
    t.apply(
      [
        [0, { kind: 'pause' }],
        [1, assign(0, 5n)],
      ],
      NOW,
    ),
  );
  expect(refusal).toBeInstanceOf(ChannelError);
  expect(refusal).toMatchObject({ reason: 'Conflict', field: 'partitions' });
  expect((refusal as Error).message).toMatch(/^partition 1 of cube orders has a stale epoch/);
  expect(t.sorted()).toEqual(before);
});

test('an event for a partition not held is refused as NotFound', () => {
  expect(thrownBy(() => table().apply([[7, { kind: 'resume' }]], NOW))).toMatchObject({
    reason: 'NotFound',
    field: 'partitions',
  });
});

test('the same epoch changes the state held in place; a newer one replaces it', () => {
  const t = table();
  const held = t.get(0)!;
  t.apply([[0, { kind: 'pause' }]], NOW);
  expect(t.get(0)).toBe(held);
  expect(held.state).toBe('paused');
  const [outcome] = t.apply([[0, assign(2, 20n)]], NOW);
  expect(outcome!.ps).toBe(t.get(0));
  expect(t.get(0)).not.toBe(held);
  expect(t.get(0)).toMatchObject({ epoch: 2, state: 'consuming', position: 20n });
  expect(held).toMatchObject({ epoch: 1, state: 'paused' });
});

test('outcomes tell which partitions an effect is for, and whether anything changed', () => {
  const t = table();
  const paused = t.apply([[0, { kind: 'pause' }]], NOW);
  expect(withEffect(paused, 'pauseConsumer').map((ps) => ps.partition)).toEqual([0]);
  expect(changedAny(paused)).toBe(true);
  const again = t.apply([[0, { kind: 'pause' }]], NOW);
  expect(withEffect(again, 'pauseConsumer')).toEqual([]);
  expect(changedAny(again)).toBe(false);
  const released = t.apply([[1, { kind: 'release', stopOffset: 5n }]], NOW);
  expect(released[0]!.effects).toEqual(['pauseConsumer', 'settlePending', 'fenceExcess']);
});

test('released partitions leave the positions, the assigned and the wanted ones', () => {
  const t = table();
  t.apply([[1, { kind: 'release' }]], NOW);
  expect([...t.positions()]).toEqual([[0, 10n]]);
  expect(t.assigned().map((ps) => ps.partition)).toEqual([0]);
  expect([t.wants(0), t.wants(1), t.wants(9)]).toEqual([true, false, false]);
  expect(t.hasAssigned()).toBe(true);
  t.apply([[0, { kind: 'release' }]], NOW);
  expect(t.hasAssigned()).toBe(false);
});

test('ranges committed elsewhere are read over from the position on; none clears them', () => {
  const t = table();
  t.readOver(0, [
    { from: 0n, to: 10n },
    { from: 12n, to: 20n },
  ]);
  expect(t.get(0)!.elsewhere).toEqual([{ from: 12n, to: 20n }]);
  expect([...t.elsewhere().keys()]).toEqual([0]);
  t.readOver(0, []);
  expect(t.get(0)!.elsewhere).toBeUndefined();
  expect(t.elsewhere().size).toBe(0);
});

describe('a drain waiting for its partitions to stop', () => {
  beforeEach(() => jest.useFakeTimers({ now: NOW }));
  afterEach(() => jest.useRealTimers());

  test('looks again when a partition drained, and ends at its deadline', async () => {
    const t = table();
    const [outcome] = t.apply([[0, { kind: 'drain', stopOffset: 15n }]], NOW);
    const draining = [outcome!.ps];
    let ended = false;
    void t.untilStopped(draining, NOW + 10_000).then(() => (ended = true));
    await jest.advanceTimersByTimeAsync(1_000);
    expect(ended).toBe(false);
    t.get(0)!.position = 15n;
    t.apply([[0, { kind: 'progress' }]], Date.now());
    t.drained();
    await jest.advanceTimersByTimeAsync(1); // the next look every 250 ms is not due yet
    expect(ended).toBe(true);
    expect(allStopped(draining)).toBe(true);

    const [other] = t.apply([[1, { kind: 'drain', stopOffset: 15n }]], Date.now());
    const waiting = t.untilStopped([other!.ps], Date.now() + 600);
    await jest.advanceTimersByTimeAsync(600);
    await waiting;
    expect(allStopped([other!.ps])).toBe(false);
  });
});
