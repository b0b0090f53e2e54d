// How much of what receivers read they reject (too late for a sealed window, not a valid event),
// over a sliding window of the operator's own observations. Receivers count cumulatively, so the
// share comes from how their counters grew between observations kept here, in memory, per cube
// and receiver: a restarted operator starts the window over, which only delays a report.
import type { Problem } from './planner.ts';

export interface RecordCounts {
  /** Events accepted into segments. */
  ingested: number;
  /** Records rejected, by reason. */
  rejected: Record<string, number>;
}

interface Sample extends RecordCounts {
  at: number;
}

/** What one receiver read and rejected between two of its observations. */
export interface RejectionDelta {
  receiver: string;
  replicaSet: string;
  /** Records read: accepted plus rejected. */
  read: number;
  rejected: number;
  byReason: Record<string, number>;
  /** Time between the two observations. */
  spanMs: number;
}

const total = (counts: Record<string, number>): number =>
  Object.values(counts).reduce((a, n) => a + n, 0);

/** The growth of one receiver's counters, or undefined when they went down (counted anew). */
function growth(from: RecordCounts, to: RecordCounts): RecordCounts | undefined {
  const rejected: Record<string, number> = {};
  for (const reason of new Set([...Object.keys(from.rejected), ...Object.keys(to.rejected)])) {
    const d = (to.rejected[reason] ?? 0) - (from.rejected[reason] ?? 0);
    if (d < 0) return undefined;
    if (d > 0) rejected[reason] = d;
  }
  const ingested = to.ingested - from.ingested;
  return ingested < 0 ? undefined : { ingested, rejected };
}

export class RejectedEventsWindow {
  readonly windowMs: number;
  /** cube key → receiver → samples, oldest first; the first is at or before the window start. */
  private readonly samples = new Map<string, Map<string, Sample[]>>();

  constructor(windowMs: number) {
    this.windowMs = windowMs;
  }

  /**
   * Records a receiver's counters at `at` and returns what it read and rejected over the window
   * (as much of it as was observed), or undefined before a second observation. Counters that went
   * down (the cube assigned there anew, its data removed) start the receiver's window over.
   */
  observe(
    cube: string,
    receiver: { name: string; replicaSet: string },
    at: number,
    counts: RecordCounts,
  ): RejectionDelta | undefined {
    let byReceiver = this.samples.get(cube);
    if (!byReceiver) this.samples.set(cube, (byReceiver = new Map<string, Sample[]>()));
    const sample: Sample = { at, ingested: counts.ingested, rejected: { ...counts.rejected } };
    let list = byReceiver.get(receiver.name) ?? [];
    const last = list[list.length - 1];
    if (last && !growth(last, sample)) list = [];
    list.push(sample);
    // Keep one sample at or before the window's start, so the window is covered in full.
    const start = at - this.windowMs;
    while (list.length > 1 && list[1]!.at <= start) list.shift();
    byReceiver.set(receiver.name, list);
    const first = list[0]!;
    if (first === sample) return undefined;
    const d = growth(first, sample)!;
    const rejected = total(d.rejected);
    return {
      receiver: receiver.name,
      replicaSet: receiver.replicaSet,
      read: d.ingested + rejected,
      rejected,
      byReason: d.rejected,
      spanMs: at - first.at,
    };
  }

  /** Forgets the cube's receivers that are not in `receivers` (gone, or no longer owners). */
  retain(cube: string, receivers: Set<string>): void {
    const byReceiver = this.samples.get(cube);
    if (!byReceiver) return;
    for (const name of byReceiver.keys()) if (!receivers.has(name)) byReceiver.delete(name);
    if (byReceiver.size === 0) this.samples.delete(cube);
  }

  forget(cube: string): void {
    this.samples.delete(cube);
  }
}

const describeReasons = (byReason: Record<string, number>): string =>
  Object.entries(byReason)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([reason, n]) => `${reason} ${n}`)
    .join(', ');

/**
 * EventsRejected when some receiver rejected more than `basisPoints` (hundredths of a percent) of the records it
 * read over the window. Judged per receiver, that is the worst replica of each replica set counts,
 * not their sum or mean: replicas of a set read the same offsets and decide lateness by each
 * partition's own event time, so they reject the same records, and summing would count them
 * twice; a replica that diverged from its peers is worth reporting, not averaging away. Replica
 * sets read disjoint partitions and are judged on their own.
 *
 * The condition message carries the counts; the Event's text names only replica sets and
 * reasons, so that counts growing with every resync do not record a new Event each time.
 */
export function rejectedEventsProblem(
  deltas: RejectionDelta[],
  basisPoints: number,
  thresholdText: string,
): Problem | undefined {
  const over = deltas
    .filter((d) => d.rejected > 0 && d.rejected * 10_000 > basisPoints * d.read)
    .sort(
      (a, b) => a.replicaSet.localeCompare(b.replicaSet) || a.receiver.localeCompare(b.receiver),
    );
  if (over.length === 0) return undefined;
  const message = over
    .map(
      (d) =>
        `receiver ${d.receiver} (${d.replicaSet}) rejected ${d.rejected} of the ${d.read} records it read in the last ${Math.round(d.spanMs / 1000)}s (${describeReasons(d.byReason)})`,
    )
    .join('; ');
  const replicaSets = [...new Set(over.map((d) => d.replicaSet))];
  const reasons = [...new Set(over.flatMap((d) => Object.keys(d.byReason)))].sort();
  const sets = `replica set${replicaSets.length > 1 ? 's' : ''} ${replicaSets.join(', ')}`;
  return {
    reason: 'EventsRejected',
    message: `${message}: more than spec.rejectedEventsThreshold (${thresholdText})`,
    event: `${sets} reject${replicaSets.length > 1 ? '' : 's'} more than ${thresholdText} of the records read (${reasons.join(', ')}); the Degraded condition has the counts`,
    keepsReady: true,
  };
}
