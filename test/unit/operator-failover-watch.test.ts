// The failover watch: which replica sets of a cube are unavailable (no ready receiver pod), since
// when, and which are lost (past spec.failoverAfter) or blocked from failing over by released data
// not committed yet; and what it keeps per set of a cube across reconciles. Fake pods, fake clock.
import type { V1Pod } from '@kubernetes/client-node';
import type { CubeAssignmentStatus } from '../../src/api/cube-assignment.ts';
import { replicaSetLabel } from '../../src/operator/discovery.ts';
import { FailoverWatch } from '../../src/operator/cube/failover-watch.ts';
import { ordersCube } from '../support/cube-assignments.ts';

const t0 = Date.parse('2026-12-04T10:00:00.000Z');
const minute = 60_000;
const cube = { namespace: 'shop', name: 'orders' };

/** A clock the test moves by hand. */
function fakeClock(start = t0) {
  let now = start;
  return { now: () => now, advance: (ms: number) => (now += ms) };
}

/** A receiver pod of `rs`; not Ready since `notReadySince` when given. */
function pod(name: string, rs: string, notReadySince?: number): V1Pod {
  return {
    metadata: { name, namespace: 'shop', labels: { [replicaSetLabel]: rs } },
    status: {
      podIP: '10.0.0.1',
      conditions: [
        notReadySince === undefined
          ? { type: 'Ready', status: 'True' }
          : { type: 'Ready', status: 'False', lastTransitionTime: new Date(notReadySince) },
      ],
    },
  };
}

/** orders, served by rs-a and rs-b, rs-a owning 0 and 1 and rs-b owning 2 and 3. */
function cubeWith(status: Partial<CubeAssignmentStatus> = {}, failoverAfter = '5m') {
  const object = ordersCube(['rs-a', 'rs-b'], {
    assignment: { 'rs-a': [0, 1], 'rs-b': [2, 3] },
    ...status,
  });
  object.spec.failoverAfter = failoverAfter;
  return object;
}

const onlyA = new Set(['rs-a']);
const nothingUnavailable = {
  lost: new Set(),
  failoverAt: new Map(),
  failoverBlocked: new Map(),
  since: new Map(),
};

test('every set available: nothing unavailable', () => {
  const watch = new FailoverWatch(fakeClock().now);
  const sets = watch.unavailableSets(cubeWith(), new Set(['rs-a', 'rs-b']), []);
  expect(sets).toEqual(nothingUnavailable);
});

test('a set holding partitions unavailable: fails over spec.failoverAfter after it was first seen so, then lost', () => {
  const clock = fakeClock();
  const watch = new FailoverWatch(clock.now);
  const pods = [pod('rs-a-0', 'rs-a'), pod('rs-b-0', 'rs-b', t0 - 10 * minute)];
  const first = watch.unavailableSets(cubeWith(), onlyA, pods);
  expect(first.since).toEqual(new Map([['rs-b', t0]]));
  expect(first.failoverAt).toEqual(new Map([['rs-b', t0 + 5 * minute]]));
  expect(first.lost).toEqual(new Set());

  clock.advance(5 * minute - 1);
  expect(watch.unavailableSets(cubeWith(), onlyA, pods).lost).toEqual(new Set());
  clock.advance(1);
  const later = watch.unavailableSets(cubeWith(), onlyA, pods);
  expect(later.lost).toEqual(new Set(['rs-b']));
  expect(later.failoverAt).toEqual(new Map());
  expect(later.since).toEqual(new Map([['rs-b', t0]]));
});

test('a leader that took over counts from status.unavailableSince, not from when it first looked', () => {
  const clock = fakeClock();
  const watch = new FailoverWatch(clock.now);
  const recorded = new Date(t0 - 4 * minute).toISOString();
  const object = cubeWith({ unavailableSince: { 'rs-b': recorded } });
  const sets = watch.unavailableSets(object, onlyA, [pod('rs-b-0', 'rs-b', t0 - 10 * minute)]);
  expect(sets.failoverAt).toEqual(new Map([['rs-b', t0 + minute]]));
  clock.advance(minute);
  expect(watch.unavailableSets(object, onlyA, []).lost).toEqual(new Set(['rs-b']));
});

test('a recorded time older than the last time a pod stopped being Ready is not used', () => {
  const watch = new FailoverWatch(fakeClock().now);
  const object = cubeWith({
    unavailableSince: { 'rs-b': new Date(t0 - 60 * minute).toISOString() },
  });
  // The set came back and left again unseen: its pod stopped being Ready 2 minutes ago.
  const sets = watch.unavailableSets(object, onlyA, [pod('rs-b-0', 'rs-b', t0 - 2 * minute)]);
  expect(sets.since).toEqual(new Map([['rs-b', t0 - 2 * minute]]));
  expect(sets.lost).toEqual(new Set());
});

test('a set back and gone again counts from when it left the second time', () => {
  const clock = fakeClock();
  const watch = new FailoverWatch(clock.now);
  watch.unavailableSets(cubeWith(), onlyA, []);
  clock.advance(4 * minute);
  watch.unavailableSets(cubeWith(), new Set(['rs-a', 'rs-b']), []);
  clock.advance(2 * minute);
  const sets = watch.unavailableSets(cubeWith(), onlyA, []);
  expect(sets.since).toEqual(new Map([['rs-b', t0 + 6 * minute]]));
  expect(sets.lost).toEqual(new Set());
});

test('a set owning no partition is not failed over, whatever how long it is unavailable', () => {
  const clock = fakeClock();
  const watch = new FailoverWatch(clock.now);
  const object = cubeWith({ assignment: { 'rs-a': [0, 1, 2, 3], 'rs-b': [] } });
  watch.unavailableSets(object, onlyA, []);
  clock.advance(60 * minute);
  expect(watch.unavailableSets(object, onlyA, [])).toEqual(nothingUnavailable);
});

test('released data not committed blocks the failover: as observed, else as status says', () => {
  const clock = fakeClock();
  const watch = new FailoverWatch(clock.now);
  const object = cubeWith({ releasedUncommitted: { 'rs-b': [5] } });
  watch.unavailableSets(object, onlyA, []);
  clock.advance(5 * minute);
  // A leader that never saw the set: status stands for it.
  expect(watch.unavailableSets(object, onlyA, []).failoverBlocked).toEqual(
    new Map([['rs-b', [5]]]),
  );
  // Observed: what the replicas reported replaces status.
  watch.observedReleasedUncommitted(cube, 'rs-b', [6, 7]);
  expect(watch.releasedUncommittedOf(cube, 'rs-b')).toEqual([6, 7]);
  expect(watch.unavailableSets(object, onlyA, []).failoverBlocked).toEqual(
    new Map([['rs-b', [6, 7]]]),
  );
  // All committed: lost.
  watch.observedReleasedUncommitted(cube, 'rs-b', []);
  const sets = watch.unavailableSets(object, onlyA, []);
  expect(sets.failoverBlocked).toEqual(new Map());
  expect(sets.lost).toEqual(new Set(['rs-b']));
  // A completion wrote status: it stands for the set again.
  watch.releasedUncommittedWritten(cube, 'rs-b');
  expect(watch.releasedUncommittedOf(cube, 'rs-b')).toBeUndefined();
  expect(watch.unavailableSets(object, onlyA, []).failoverBlocked).toEqual(
    new Map([['rs-b', [5]]]),
  );
});

test('failed-over sets are kept per cube until back, and forgotten with their cube', () => {
  const watch = new FailoverWatch(fakeClock().now);
  const other = { namespace: 'shop', name: 'payments' };
  watch.failedOverSet(cube, 'rs-b');
  watch.failedOverSet(other, 'rs-b');
  watch.observedReleasedUncommitted(cube, 'rs-a', [1]);
  expect(watch.isFailedOver(cube, 'rs-b')).toBe(true);
  expect(watch.isFailedOver(cube, 'rs-a')).toBe(false);
  watch.setBack(cube, 'rs-b');
  expect(watch.isFailedOver(cube, 'rs-b')).toBe(false);
  expect(watch.isFailedOver(other, 'rs-b')).toBe(true);
  watch.failedOverSet(cube, 'rs-b');
  watch.forget(cube);
  expect(watch.isFailedOver(cube, 'rs-b')).toBe(false);
  expect(watch.releasedUncommittedOf(cube, 'rs-a')).toBeUndefined();
  expect(watch.isFailedOver(other, 'rs-b')).toBe(true);
});

test('since when a set is unavailable is shared by the cubes of its namespace', () => {
  const clock = fakeClock();
  const watch = new FailoverWatch(clock.now);
  watch.unavailableSets(cubeWith(), onlyA, []);
  clock.advance(5 * minute);
  const payments = cubeWith();
  payments.metadata.name = 'payments';
  expect(watch.unavailableSets(payments, onlyA, []).lost).toEqual(new Set(['rs-b']));
});
