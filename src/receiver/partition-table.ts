// The partitions of one cube on this receiver, by partition number: their states, changed by
// events applied all or none (partition-state.ts decides each transition), and drains waiting.
import { ChannelError } from './channel-error.ts';
import type { OffsetRange } from './offset-ranges.ts';
import {
  type PartitionEffect,
  type PartitionEvent,
  type PartitionState,
  isLive,
  transition,
} from './partition-state.ts';

/** A partition's state after an event, and what the event asked of the consumer and segments. */
export interface Outcome {
  ps: PartitionState;
  effects: PartitionEffect[];
}

/** The partitions of `outcomes` whose event asked for `effect`. */
export function withEffect(
  outcomes: readonly Outcome[],
  effect: PartitionEffect,
): PartitionState[] {
  return outcomes.filter((o) => o.effects.includes(effect)).map((o) => o.ps);
}

/** Whether any outcome changed something: durable before answering, then. */
export function changedAny(outcomes: readonly Outcome[]): boolean {
  return outcomes.some((o) => o.effects.length > 0);
}

/** Whether every one of `states` is stopped: the drain that asked for it is done. */
export function allStopped(states: readonly PartitionState[]): boolean {
  return states.every((ps) => ps.state === 'stopped');
}

/** A drain looks at its partitions at least this often, whatever wakes it. */
const drainRecheckMs = 250;

export class PartitionTable {
  private readonly cube: string;
  private readonly byNumber = new Map<number, PartitionState>();
  private drainWaiters: (() => void)[] = [];

  constructor(cube: string) {
    this.cube = cube;
  }

  /** The states by partition, for the ingest pipeline, which advances positions in place. */
  get view(): ReadonlyMap<number, PartitionState> {
    return this.byNumber;
  }

  get(partition: number): PartitionState | undefined {
    return this.byNumber.get(partition);
  }

  values(): IterableIterator<PartitionState> {
    return this.byNumber.values();
  }

  numbers(): number[] {
    return [...this.byNumber.keys()];
  }

  /** In partition order, as the status lists them. */
  sorted(): PartitionState[] {
    return [...this.byNumber.values()].sort((a, b) => a.partition - b.partition);
  }

  /** A partition as a checkpoint holds it. */
  restore(ps: PartitionState): void {
    this.byNumber.set(ps.partition, ps);
  }

  /** The partitions not released: consumed, paused, draining or stopped here. */
  assigned(): PartitionState[] {
    return [...this.byNumber.values()].filter((p) => p.state !== 'released');
  }

  hasAssigned(): boolean {
    return [...this.byNumber.values()].some((p) => p.state !== 'released');
  }

  /** Whether the consumer should deliver records of `partition` now. */
  wants(partition: number): boolean {
    return isLive(this.byNumber.get(partition)?.state ?? 'released');
  }

  /** The positions of the partitions not released: the group's committed offsets once durable. */
  positions(): Map<number, bigint> {
    return new Map(this.assigned().map((p) => [p.partition, p.position]));
  }

  /**
   * Reads over the ranges a fenced replica set committed (a failover's new owner), those that end
   * past the partition's position; none clears what an earlier epoch had.
   */
  readOver(partition: number, committed: readonly OffsetRange[]): void {
    const ps = this.byNumber.get(partition);
    if (!ps) return;
    const elsewhere = committed.filter((r) => r.to > ps.position);
    if (elsewhere.length > 0) ps.elsewhere = elsewhere;
    else delete ps.elsewhere;
  }

  /** The ranges committed elsewhere that each partition reads over, for those that have any. */
  elsewhere(): Map<number, OffsetRange[]> {
    return new Map(
      [...this.byNumber.values()].flatMap((ps) =>
        ps.elsewhere?.length ? [[ps.partition, ps.elsewhere] as const] : [],
      ),
    );
  }

  /**
   * Applies events to partitions, all or none: every transition is checked before any takes
   * effect, and a refused one throws a ChannelError naming the partition. The caller carries out
   * the effects.
   */
  apply(events: readonly [number, PartitionEvent][], now: number): Outcome[] {
    const transitions = events.map(([p, event]) => {
      const t = transition(this.byNumber.get(p), p, event, now);
      if (!t.ok)
        throw new ChannelError(
          t.reason,
          `partition ${p} of cube ${this.cube} ${t.message}`,
          t.field,
        );
      return t;
    });
    return transitions.map(({ next, effects }) => {
      const current = this.byNumber.get(next.partition);
      // A new epoch is a new object: batches of the old one still on the worker see it and drop.
      if (!current || current.epoch !== next.epoch) this.byNumber.set(next.partition, next);
      else if (current !== next) Object.assign(current, next);
      return { ps: this.byNumber.get(next.partition)!, effects };
    });
  }

  /**
   * Waits until every one of `states` is stopped or `deadline` (epoch ms) has come, looking again
   * whenever a partition stops (drained) and every 250 ms.
   */
  async untilStopped(states: readonly PartitionState[], deadline: number): Promise<void> {
    while (!allStopped(states) && Date.now() < deadline) {
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, Math.min(drainRecheckMs, Math.max(1, deadline - Date.now())));
        this.drainWaiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  /** A draining partition reached its stop offset: the drains waiting look again. */
  drained(): void {
    const waiters = this.drainWaiters;
    this.drainWaiters = [];
    for (const w of waiters) w();
  }
}
