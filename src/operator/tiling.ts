// The tiling check the operator reports: for each partition, the offsets every replica keeps,
// with those of the other replica sets, must tile the log with no gap and no overlap (DESIGN §4's
// guarantee), and how far the partition's data is handed off. Pure: it reads what the receivers
// report (their `coverage`), and the reconciler turns its answer into status and Degraded.
import {
  type OffsetRange,
  type RangeJson,
  addRange,
  rangesFromJson,
  tilingProblems,
} from '../receiver/offset-ranges.ts';
import type { Problem } from './planner.ts';

/** What one replica reports of one cube: its coverage, per partition, and its lost offsets. */
export interface ReplicaCoverage {
  receiver: string;
  replicaSet: string;
  /** partition → kept and handed-off offsets; undefined when the receiver does not know it. */
  coverage: Record<string, { kept: RangeJson[]; handedOff: RangeJson[] }> | undefined;
  /** partition → ranges Kafka deleted before this replica read them. */
  lost: Map<number, OffsetRange[]>;
}

export interface TilingFinding {
  partition: number;
  kind: 'gap' | 'overlap';
  from: bigint;
  to: bigint;
  /** The replicas whose view shows it (a gap in one replica's copy is that replica's). */
  receivers: string[];
}

export interface TilingReport {
  findings: TilingFinding[];
  /**
   * partition → the end of the run of handed-off offsets from the first one kept anywhere (the
   * offsets of sets that dropped the cube, committed before they did, count as handed off).
   */
  handedOffTo: Map<number, bigint>;
}

const merged = (lists: Iterable<OffsetRange[]>): OffsetRange[] => {
  const out: OffsetRange[] = [];
  for (const list of lists) for (const r of list) addRange(out, r.from, r.to);
  return out;
};

/** `gap` minus the ranges of `covered` (sorted, disjoint): the parts of it nothing accounts for. */
function uncovered(gap: OffsetRange, covered: OffsetRange[]): OffsetRange[] {
  const out: OffsetRange[] = [];
  let cursor = gap.from;
  for (const r of covered) {
    if (r.to <= cursor) continue;
    if (r.from >= gap.to) break;
    if (r.from > cursor) out.push({ from: cursor, to: r.from });
    cursor = r.to;
  }
  if (cursor < gap.to) out.push({ from: cursor, to: gap.to });
  return out;
}

/** The part of `ranges` within [from, to). */
const within = (ranges: OffsetRange[], from: bigint, to: bigint): OffsetRange[] =>
  ranges
    .filter((r) => r.to > from && r.from < to)
    .map((r) => ({ from: r.from > from ? r.from : from, to: r.to < to ? r.to : to }));

/**
 * Checks every replica's copy of each partition, with what can be told from the reports alone:
 * receivers forget a cube they no longer hold, so the offsets a replica set kept before it
 * dropped the cube (handed off) are missing from them, and a hole between two sets' ranges is no
 * finding in itself. Found are:
 * - overlaps: offsets a replica keeps that another replica set keeps too (counted twice);
 * - gaps in a replica's copy where a sibling of its set keeps offsets it does not (within the
 *   span both cover; offsets Kafka deleted before the replica read them excepted);
 * - gaps from where the partition's current epoch began (`epochStarts`, when known) on, across
 *   the replica sets: what the owner's replicas keep must run on from there.
 * A replica that reports no coverage (an older checkpoint) is left out. Offsets an offset reset
 * skipped on purpose (`skipped`, partition → ranges) are accounted for, as lost ones are: no gap.
 */
export function checkTiling(
  replicas: ReplicaCoverage[],
  epochStarts: Record<string, string> = {},
  skipped: ReadonlyMap<number, OffsetRange[]> = new Map(),
): TilingReport {
  const known = replicas.filter((r) => r.coverage !== undefined);
  const partitions = new Set<number>();
  for (const r of known) for (const p of Object.keys(r.coverage!)) partitions.add(Number(p));
  const findings = new Map<string, TilingFinding>();
  const find = (p: number, kind: 'gap' | 'overlap', range: OffsetRange, receiver: string) => {
    const key = `${p} ${kind} ${range.from} ${range.to}`;
    const finding = findings.get(key) ?? {
      partition: p,
      kind,
      from: range.from,
      to: range.to,
      receivers: [],
    };
    if (!finding.receivers.includes(receiver)) finding.receivers.push(receiver);
    findings.set(key, finding);
  };
  const handedOffTo = new Map<number, bigint>();
  for (const p of [...partitions].sort((a, b) => a - b)) {
    // Each replica's ranges of the partition, parsed once.
    const keptBy = new Map(
      known.map((r) => [r, rangesFromJson(r.coverage![String(p)]?.kept ?? [])]),
    );
    const kept = (r: ReplicaCoverage): OffsetRange[] => keptBy.get(r)!;
    const holders = known.filter((r) => kept(r).length > 0);
    const lostOf = (r: ReplicaCoverage): OffsetRange[] =>
      merged([r.lost.get(p) ?? [], skipped.get(p) ?? []]);
    const bySet = new Map<string, ReplicaCoverage[]>();
    for (const r of holders) bySet.set(r.replicaSet, [...(bySet.get(r.replicaSet) ?? []), r]);
    const setUnion = new Map([...bySet].map(([rs, members]) => [rs, merged(members.map(kept))]));
    const began = epochStarts[String(p)];
    for (const r of holders) {
      const mine = kept(r);
      const others = [...setUnion].filter(([rs]) => rs !== r.replicaSet).flatMap(([, u]) => u);
      const all = [...mine, ...others];
      const lo = all.reduce((m, x) => (x.from < m ? x.from : m), all[0]!.from);
      const hi = all.reduce((m, x) => (x.to > m ? x.to : m), all[0]!.to);
      for (const problem of tilingProblems(all, lo, hi))
        if (problem.kind === 'overlap') find(p, 'overlap', problem, r.receiver);
      // Gaps against its siblings, where both keep offsets.
      for (const sibling of bySet.get(r.replicaSet)!) {
        if (sibling === r) continue;
        const theirs = kept(sibling);
        const from = mine[0]!.from > theirs[0]!.from ? mine[0]!.from : theirs[0]!.from;
        const lastMine = mine[mine.length - 1]!.to;
        const lastTheirs = theirs[theirs.length - 1]!.to;
        const to = lastMine < lastTheirs ? lastMine : lastTheirs;
        if (from >= to) continue;
        const accounted = merged([mine, lostOf(r)]);
        for (const t of within(theirs, from, to))
          for (const part of uncovered(t, accounted)) find(p, 'gap', part, r.receiver);
      }
    }
    // Gaps across the sets from where the current epoch began, per set: its replicas together
    // must run on from there (a replica given the partition late is its siblings' business,
    // above). From the epoch's start when the set before still reports its range up to it, else
    // from the first offset the set keeps past it (the set before may have dropped the cube).
    if (began !== undefined) {
      const from = BigInt(began);
      for (const [rs, members] of bySet) {
        const union = setUnion.get(rs)!;
        const others = [...setUnion].filter(([o]) => o !== rs).flatMap(([, u]) => u);
        const all = merged([union, others]);
        const hi = all[all.length - 1]!.to;
        const after = within(union, from, hi);
        if (after.length === 0) continue;
        const reaches = all.some((x) => x.from < from && x.to >= from);
        const start = reaches ? from : after[0]!.from;
        const lost = merged(members.map(lostOf));
        for (const problem of tilingProblems(within(all, start, hi), start, hi))
          if (problem.kind === 'gap')
            for (const part of uncovered(problem, lost))
              for (const r of members)
                if (within(kept(r), from, hi).length > 0) find(p, 'gap', part, r.receiver);
      }
    }
    const everything = merged(holders.map(kept));
    if (everything.length === 0) continue;
    const handedOff = merged([
      ...known.map((r) => rangesFromJson(r.coverage![String(p)]?.handedOff ?? [])),
      ...known.map(lostOf),
      droppedWithTheCube(p, everything, began, [...findings.values()]),
    ]);
    const start = everything[0]!.from;
    const first = handedOff.find((r) => r.from <= start && r.to > start);
    handedOffTo.set(p, first ? first.to : start);
  }
  return { findings: [...findings.values()], handedOffTo };
}

/**
 * The offsets of partition `p` no reporting replica keeps, between the first one kept and the
 * last one kept or where the current epoch began (`began`), that no gap finding names: offsets of
 * a replica set that has since dropped the cube. A set drops a cube only once its data is handed
 * off and committed (Sealing), and a failover restarts where the lost set's committed data ends,
 * so they are committed: the run of handed-off offsets goes on through them (a set scaled in, or
 * taken out of spec.replicaSets, would otherwise hold handedOffTo where its range began for good).
 */
function droppedWithTheCube(
  p: number,
  kept: OffsetRange[],
  began: string | undefined,
  findings: readonly TilingFinding[],
): OffsetRange[] {
  const gaps = findings.filter((f) => f.partition === p && f.kind === 'gap');
  const last = kept[kept.length - 1]!.to;
  const to = began !== undefined && BigInt(began) > last ? BigInt(began) : last;
  const holes = uncovered({ from: kept[0]!.from, to }, kept);
  return holes.filter((h) => !gaps.some((g) => g.from < h.to && g.to > h.from));
}

/** A finding as a line of a condition's message or an Event. */
export const findingText = (f: TilingFinding): string =>
  `partition ${f.partition}: ${f.kind} [${f.from}, ${f.to}) in the copy of ${f.receivers.sort().join(', ')}`;

/** The Degraded problem of findings: the data stays Ready to read, but a copy is wrong. */
export function offsetsNotTiled(findings: TilingFinding[]): Problem {
  const shown = findings.slice(0, 3).map(findingText);
  const more = findings.length - shown.length;
  return {
    reason: 'OffsetsNotTiled',
    message:
      `the replicas' offsets do not tile (${findings.length} finding${findings.length > 1 ? 's' : ''}): ` +
      shown.join('; ') +
      (more > 0 ? `; and ${more} more` : ''),
    keepsReady: true,
  };
}
