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
  /** partition → the end of the run of handed-off offsets from the first one kept anywhere. */
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

/**
 * Checks every replica's copy of each partition against the other replica sets: its kept offsets
 * and the union of each other set's must tile from the first offset kept anywhere to the last,
 * offsets Kafka deleted before they were read counting as accounted for. A replica that reports
 * no coverage (an older checkpoint) is left out.
 */
export function checkTiling(replicas: ReplicaCoverage[]): TilingReport {
  const known = replicas.filter((r) => r.coverage !== undefined);
  const partitions = new Set<number>();
  for (const r of known) for (const p of Object.keys(r.coverage!)) partitions.add(Number(p));
  const findings = new Map<string, TilingFinding>();
  const handedOffTo = new Map<number, bigint>();
  for (const p of [...partitions].sort((a, b) => a - b)) {
    const kept = (r: ReplicaCoverage): OffsetRange[] =>
      rangesFromJson(r.coverage![String(p)]?.kept ?? []);
    const holders = known.filter((r) => kept(r).length > 0);
    const lost = merged(known.map((r) => r.lost.get(p) ?? []));
    const bySet = new Map<string, OffsetRange[][]>();
    for (const r of holders) bySet.set(r.replicaSet, [...(bySet.get(r.replicaSet) ?? []), kept(r)]);
    const setUnion = new Map([...bySet].map(([rs, lists]) => [rs, merged(lists)]));
    for (const r of holders) {
      const ranges = [
        ...kept(r),
        ...[...setUnion].filter(([rs]) => rs !== r.replicaSet).flatMap(([, u]) => u),
      ];
      const start = ranges.reduce((m, x) => (x.from < m ? x.from : m), ranges[0]!.from);
      const end = ranges.reduce((m, x) => (x.to > m ? x.to : m), ranges[0]!.to);
      for (const problem of tilingProblems(ranges, start, end)) {
        const parts =
          problem.kind === 'gap'
            ? uncovered(problem, lost)
            : [{ from: problem.from, to: problem.to }];
        for (const part of parts) {
          const key = `${p} ${problem.kind} ${part.from} ${part.to}`;
          const finding = findings.get(key) ?? {
            partition: p,
            kind: problem.kind,
            from: part.from,
            to: part.to,
            receivers: [],
          };
          finding.receivers.push(r.receiver);
          findings.set(key, finding);
        }
      }
    }
    const everything = merged(holders.map(kept));
    if (everything.length === 0) continue;
    const handedOff = merged([
      ...known.map((r) => rangesFromJson(r.coverage![String(p)]?.handedOff ?? [])),
      lost,
    ]);
    const start = everything[0]!.from;
    const first = handedOff.find((r) => r.from <= start && r.to > start);
    handedOffTo.set(p, first ? first.to : start);
  }
  return { findings: [...findings.values()], handedOffTo };
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
