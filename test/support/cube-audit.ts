// The exactness audit of operator tests: for each replica index, the segments of one receiver per
// replica set (local, not yet handed off, plus its hand-offs in deep storage) must tile every
// partition's log and add up to what was produced.
import type { SegmentStatus } from '../../src/protocol/admin-api.ts';
import { ReceiverApiError } from '../../src/protocol/client.ts';
import {
  rangesFromJson,
  tilingProblems,
  type OffsetRange,
} from '../../src/receiver/offset-ranges.ts';
import type { Kafka } from 'kafkajs';
import { type Totals, highWatermarks, totalsOf } from './events.ts';
import type { SteadyLoad } from './load.ts';
import {
  addTotals,
  committed,
  fencedCopies,
  handOffTotals,
  handOffs,
  rangesByPartition,
} from './hand-offs.ts';
import { expectTotals, totalsFromQuery, waitForPositions } from './receiver-checks.ts';
import type { ReceiverProcess } from './receiver-process.ts';

const none: Totals = { events: 0, revenue: 0, cheapest: Infinity, dearest: -Infinity };

/** A cube this receiver does not hold (unassigned after a move) answers 404: nothing held. */
async function orNothing<T>(read: () => Promise<T>, nothing: T): Promise<T> {
  try {
    return await read();
  } catch (error) {
    if (error instanceof ReceiverApiError && error.status === 404) return nothing;
    throw error;
  }
}

export interface CubeAudit {
  cube: string;
  /** The cube's namespace, when not the receivers' clients' own (cubes of one name elsewhere). */
  namespace?: string;
  deepStorageDir: string;
  /** Receivers by replica set, in replica order; replica i of each set is audited together. */
  replicaSets: Record<string, ReceiverProcess[]>;
  /** partition → high watermark once the load stopped and the owners caught up. */
  highWatermarks: Map<number, bigint>;
  /**
   * partition → the offset the audited replicas hold it from, where not 0: a replica given the
   * cube at a sibling's positions holds nothing before them. `expected` then counts from there.
   */
  starts?: Map<number, bigint>;
  expected: Totals;
  /**
   * Whether to audit the committed view too (expectCommittedExact), as every audit without
   * `starts` does unless told not to: a suite that wipes the committing replica's data has its
   * live part gone until a sibling commits more.
   */
  committed?: boolean;
  /**
   * Replica sets failed over, audited at every replica index by their committed view (records
   * and the committing replica's live segments, heldCommitted) instead of replica i's own copies.
   * A release seals each replica's windows at its own position, so replica 0's copy may end short
   * of the copy the record holds; the failover restarts the set's partitions from the record, and
   * the returning replica drops its own segments past the restart with what they held before it.
   */
  committedSets?: string[];
  /**
   * Replica sets removed (a pool's scale-in), their receivers stopped: what they hold is their
   * hand-offs in deep storage, nothing live. Data they did not hand off and commit is a gap.
   */
  removedSets?: string[];
}

/** What one replica per replica set holds: offset ranges per partition and totals. */
export async function heldByReplica(
  audit: CubeAudit,
  replica: number,
): Promise<{ ranges: Map<number, OffsetRange[]>; totals: Totals; handOffs: number }> {
  const { ranges, add } = rangesByPartition();
  let totals = none;
  let handOffCount = 0;
  const all = handOffs(audit.deepStorageDir, audit.cube, audit.namespace);
  // A fenced replica set's copies that no commit record names are never data (a failover).
  const fenced = fencedCopies(all);
  const deep = all.filter((h) => !fenced.has(h.dir));
  for (const [rs, receivers] of Object.entries(audit.replicaSets)) {
    if (audit.committedSets?.includes(rs)) {
      const ofSet = await heldCommitted({ ...audit, replicaSets: { [rs]: receivers } });
      for (const [p, list] of ofSet.ranges) ranges.set(p, [...(ranges.get(p) ?? []), ...list]);
      totals = addTotals(totals, ofSet.totals);
      continue;
    }
    const r = receivers[replica];
    if (!r) continue;
    if (!audit.removedSets?.includes(rs)) {
      const client = audit.namespace ? r.client.inNamespace(audit.namespace) : r.client;
      const segments = await orNothing<SegmentStatus[]>(
        async () => (await client.cubeStatus(audit.cube)).segments,
        [],
      );
      // A HANDED_OFF segment is counted through its hand-off, as the query does.
      for (const s of segments) if (s.state !== 'HANDED_OFF') add(s.offsetRanges);
      totals = addTotals(
        totals,
        await orNothing(async () => totalsFromQuery(await client.query(audit.cube, {})), none),
      );
    }
    const own = deep.filter((h) => h.manifest.receiver === r.options.id);
    for (const h of own) add(h.manifest.offsetRanges);
    totals = addTotals(totals, handOffTotals(own));
    handOffCount += own.length;
  }
  return { ranges, totals, handOffs: handOffCount };
}

/**
 * What a reader of committed data holds, with the live data not committed yet: per replica set
 * and window, the hand-offs the newest commit record lists and the live (not handed off) segments
 * of the replica that committed them; a window nobody committed, the live segments of the set's
 * first replica holding the cube. Read until two readings of the replicas' segments agree around
 * the reading of the records, so that a commit in between is not counted twice or missed.
 */
export async function heldCommitted(
  audit: CubeAudit,
): Promise<{ ranges: Map<number, OffsetRange[]>; totals: Totals; committed: number }> {
  const liveOf = async (r: ReceiverProcess): Promise<SegmentStatus[] | undefined> => {
    if (audit.removedSets?.includes(r.options.replicaSet)) return undefined;
    const client = audit.namespace ? r.client.inNamespace(audit.namespace) : r.client;
    return orNothing<SegmentStatus[] | undefined>(
      async () => (await client.cubeStatus(audit.cube)).segments,
      undefined,
    );
  };
  const readAll = async () =>
    Promise.all(
      Object.values(audit.replicaSets).map((list) =>
        Promise.all(list.map(async (r) => ({ r, segments: await liveOf(r) }))),
      ),
    );
  const shape = (all: Awaited<ReturnType<typeof readAll>>): string =>
    JSON.stringify(
      all.map((list) =>
        list.map((x) => x.segments?.map((s) => [s.windowStart, s.generation, s.state])),
      ),
    );
  for (let attempt = 0; ; attempt++) {
    const before = await readAll();
    const records = await committed(audit.deepStorageDir, audit.cube, audit.namespace);
    const after = await readAll();
    if (shape(before) !== shape(after) && attempt < 20) continue;
    const ranges = new Map<number, OffsetRange[]>();
    const add = (offsetRanges: Record<string, [string, string][]>): void => {
      for (const [p, list] of Object.entries(offsetRanges))
        ranges.set(Number(p), [...(ranges.get(Number(p)) ?? []), ...rangesFromJson(list)]);
    };
    let totals = none;
    for (const [i, rs] of Object.keys(audit.replicaSets).entries()) {
      const replicas = after[i]!;
      const ofSet = records.filter((c) => c.replicaSet === rs);
      const windows = new Set<number>(ofSet.map((c) => c.windowStart));
      for (const { segments } of replicas)
        for (const seg of segments ?? [])
          if (seg.state !== 'HANDED_OFF') windows.add(seg.windowStart);
      for (const w of windows) {
        const record = ofSet.find((c) => c.windowStart === w);
        if (record) {
          for (const h of record.handOffs) add(h.manifest.offsetRanges);
          totals = addTotals(totals, handOffTotals(record.handOffs));
        }
        const reader = record
          ? replicas.find((x) => x.r.options.id === record.record.receiver)
          : replicas.find((x) => x.segments !== undefined);
        if (!reader?.segments) continue;
        const client = audit.namespace
          ? reader.r.client.inNamespace(audit.namespace)
          : reader.r.client;
        const live = await client.query(audit.cube, { from: w, to: w + 1 });
        if (live.segments === 0) continue;
        add(live.offsetRanges);
        totals = addTotals(totals, totalsFromQuery(live));
      }
    }
    return { ranges, totals, committed: records.length };
  }
}

/**
 * Asserts that committed data with what is live tiles [start, highWatermark) and adds up exactly
 * (heldCommitted): one copy per window and replica set, whichever replica's it is.
 */
export async function expectCommittedExact(audit: CubeAudit): Promise<void> {
  const held = await heldCommitted(audit);
  const problems: Record<string, string[]> = {};
  for (const [p, end] of audit.highWatermarks) {
    // `starts` is where one replica begins; the set's committed data begins at 0.
    const start = 0n;
    const found = tilingProblems(held.ranges.get(p) ?? [], start, end);
    if (found.length > 0)
      problems[`committed, partition ${p} of [${start}, ${end})`] = found.map(
        (x) => `${x.kind} [${x.from}, ${x.to})`,
      );
  }
  expect(problems).toEqual({});
  expectTotals(held.totals, audit.expected);
}

/**
 * Asserts, replica by replica, that the offsets tile [start, highWatermark) (start 0 unless
 * `starts` says otherwise) and the totals are exact.
 */
export async function expectExactAndTiled(audit: CubeAudit): Promise<void> {
  const replicas = Math.max(...Object.values(audit.replicaSets).map((list) => list.length));
  const problems: Record<string, string[]> = {};
  for (let i = 0; i < replicas; i++) {
    const held = await heldByReplica(audit, i);
    for (const [p, end] of audit.highWatermarks) {
      const start = audit.starts?.get(p) ?? 0n;
      const found = tilingProblems(held.ranges.get(p) ?? [], start, end);
      if (found.length > 0)
        problems[`replica ${i}, partition ${p} of [${start}, ${end})`] = found.map(
          (x) => `${x.kind} [${x.from}, ${x.to})`,
        );
    }
    for (const p of held.ranges.keys())
      if (!audit.highWatermarks.has(p)) problems[`replica ${i}, partition ${p}`] = ['not in topic'];
    expect(problems).toEqual({});
    expectTotals(held.totals, audit.expected);
  }
  // An audit from `starts` is one replica's view from where it began, not its set's data.
  if (audit.committed !== false && audit.starts === undefined) await expectCommittedExact(audit);
}

/**
 * Once `load` has stopped: waits until every receiver of each set reached the end of the
 * partitions its set owns (`owned`), then audits every replica index (expectExactAndTiled)
 * against what the load wrote.
 */
export async function expectExactOnceCaughtUp(o: {
  kafka: Kafka;
  topic: string;
  load: SteadyLoad;
  cube: string;
  deepStorageDir: string;
  replicaSets: Record<string, ReceiverProcess[]>;
  owned: Record<string, number[]>;
  /** CubeAudit.committedSets: the sets failed over, audited by their committed view. */
  committedSets?: string[];
}): Promise<void> {
  await o.load.stop();
  const hw = await highWatermarks(o.kafka, o.topic);
  for (const [rs, receivers] of Object.entries(o.replicaSets)) {
    const owned = o.owned[rs] ?? [];
    // A set that owns nothing has dropped the cube (its hand-offs are what it holds).
    if (owned.length === 0) continue;
    const ends = Object.fromEntries(owned.map((p) => [p, hw.get(p)!]));
    for (const r of receivers) await waitForPositions(r.client, o.cube, ends);
  }
  await expectExactAndTiled({
    cube: o.cube,
    deepStorageDir: o.deepStorageDir,
    replicaSets: o.replicaSets,
    highWatermarks: hw,
    expected: totalsOf(o.load.all()),
    ...(o.committedSets ? { committedSets: o.committedSets } : {}),
  });
}

/** What an audit found, in figures: offsets held by no replica set, and held twice. */
export interface AuditFigures {
  /** Offsets in a gap of the tiling, summed over partitions (the most any replica index lacks). */
  lost: bigint;
  /** Offsets covered more than once, summed over partitions (the most of any replica index). */
  twice: bigint;
  /** Events each replica index holds (live segments and hand-offs), against `audit.expected`. */
  events: number[];
  /** The same of the committed view (heldCommitted): one copy per window and replica set. */
  committed: { lost: bigint; twice: bigint; events: number; records: number };
}

/** The audit's findings as figures, for a summary: the same reading as expectExactAndTiled. */
export async function auditFigures(audit: CubeAudit): Promise<AuditFigures> {
  const replicas = Math.max(...Object.values(audit.replicaSets).map((list) => list.length));
  const figures: AuditFigures = {
    lost: 0n,
    twice: 0n,
    events: [],
    committed: { lost: 0n, twice: 0n, events: 0, records: 0 },
  };
  for (let i = 0; i < replicas; i++) {
    const held = await heldByReplica(audit, i);
    const sum = { gap: 0n, overlap: 0n };
    for (const [p, end] of audit.highWatermarks)
      for (const x of tilingProblems(held.ranges.get(p) ?? [], audit.starts?.get(p) ?? 0n, end))
        sum[x.kind] += x.to - x.from;
    if (sum.gap > figures.lost) figures.lost = sum.gap;
    if (sum.overlap > figures.twice) figures.twice = sum.overlap;
    figures.events.push(held.totals.events);
  }
  const held = await heldCommitted(audit);
  for (const [p, end] of audit.highWatermarks)
    for (const x of tilingProblems(held.ranges.get(p) ?? [], 0n, end))
      figures.committed[x.kind === 'gap' ? 'lost' : 'twice'] += x.to - x.from;
  figures.committed.events = held.totals.events;
  figures.committed.records = held.committed;
  return figures;
}
