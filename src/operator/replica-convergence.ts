// Per-replica convergence (DESIGN §4, "Every replica converges"): the state each replica of a set
// should hold for a cube, derived from status and the reassign journal, set against what the
// replica reports, gives the receiver calls that bring it there — whether it missed a phase of a
// move, restarted, or came back after the move was done. Pure: the reconciler reads the reports
// (one summary per receiver) and makes the calls.
import type { ReassignJournal } from '../api/cube-assignment.ts';
import type { PartitionStatus } from '../protocol/admin-api.ts';

/** Where a replica that lacks a partition takes it from. */
export interface StartPosition {
  position: string;
  watermark: number | null;
}

/** What one partition of the cube should be on a replica. */
export type DesiredPartition =
  /** Its set owns it: consuming under `epoch`; a replica that lacks it takes it at `start`. */
  | { partition: number; owned: true; epoch: number; start?: StartPosition }
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
    // A replica drained to a stop offset knows it; the desired one, when known, wins.
    const stop = d.stop ?? (r.state === 'stopped' ? (r.stopOffset ?? undefined) : undefined);
    if (stop === undefined) {
      out.unresolved.push({
        partition: d.partition,
        reason: `held under epoch ${r.epoch} at ${r.position}, and the offset its owner started from is not known`,
      });
      if (r.state === 'consuming' || r.state === 'draining') out.pause.push(d.partition);
      continue;
    }
    if (BigInt(r.position) < BigInt(stop)) {
      drains[String(d.partition)] = stop;
    } else {
      releasing.push(d.partition);
      releaseStops[String(d.partition)] = stop;
    }
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

/**
 * With no reassign in flight: what every replica of `replicaSet` should hold. Its partitions are
 * owned under status.epochs and taken, by a replica that lacks one, at the position of a sibling
 * that holds it under that epoch (the sibling's copy is the data before it). A partition it
 * holds but does not own is handed over at the offset a sibling released it at under the same
 * epoch, when one did, else, one move behind, where its owner's epoch began (status.epochStarts).
 */
export function desiredAtRest(
  assignment: Record<string, number[]>,
  epochs: Record<string, number>,
  replicaSet: string,
  held: ReportedPartition[],
  siblings: SiblingReport[],
  /** status.epochStarts: where each partition's current epoch began. */
  epochStarts: Record<string, string> = {},
): DesiredPartition[] {
  const owned = assignment[replicaSet] ?? [];
  const out: DesiredPartition[] = [];
  const ordered = [...siblings].sort((a, b) => Number(b.running) - Number(a.running));
  for (const p of owned) {
    // No epoch in status (a status written before epochs): nothing to compare with.
    const epoch = epochs[String(p)];
    if (epoch === undefined) continue;
    const from = ordered
      .flatMap((s) => s.partitions)
      .find((q) => q.partition === p && q.epoch === epoch && q.state !== 'released');
    out.push({
      partition: p,
      owned: true,
      epoch,
      ...(from ? { start: { position: from.position, watermark: from.watermark } } : {}),
    });
  }
  const owners = new Set(Object.values(assignment).flat());
  for (const r of held) {
    const epoch = epochs[String(r.partition)];
    if (owned.includes(r.partition) || !owners.has(r.partition) || epoch === undefined) continue;
    const released = siblings
      .flatMap((s) => s.partitions)
      .find((q) => q.partition === r.partition && q.epoch === r.epoch && q.state === 'released');
    // No sibling released it under this epoch (they dropped the cube with their set's last
    // partition): a replica one move behind hands it over where the owner's epoch began. One
    // further behind missed more than one move, whose first stop is not kept: left unresolved.
    const stop = released
      ? (released.stopOffset ?? released.position)
      : r.epoch + 1 === epoch
        ? epochStarts[String(r.partition)]
        : undefined;
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
 * While a move is past its Starting phase: what the replicas of `replicaSet` should hold of the
 * moving partitions. A target's replicas own them under the next epoch from the stop offsets;
 * a source's have handed them over at those offsets.
 */
export function desiredInMove(
  journal: ReassignJournal,
  epochs: Record<string, number>,
  replicaSet: string,
): DesiredPartition[] {
  const out: DesiredPartition[] = [];
  for (const m of journal.moves) {
    const stop = journal.stopOffsets?.[String(m.partition)];
    const epoch = (epochs[String(m.partition)] ?? 0) + 1;
    if (m.to === replicaSet && stop !== undefined) {
      const watermark = journal.watermarks?.[String(m.partition)] ?? null;
      out.push({
        partition: m.partition,
        owned: true,
        epoch,
        start: { position: stop, watermark },
      });
    } else if (m.from === replicaSet) {
      out.push({ partition: m.partition, owned: false, epoch, ...(stop ? { stop } : {}) });
    }
  }
  return out;
}
