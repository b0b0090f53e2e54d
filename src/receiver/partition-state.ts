// The state machine of one partition of a cube on a receiver: which admin request or consumer
// event moves it where, under which epoch, and what the consumer must do about it. Pure: the
// channel applies the outcome and carries out the effects.
import type { PartitionStateName, ReportedPartitionState } from '../protocol/admin-api.ts';
import type { OffsetRange } from './offset-ranges.ts';

export interface PartitionState {
  partition: number;
  epoch: number;
  state: PartitionStateName;
  position: bigint;
  stopOffset: bigint | null;
  highWatermark: bigint | null;
  /**
   * Wall-clock time of the last record the partition received (a data record, or records the
   * client filtered out such as transaction markers), or of when it last became live: the start
   * of its silence, for idle sealing.
   */
  lastRecordAt: number;
  /**
   * Wall-clock time records last moved the position (absent until they have); kept in memory
   * only. With `firstConsumedAt`, what a hand-off's gap is measured from: a source's last event
   * and a target's first.
   */
  consumedAt?: number;
  /** Wall-clock time records first moved the position under this epoch. */
  firstConsumedAt?: number;
  /**
   * Bumped when a partition that was not live is sent back to `position` (resume, drain): a batch
   * delivered before then may have been dropped while it was paused, so later ones must not apply.
   * A restart keeps it: those batches follow on from each other, and a new epoch is a new state.
   */
  generation: number;
  /**
   * Offset ranges at or past the start that a fenced replica set committed (a failover's new
   * owner): read over, in no segment here. Sorted, disjoint; absent or empty: none.
   */
  elsewhere?: OffsetRange[];
}

export type PartitionEvent =
  /** Take the partition from `position` under `epoch` (the operator's assign). */
  | { kind: 'assign'; epoch: number; position: bigint }
  | { kind: 'pause' }
  | { kind: 'resume' }
  /** Consume up to (not including) `stopOffset` and stop there. */
  | { kind: 'drain'; stopOffset: bigint }
  /** The position moved (records applied) or the high watermark was refreshed. */
  | { kind: 'progress' }
  /**
   * Stop consuming for good (until assigned again). With `stopOffset`, the offset the partition's
   * next owner starts from: one short of it is refused (drain first), one past it is released
   * with its offsets from `stopOffset` on to be fenced (`fenceFrom`).
   */
  | { kind: 'release'; stopOffset?: bigint }
  /** The cube is sealed: every partition's pending offsets go to a segment. */
  | { kind: 'seal' };

export type PartitionEventKind = PartitionEvent['kind'];

export type PartitionEffect =
  /** Stop fetching the partition. */
  | 'pauseConsumer'
  /** Fetch the partition again from its position. */
  | 'resumeConsumer'
  /** The partitions consumed changed: start the consumer anew from the positions held. */
  | 'restartConsumer'
  /** Give the partition's pending offsets (consumed before any event had a segment) to a segment. */
  | 'settlePending'
  /**
   * The partition ran past the offset its next owner starts from, under an epoch that is over:
   * what it holds from `stopOffset` on must never be handed off.
   */
  | 'fenceExcess';

export type Transition =
  /** `next` is `current` itself when nothing changes (the same request twice). */
  | { ok: true; next: PartitionState; effects: PartitionEffect[] }
  | { ok: false; reason: 'NotFound' | 'Conflict'; message: string; field: string };

export const isLive = (s: PartitionStateName): boolean => s === 'consuming' || s === 'draining';

const unchanged = (current: PartitionState): Transition => ({
  ok: true,
  next: current,
  effects: [],
});

const refused = (reason: 'NotFound' | 'Conflict', message: string, field: string): Transition => ({
  ok: false,
  reason,
  message,
  field,
});

/**
 * The epoch rule: an assign under an older epoch than the one held is refused, the same epoch
 * changes nothing (the request repeated), a newer one starts the partition afresh from the given
 * position whatever its state — the move that bumped the epoch superseded everything before.
 */
function assign(
  current: PartitionState | undefined,
  partition: number,
  event: { epoch: number; position: bigint },
  now: number,
): Transition {
  if (current && event.epoch < current.epoch) {
    return refused(
      'Conflict',
      `has a stale epoch: request has ${event.epoch}, receiver holds ${current.epoch}`,
      'partitions',
    );
  }
  if (current && event.epoch === current.epoch) return unchanged(current);
  return {
    ok: true,
    next: {
      partition,
      epoch: event.epoch,
      state: 'consuming',
      position: event.position,
      stopOffset: null,
      highWatermark: null,
      lastRecordAt: now,
      generation: 0,
    },
    effects: ['restartConsumer'],
  };
}

function drain(current: PartitionState, stop: bigint, now: number): Transition {
  const field = `stopOffsets.${current.partition}`;
  if (current.state === 'released') return refused('Conflict', 'was released', 'stopOffsets');
  if (current.position > stop)
    return refused('Conflict', `is at ${current.position}, past the stop offset ${stop}`, field);
  // A stop offset raised (a replica that missed the pause ran further): drain on to the new one.
  if (current.state === 'stopped' && current.stopOffset !== null && current.stopOffset > stop)
    return refused('Conflict', `already stopped at ${current.stopOffset}`, field);
  if (current.position >= stop) {
    // Already there: done at once, no waiting for traffic that may never come.
    const effects: PartitionEffect[] = current.state === 'stopped' ? [] : ['pauseConsumer'];
    return { ok: true, next: { ...current, state: 'stopped', stopOffset: stop }, effects };
  }
  if (current.state === 'draining') {
    return { ok: true, next: { ...current, stopOffset: stop }, effects: [] };
  }
  if (isLive(current.state)) {
    return { ok: true, next: { ...current, state: 'draining', stopOffset: stop }, effects: [] };
  }
  return {
    ok: true,
    next: {
      ...current,
      state: 'draining',
      stopOffset: stop,
      lastRecordAt: now,
      generation: current.generation + 1,
    },
    effects: ['resumeConsumer'],
  };
}

/**
 * A release at a stop offset hands the partition over at exactly that offset: a partition short of
 * it has offsets its set still owes (drain it first); one past it keeps its position and has the
 * excess fenced. Released already: nothing changes, whatever the stop offset.
 */
function release(current: PartitionState, stop: bigint | undefined): Transition {
  if (current.state === 'released') return unchanged(current);
  if (stop !== undefined && current.position < stop)
    return refused(
      'Conflict',
      `is at ${current.position}, short of the stop offset ${stop}: drain it first`,
      `stopOffsets.${current.partition}`,
    );
  const past = stop !== undefined && current.position > stop;
  return {
    ok: true,
    next: { ...current, state: 'released', ...(stop === undefined ? {} : { stopOffset: stop }) },
    effects: past
      ? ['pauseConsumer', 'settlePending', 'fenceExcess']
      : ['pauseConsumer', 'settlePending'],
  };
}

/**
 * The outcome of `event` for a partition in state `current` (undefined: not held here). `now` is
 * wall-clock time: a partition that becomes live starts its silence then.
 */
export function transition(
  current: PartitionState | undefined,
  partition: number,
  event: PartitionEvent,
  now: number,
): Transition {
  if (event.kind === 'assign') return assign(current, partition, event, now);
  if (!current) return refused('NotFound', 'is not assigned to this receiver', 'partitions');
  switch (event.kind) {
    case 'pause':
      return isLive(current.state)
        ? { ok: true, next: { ...current, state: 'paused' }, effects: ['pauseConsumer'] }
        : unchanged(current);
    case 'resume':
      if (current.state === 'released')
        return refused('Conflict', 'was released; assign it again', 'partitions');
      if (current.state !== 'paused' && current.state !== 'stopped') return unchanged(current);
      return {
        ok: true,
        next: {
          ...current,
          state: 'consuming',
          stopOffset: null,
          lastRecordAt: now, // its silence starts now, not while it was paused
          generation: current.generation + 1,
        },
        effects: ['resumeConsumer'],
      };
    case 'drain':
      return drain(current, event.stopOffset, now);
    case 'progress':
      return current.state === 'draining' &&
        current.stopOffset !== null &&
        current.position >= current.stopOffset
        ? { ok: true, next: { ...current, state: 'stopped' }, effects: ['pauseConsumer'] }
        : unchanged(current);
    case 'release':
      return release(current, event.stopOffset);
    case 'seal':
      return { ok: true, next: current, effects: ['settlePending'] };
  }
}

/**
 * The state a partition reports: while the cube's consumer is down, one meant to be read says
 * `failed` and names the state it returns to; its own state is kept for when the consumer is back.
 */
export function reportedState(
  state: PartitionStateName,
  consumerDown: boolean,
): { state: ReportedPartitionState; intendedState?: 'consuming' | 'draining' } {
  return consumerDown && (state === 'consuming' || state === 'draining')
    ? { state: 'failed', intendedState: state }
    : { state };
}

/**
 * DESIGN §6, "idle means silent": a consuming partition is idle — counts as past every window —
 * once it has received no record for the idle timeout and has nothing left to read (position at
 * the high watermark). Being caught up alone never makes it idle: under a steady trickle a live
 * consumer is caught up nearly all the time, and sealing then would reject the events of the
 * window it is writing to. A paused, draining or stopped partition is never idle: it is only
 * waiting, and its data is still to come. With no high watermark known (broker unreachable),
 * nothing is idle: sealing waits rather than guess.
 */
export function isIdle(ps: PartitionState, now: number, idleTimeoutMs: number): boolean {
  return (
    ps.state === 'consuming' &&
    ps.highWatermark !== null &&
    ps.position >= ps.highWatermark &&
    now - ps.lastRecordAt >= idleTimeoutMs
  );
}

/** highWatermark − position, 0 when caught up; null with no high watermark known. */
export function lagOf(ps: Pick<PartitionState, 'position' | 'highWatermark'>): bigint | null {
  const hw = ps.highWatermark;
  return hw === null ? null : hw > ps.position ? hw - ps.position : 0n;
}
