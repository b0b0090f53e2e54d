// Per-replica convergence (DESIGN §4, "Every replica converges"): the state each replica of a set
// should hold for a cube, derived from status and the reassign journal, set against what the
// replica reports, gives the receiver calls that bring it there — whether it missed a phase of a
// move, restarted, or came back after the move was done. Pure: the reconciler reads the reports
// (one summary per receiver) and makes the calls.
import type { ReassignJournal } from '../api/cube-assignment.ts';
import type { ResetRecord } from '../api/offset-reset.ts';
import type { PartitionStatus } from '../protocol/admin-api.ts';
import { startOf } from './reassign/moves.ts';

/** Where a replica that lacks a partition takes it from. */
export interface StartPosition {
  position: string;
  watermark: number | null;
}

/** What one partition of the cube should be on a replica. */
export type DesiredPartition =
  /**
   * Its set owns it: consuming under `epoch`; a replica that lacks it takes it at `start`. One
   * that still holds it under an older epoch (a move away and back it missed) hands that epoch
   * over at `handOver`, where it ended (undefined: not known), before it takes it at `start`.
   */
  | { partition: number; owned: true; epoch: number; start?: StartPosition; handOver?: string }
  /**
   * Its set does not own it: a replica still holding it under an older epoch than `epoch` (its
   * owner's) hands it over at `stop`, the offset the owner started from (undefined: not known).
   */
  | { partition: number; owned: false; epoch: number; stop?: string };

/** What the convergence reads of a replica's report of one partition. */
export type ReportedPartition = Pick<
  PartitionStatus,
  'partition' | 'state' | 'epoch' | 'position' | 'stopOffset' | 'watermark'
>;

/** The calls that bring a replica to its desired state, in the order to make them. */
export interface Repairs {
  /** Partitions at or past their stop offset: released there (the excess fenced). */
  release: { partitions: number[]; stopOffsets: Record<string, string> } | undefined;
  /** Partitions short of their stop offset: consumed up to it first, released on a later pass. */
  drain: Record<string, string> | undefined;
  /** Partitions the replica lacks, or holds under an older epoch than its set's. */
  assign: { partition: number; position: string; epoch: number; watermark: number | null }[];
  /** Owned partitions left paused or stopped (a move it missed, a suspend that ended). */
  resume: number[];
  /**
   * Partitions its set does not own that it still reads, with no stop offset known: stopped
   * where they are (a paused partition seals no window, so nothing past the unknown offset is
   * handed off) until one is.
   */
  pause: number[];
  /**
   * Its set owns nothing of the cube and the replica holds no partition once the releases are
   * made: seal, hand off and drop the cube, as Sealing does for the replicas it reaches.
   */
  seal: boolean;
  /** What cannot be decided, with the reason, for a condition. */
  unresolved: { partition: number; reason: string }[];
}

export const noRepairs = (r: Repairs): boolean =>
  !r.release &&
  !r.drain &&
  r.assign.length === 0 &&
  r.resume.length === 0 &&
  r.pause.length === 0 &&
  !r.seal;

/**
 * The repairs of one replica holding the cube (one that does not is restored whole by observe).
 * `ownsNothing`: its set owns no partition of the cube, so once it holds none it is sealed. A
 * suspended cube resumes nothing.
 */
export function replicaRepairs(
  reported: ReportedPartition[],
  desired: DesiredPartition[],
  options: { suspended: boolean; ownsNothing: boolean },
): Repairs {
  const held = new Map(reported.map((p) => [p.partition, p]));
  const out: Repairs = {
    release: undefined,
    drain: undefined,
    assign: [],
    resume: [],
    pause: [],
    seal: false,
    unresolved: [],
  };
  const releasing: number[] = [];
  const releaseStops: Record<string, string> = {};
  const drains: Record<string, string> = {};
  /** Where `r`'s epoch ends: the desired offset when known, else the one it was drained to. */
  const stopOf = (r: ReportedPartition, stop: string | undefined): string | undefined =>
    stop ?? (r.state === 'stopped' ? (r.stopOffset ?? undefined) : undefined);
  /** Stopped exactly where its epoch ends: nothing past it to fence, nothing short to read. */
  const handedOver = (r: ReportedPartition, stop: string | undefined): boolean => {
    const at = stopOf(r, stop);
    return r.state === 'stopped' && at !== undefined && BigInt(r.position) === BigInt(at);
  };
  /** Hands `r`'s epoch over where it ends: drained short of it, released at or past it. */
  const handOver = (r: ReportedPartition, desiredStop: string | undefined): void => {
    const stop = stopOf(r, desiredStop);
    if (stop === undefined) {
      out.unresolved.push({
        partition: r.partition,
        reason: `held under epoch ${r.epoch} at ${r.position}, and the offset that epoch ended at is not known`,
      });
      if (r.state === 'consuming' || r.state === 'draining') out.pause.push(r.partition);
      return;
    }
    if (BigInt(r.position) < BigInt(stop)) {
      drains[String(r.partition)] = stop;
    } else {
      releasing.push(r.partition);
      releaseStops[String(r.partition)] = stop;
    }
  };
  for (const d of desired) {
    const r = held.get(d.partition);
    if (d.owned) {
      if (r && r.state !== 'released' && r.epoch === d.epoch) {
        if ((r.state === 'paused' || r.state === 'stopped') && !options.suspended)
          out.resume.push(d.partition);
      } else if (r && r.epoch > d.epoch) {
        out.unresolved.push({
          partition: d.partition,
          reason: `held under epoch ${r.epoch}, newer than its set's ${d.epoch}`,
        });
      } else if (r && r.state === 'released' && r.epoch === d.epoch) {
        out.unresolved.push({
          partition: d.partition,
          reason: `released under its set's epoch ${d.epoch}`,
        });
      } else if (r && r.state !== 'released' && !handedOver(r, d.handOver)) {
        // Its older epoch first: taken under the new one as it stands, the data it read past
        // that epoch's end would be kept (counted twice), and what it missed never read.
        handOver(r, d.handOver);
        if (d.start && releasing.includes(d.partition))
          out.assign.push({ partition: d.partition, epoch: d.epoch, ...d.start });
      } else if (d.start) {
        out.assign.push({ partition: d.partition, epoch: d.epoch, ...d.start });
      } else {
        out.unresolved.push({
          partition: d.partition,
          reason: 'no replica of its set to take the position from',
        });
      }
      continue;
    }
    if (!r || r.state === 'released' || r.epoch >= d.epoch) continue;
    handOver(r, d.stop);
  }
  if (releasing.length > 0) out.release = { partitions: releasing, stopOffsets: releaseStops };
  if (Object.keys(drains).length > 0) out.drain = drains;
  const stillHeld = reported.some(
    (p) => p.state !== 'released' && !releasing.includes(p.partition),
  );
  out.seal = options.ownsNothing && !stillHeld;
  return out;
}

/** A replica's report as the derivation of the desired states reads it. */
export interface SiblingReport {
  /** Whether its Kafka consumer runs: a failed one's positions are frozen. */
  running: boolean;
  partitions: ReportedPartition[];
}

/** What status says of the cube's partitions, and what the replica's siblings report. */
export interface ConvergenceView {
  /** status.epochs. */
  epochs: Record<string, number>;
  /** status.epochStarts: where each partition's current epoch began. */
  epochStarts: Record<string, string>;
  /** status.resets: an epoch an offset reset began ended where its partition was drained to. */
  resets?: readonly ResetRecord[];
  siblings: SiblingReport[];
}

/**
 * Where the partition's epoch `epoch` ended, when that is known: where a sibling released it
 * under that epoch, or, for the epoch right before the current one, where the current one began.
 * Further back it is not kept: a replica that missed more than one move of a partition (down
 * past the grace a move's Sealing gives it) cannot hand that epoch over exactly.
 */
export function epochEnd(
  partition: number,
  epoch: number,
  view: ConvergenceView,
): string | undefined {
  const released = view.siblings
    .flatMap((s) => s.partitions)
    .find((q) => q.partition === partition && q.epoch === epoch && q.state === 'released');
  if (released) return released.stopOffset ?? released.position;
  // The epoch after it began with a reset: it ended where the reset drained it, not where the
  // next one began.
  const reset = view.resets
    ?.flatMap((r) => (r.result === 'Applied' ? (r.partitions ?? []) : []))
    .find((p) => p.partition === partition && p.epoch === epoch + 1);
  if (reset) return reset.from;
  return view.epochs[String(partition)] === epoch + 1
    ? view.epochStarts[String(partition)]
    : undefined;
}

/**
 * With no reassign in flight: what a replica of `replicaSet` holding `held` should hold. Its
 * set's partitions are owned under status.epochs; one it lacks, or holds under an older epoch
 * (handed over first where that epoch ended), it takes where the current epoch began
 * (status.epochStarts), so that its own copy of the epoch is whole. A replica that holds nothing
 * of the cube (new, or its volume lost: its history is gone anyway), or a status without that
 * offset, takes a running sibling's position instead, the sibling's copy standing for the data
 * before. A partition it holds but does not own it hands over where its epoch ended (epochEnd).
 */
export function desiredAtRest(
  assignment: Record<string, number[]>,
  replicaSet: string,
  held: ReportedPartition[],
  view: ConvergenceView,
): DesiredPartition[] {
  const { epochs, epochStarts, siblings } = view;
  const owned = assignment[replicaSet] ?? [];
  const out: DesiredPartition[] = [];
  const ordered = [...siblings].sort((a, b) => Number(b.running) - Number(a.running));
  const mine = new Map(held.map((p) => [p.partition, p]));
  for (const p of owned) {
    // No epoch in status (a status written before epochs): nothing to compare with.
    const epoch = epochs[String(p)];
    if (epoch === undefined) continue;
    const began = epochStarts[String(p)];
    const from = ordered
      .flatMap((s) => s.partitions)
      .find((q) => q.partition === p && q.epoch === epoch && q.state !== 'released');
    const start =
      began !== undefined && held.length > 0
        ? { position: began, watermark: null }
        : from && { position: from.position, watermark: from.watermark };
    const r = mine.get(p);
    const handOver =
      r && r.state !== 'released' && r.epoch < epoch ? epochEnd(p, r.epoch, view) : undefined;
    out.push({
      partition: p,
      owned: true,
      epoch,
      ...(start ? { start } : {}),
      ...(handOver === undefined ? {} : { handOver }),
    });
  }
  const owners = new Set(Object.values(assignment).flat());
  for (const r of held) {
    const epoch = epochs[String(r.partition)];
    if (owned.includes(r.partition) || !owners.has(r.partition) || epoch === undefined) continue;
    const stop = epochEnd(r.partition, r.epoch, view);
    out.push({
      partition: r.partition,
      owned: false,
      epoch,
      ...(stop === undefined ? {} : { stop }),
    });
  }
  return out;
}

/**
 * While a move is past its Starting phase: what a replica of `replicaSet` holding `held` should
 * hold. A target's replicas own the moving partitions under the next epoch from the stop
 * offsets; a source's have handed them over at those offsets. A replica still behind status
 * (a move before this one it missed) hands its older epoch over where that ended first. The
 * partitions that do not move are as at rest.
 */
export function desiredInMove(
  journal: ReassignJournal,
  assignment: Record<string, number[]>,
  replicaSet: string,
  held: ReportedPartition[],
  view: ConvergenceView,
): DesiredPartition[] {
  const { epochs } = view;
  const mine = new Map(held.map((p) => [p.partition, p]));
  const moving = new Set(journal.moves.map((m) => m.partition));
  const out: DesiredPartition[] = [];
  for (const m of journal.moves) {
    const stop = journal.stopOffsets?.[String(m.partition)];
    const current = epochs[String(m.partition)] ?? 0;
    const epoch = current + 1;
    const r = mine.get(m.partition);
    const behind = r && r.state !== 'released' && r.epoch < current;
    if (m.to === replicaSet && stop !== undefined) {
      const watermark = journal.watermarks?.[String(m.partition)] ?? null;
      // An offset reset gives the partition back to its owner: a replica still on the current
      // epoch (it missed the release) hands it over at the stop offset first.
      const missedReset =
        journal.reset !== undefined && r && r.state !== 'released' && r.epoch === current;
      const handOver = behind
        ? epochEnd(m.partition, r.epoch, view)
        : missedReset
          ? stop
          : undefined;
      out.push({
        partition: m.partition,
        owned: true,
        epoch,
        start: { position: startOf(journal, m.partition), watermark },
        ...(handOver === undefined ? {} : { handOver }),
      });
    } else if (m.from === replicaSet) {
      const end = behind ? epochEnd(m.partition, r.epoch, view) : stop;
      out.push({ partition: m.partition, owned: false, epoch, ...(end ? { stop: end } : {}) });
    }
  }
  // A replica that holds nothing of the cube (it lacks it: a new one, a lost volume) is given
  // the partitions that do not move by observe once the move is done (restoreCube), not here.
  const still = held.length > 0 ? desiredAtRest(assignment, replicaSet, held, view) : [];
  return [...out, ...still.filter((d) => !moving.has(d.partition))];
}
