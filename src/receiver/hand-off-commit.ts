// One committed copy of each window of a replica set. Every replica of a set hands off its own
// copy of each sealed segment, and the replicas cut a window into segments (generations) at
// different offsets (an idle partition is judged by wall-clock time). So the unit committed is a
// whole window of one replica set: a commit record names one replica's hand-offs of the window,
// and readers read the latest record and nothing else of the window.
//
// Records are versioned and created only if absent (`commit.<n>.json`, a compare-and-set in a
// directory or a bucket): version n+1 is written by a replica whose hand-offs of the window cover
// strictly more offsets than version n, so a reader never meets two replicas' data of one window,
// and each new version covers everything the last one did. A copy that overlaps what another
// replica set committed of the window under a later epoch (a replica ran past a stop offset before
// it was fenced) is refused.
import { z } from 'zod';
import { offset, partitionKey } from '../api/kafka-numbers.ts';
import type { DeepStorage } from './deep-storage.ts';
import { type HandOffTarget, handOffKey } from './hand-off.ts';
import {
  type OffsetRange,
  type RangeJson,
  addRange,
  rangeMapFromJson,
  rangeMapToJson,
  rangesFromJson,
} from './offset-ranges.ts';
import { type Segment, epochsToJson, rejectedToJson } from './segments.ts';

/** What a commit record says: the hand-offs of one window of one replica set that are the data. */
export interface CommitRecord {
  version: number;
  receiver: string;
  replicaSet: string;
  windowStart: string;
  /** Hand-off directories, relative to the record's directory (`<receiver>.e<epoch>.<digest>`). */
  handOffs: {
    dir: string;
    offsetRanges: Record<string, RangeJson[]>;
    epochs: Record<string, number>;
    /** As the hand-off's manifest says: partition → reason → records rejected; absent: not known. */
    rejected?: Record<string, Record<string, number>>;
    /**
     * As the hand-off's manifest says: partition → offsets Kafka deleted before they were read,
     * right before a range of this hand-off. Absent: none (and in records written before it was kept).
     */
    lostRanges?: Record<string, RangeJson[]>;
  }[];
  /** partition → the offsets the listed hand-offs cover together. */
  offsetRanges: Record<string, RangeJson[]>;
  committedAt: string;
  /**
   * The cube's metadata.uid as its writer knew it; absent when it did not (and in records written
   * before it was kept): a record of another uid is another cube's of the same name (ofAnotherCube).
   */
  cubeUid?: string;
  /**
   * Written by a failover's fence (its id), not by a commit: the version before it again, or
   * nothing when there was none (fenceReplicaSet's barrier).
   */
  fence?: string;
}

const rangeList = z.array(z.tuple([offset, offset]));
const rangeMap = z.record(partitionKey, rangeList);
const epochMap = z.record(partitionKey, z.int().min(0));

/** A record's cubeUid (CommitRecord, FenceRecord), read as its writers write it. */
const recordCubeUid = z.string().min(1).max(128).optional();

/**
 * What a commit record must hold to be believed: what a reader trusts as "the data" of a window.
 * Extra fields are kept (a newer writer's), a missing or mistyped one is refused.
 */
const commitRecordSchema = z.looseObject({
  version: z.int().min(1),
  receiver: z.string().min(1).max(253),
  replicaSet: z.string().min(1).max(63),
  windowStart: z.string(),
  handOffs: z.array(
    z.looseObject({ dir: z.string().min(1).max(1024), offsetRanges: rangeMap, epochs: epochMap }),
  ),
  offsetRanges: rangeMap,
  committedAt: z.string(),
  cubeUid: recordCubeUid,
  fence: z.string().optional(),
});

const fenceRecordSchema = z.looseObject({
  id: z.string().min(1).max(253),
  replicaSet: z.string().min(1).max(63),
  partitions: epochMap,
  from: z.record(partitionKey, offset).optional(),
  by: z.string(),
  fencedAt: z.string(),
  cubeUid: recordCubeUid,
});

/** A commit or fence record in deep storage that is not what its writer writes. */
export class InvalidRecordError extends Error {
  constructor(key: string, detail: string) {
    super(`deep storage record ${key} is not valid: ${detail}`);
    this.name = 'InvalidRecordError';
  }
}

function parseRecord<T>(schema: z.ZodType<T>, key: string, text: string): T {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new InvalidRecordError(key, `not JSON (${(error as Error).message})`);
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new InvalidRecordError(
      key,
      `${issue?.path.join('.') || '(the record)'}: ${issue?.message ?? 'invalid'}`,
    );
  }
  return parsed.data;
}

/**
 * A commit record read from `key`, checked against its schema: a record that is not JSON or lacks
 * a field throws InvalidRecordError naming the key and the field, never passes on as data.
 */
export const parseCommitRecord = (key: string, text: string): CommitRecord =>
  parseRecord(commitRecordSchema, key, text);

/** A fence record read from `key`, checked against its schema (InvalidRecordError otherwise). */
export const parseFenceRecord = (key: string, text: string): FenceRecord =>
  parseRecord(fenceRecordSchema, key, text);

export const commitRecordName = (version: number): string =>
  `commit.${String(version).padStart(8, '0')}.json`;

/** The key of version `version` of a replica set's record in a window's directory. */
const recordKey = (windowDir: string, replicaSet: string, version: number): string =>
  `${windowDir}/replicaSet=${replicaSet}/${commitRecordName(version)}`;

const recordPattern = /^replicaSet=([^/]+)\/commit\.(\d+)\.json$/;

/** The directory of one window of a cube in deep storage (every replica set's hand-offs under it). */
export function windowDir(target: HandOffTarget, windowStart: number): string {
  return handOffKey(target, { windowStart, epochs: new Map(), ranges: new Map() })
    .split('/')
    .slice(0, -2)
    .join('/');
}

type Coverage = Map<number, OffsetRange[]>;

export function coverageOf(
  handOffs: readonly { offsetRanges: Record<string, RangeJson[]> }[],
): Coverage {
  const out: Coverage = new Map();
  for (const h of handOffs)
    for (const [p, ranges] of rangeMapFromJson(h.offsetRanges)) {
      const acc = out.get(p) ?? [];
      for (const r of ranges) addRange(acc, r.from, r.to);
      out.set(p, acc);
    }
  return out;
}

/** Whether every offset of `inner` is in `outer` (both merged, sorted ranges per partition). */
export function covers(outer: Coverage, inner: Coverage): boolean {
  for (const [p, ranges] of inner) {
    const out = outer.get(p) ?? [];
    for (const r of ranges) {
      if (r.to <= r.from) continue;
      if (!out.some((o) => o.from <= r.from && r.to <= o.to)) return false;
    }
  }
  return true;
}

/** Partitions (with the first offset range) where `a` and `b` share offsets. */
export function overlapping(
  a: Coverage,
  b: Coverage,
): { partition: number; from: bigint; to: bigint }[] {
  const found: { partition: number; from: bigint; to: bigint }[] = [];
  for (const [p, ranges] of a) {
    for (const r of ranges)
      for (const o of b.get(p) ?? []) {
        const from = r.from > o.from ? r.from : o.from;
        const to = r.to < o.to ? r.to : o.to;
        if (from < to) found.push({ partition: p, from, to });
      }
  }
  return found;
}

/**
 * Whether `record` (a commit or fence record) is another cube's of the same name: both this
 * cube's uid and the record's are known and differ. A record without one is judged as before uids
 * were written (it may be this cube's); so is every record when this cube's uid is not known.
 */
export const ofAnotherCube = (
  record: { cubeUid?: string | undefined } | undefined,
  cubeUid: string | undefined,
): boolean => cubeUid !== undefined && record?.cubeUid !== undefined && record.cubeUid !== cubeUid;

export type CommitDecision =
  | { kind: 'commit'; handOffs: CommitRecord['handOffs'] }
  /** The latest record already covers at least what this replica could commit. */
  | { kind: 'covered'; by: string }
  /** The latest record (another replica's) holds offsets this replica's hand-offs lack. */
  | { kind: 'behind'; by: string }
  /** Overlaps a later epoch's committed copy in another replica set: never to be committed. */
  | { kind: 'stale'; detail: string }
  /** Holds a partition under an epoch a failover fenced (`by`: the fence's id): never committed. */
  | { kind: 'fenced'; by: string };

/**
 * What a replica commits of a window, given its own hand-offs of it, the window's latest record
 * of its replica set (if any), and the latest records of the other replica sets. With the cube's
 * uid (`cubeUid`), records and fences of another cube of the same name (ofAnotherCube) are none
 * of this cube's: they neither cover, nor hold more than, nor outrank, nor fence its copy.
 */
export function decideCommit(o: {
  receiver: string;
  mine: CommitRecord['handOffs'];
  latest: CommitRecord | undefined;
  otherSets: CommitRecord[];
  /** This replica set's fences (see fencesOf). */
  fences?: Fences;
  /** This cube's metadata.uid; undefined: not known, every record is judged as this cube's. */
  cubeUid?: string | undefined;
}): CommitDecision {
  const latest = ofAnotherCube(o.latest, o.cubeUid) ? undefined : o.latest;
  const otherSets = o.otherSets.filter((r) => !ofAnotherCube(r, o.cubeUid));
  const fences = o.fences && fencesOfCube(o.fences, o.cubeUid);
  // A replica's own earlier record lists hand-offs its memory may have purged since.
  const candidate = [...o.mine];
  if (latest?.receiver === o.receiver)
    for (const h of latest.handOffs) if (!candidate.some((c) => c.dir === h.dir)) candidate.push(h);
  // Offsets read again under a later epoch (an offset reset backward) are a copy of their own,
  // not one the record holds already: never "covered" by it.
  const replay = latest !== undefined && readsAgain(candidate, latest);
  const mine = coverageOf(candidate);
  if (latest) {
    const committed = rangeMapFromJson(latest.offsetRanges);
    if (!replay && covers(committed, mine)) return { kind: 'covered', by: latest.receiver };
    if (!covers(mine, committed)) return { kind: 'behind', by: latest.receiver };
  }
  // Fenced offsets the latest record holds already are committed data (a sibling's copy of them,
  // or this replica's own from before the fence): only offsets it lacks are never committed.
  const committed: Coverage = latest
    ? rangeMapFromJson(latest.offsetRanges)
    : new Map<number, OffsetRange[]>();
  const fence = fences && fencedIn(candidate, fences, committed);
  if (fence) return { kind: 'fenced', by: fence };
  for (const other of otherSets) {
    const shared = overlapping(mine, rangeMapFromJson(other.offsetRanges));
    for (const s of shared) {
      const myEpoch = epochIn(candidate, s.partition, s.from);
      const theirEpoch = epochIn(other.handOffs, s.partition, s.from);
      if (theirEpoch !== undefined && myEpoch !== undefined && myEpoch < theirEpoch)
        return {
          kind: 'stale',
          detail: `partition ${s.partition} offsets [${s.from}, ${s.to}) under epoch ${myEpoch} are committed by replica set ${other.replicaSet} (receiver ${other.receiver}) under epoch ${theirEpoch}`,
        };
    }
  }
  return { kind: 'commit', handOffs: candidate };
}

/**
 * Whether a hand-off the record does not list holds offsets the record holds, read under a later
 * epoch of their partition than any of the record's: read again after an offset reset backward.
 */
export function readsAgain(
  candidate: CommitRecord['handOffs'],
  latest: Pick<CommitRecord, 'handOffs' | 'offsetRanges'>,
): boolean {
  const committed = rangeMapFromJson(latest.offsetRanges);
  const listed = new Set(latest.handOffs.map((h) => h.dir));
  for (const h of candidate) {
    if (listed.has(h.dir)) continue;
    for (const [p, epoch] of Object.entries(h.epochs)) {
      const before = Math.max(-1, ...latest.handOffs.map((l) => l.epochs[p] ?? -1));
      if (before < 0 || epoch <= before) continue;
      const ranges = new Map([[Number(p), rangesFromJson(h.offsetRanges[p] ?? [])]]);
      if (overlapping(ranges, committed).length > 0) return true;
    }
  }
  return false;
}

/** The epoch under which the hand-off holding `offset` of `partition` consumed it. */
function epochIn(
  handOffs: CommitRecord['handOffs'],
  partition: number,
  offset: bigint,
): number | undefined {
  for (const h of handOffs) {
    const ranges = h.offsetRanges[String(partition)];
    if (ranges?.some(([from, to]) => BigInt(from) <= offset && offset < BigInt(to)))
      return h.epochs[String(partition)];
  }
  return undefined;
}

/** A hand-off of `segment` as a record lists it. */
export function recordedHandOff(
  target: HandOffTarget,
  segment: Pick<Segment, 'windowStart' | 'epochs' | 'ranges' | 'rejected'>,
  lost: ReadonlyMap<number, OffsetRange[]> = new Map(),
): CommitRecord['handOffs'][number] {
  return {
    dir: handOffKey(target, segment).split('/').at(-1)!,
    offsetRanges: rangeMapToJson(segment.ranges),
    epochs: epochsToJson(segment.epochs),
    ...(segment.rejected ? { rejected: rejectedToJson(segment.rejected) } : {}),
    ...(lost.size > 0 ? { lostRanges: rangeMapToJson(new Map(lost)) } : {}),
  };
}

/** The latest record of each replica set under a window's directory. */
export async function latestRecords(
  storage: DeepStorage,
  dir: string,
  signal?: AbortSignal,
): Promise<Map<string, CommitRecord>> {
  const newest = new Map<string, { version: number; key: string }>();
  for (const key of await storage.listKeys(dir, signal)) {
    const m = recordPattern.exec(key);
    if (!m) continue;
    const version = Number(m[2]);
    if ((newest.get(m[1]!)?.version ?? 0) < version) newest.set(m[1]!, { version, key });
  }
  const out = new Map<string, CommitRecord>();
  for (const [set, { key }] of newest) {
    const text = await storage.readObject(`${dir}/${key}`, signal);
    if (text !== undefined) out.set(set, parseCommitRecord(`${dir}/${key}`, text));
  }
  return out;
}

export type CommitOutcome =
  | { kind: 'committed'; version: number }
  /** `fenced`: `by` is the fence's id, `version` the latest record's (0: none). */
  | { kind: 'covered' | 'fenced'; by: string; version: number }
  /**
   * `offsetRanges`: what the latest record (a sibling's) covers, partition by partition: of this
   * copy's offsets, those are committed all the same, though not by this copy.
   */
  | { kind: 'behind'; by: string; version: number; offsetRanges: Record<string, RangeJson[]> };

/**
 * A fence of a replica set (a record under the cube's `fences/`): a failover's, of a lost set, or
 * a move's stop fence, of a source set some of whose replicas missed the release (`from`).
 */
export interface FenceRecord {
  id: string;
  replicaSet: string;
  /** partition → the highest epoch fenced: copies holding it under that epoch or older. */
  partitions: Record<string, number>;
  /**
   * partition → the first offset fenced (a move's stop offset: what the set read from there on
   * under the fenced epoch is the next owner's). Absent, or absent for a partition: every offset.
   */
  from?: Record<string, string>;
  /** The receiver that wrote it, for a person. */
  by: string;
  fencedAt: string;
  /** The cube's metadata.uid, as the operator asking for the fence said it; absent: not known. */
  cubeUid?: string;
}

/** One fence of a partition: its epoch, its id, and the first offset it fences (none: all). */
export interface PartitionFence {
  epoch: number;
  id: string;
  from?: bigint;
  /** The fence record's cubeUid, when it has one. */
  cubeUid?: string;
}

/** partition → every fence of it. */
export type Fences = Map<number, PartitionFence[]>;

/** The directory of a cube in deep storage: its windows' and its fences'. */
export function cubeDir(target: Pick<HandOffTarget, 'namespace' | 'cube'>): string {
  return [
    ...(target.namespace === undefined ? [] : [`namespace=${target.namespace}`]),
    target.cube,
  ].join('/');
}

const fencesDir = (cube: string, replicaSet: string): string =>
  `${cube}/fences/replicaSet=${replicaSet}`;

/** Every fence of one replica set of a cube, by partition. */
export async function fencesOf(
  storage: DeepStorage,
  cube: string,
  replicaSet: string,
  signal?: AbortSignal,
): Promise<Fences> {
  const dir = fencesDir(cube, replicaSet);
  const out: Fences = new Map();
  for (const key of await storage.listKeys(dir, signal)) {
    if (!key.endsWith('.json')) continue;
    const text = await storage.readObject(`${dir}/${key}`, signal);
    if (text === undefined) continue;
    // A fence that cannot be read cannot be honoured: its error stops the commit, never skips it.
    const fence = parseFenceRecord(`${dir}/${key}`, text);
    for (const [p, epoch] of Object.entries(fence.partitions)) {
      const from = fence.from?.[p];
      const list = out.get(Number(p)) ?? [];
      list.push({
        epoch,
        id: fence.id,
        ...(from === undefined ? {} : { from: BigInt(from) }),
        ...(fence.cubeUid === undefined ? {} : { cubeUid: fence.cubeUid }),
      });
      out.set(Number(p), list);
    }
  }
  return out;
}

/** `fences` without those of another cube of the same name (ofAnotherCube). */
export function fencesOfCube(fences: Fences, cubeUid: string | undefined): Fences {
  if (cubeUid === undefined) return fences;
  const out: Fences = new Map();
  for (const [p, list] of fences) {
    const own = list.filter((f) => !ofAnotherCube(f, cubeUid));
    if (own.length > 0) out.set(p, own);
  }
  return out;
}

/** `ranges` cut to the offsets at or past `from` (all of them when `from` is undefined). */
function rangesFrom(ranges: OffsetRange[], from: bigint | undefined): OffsetRange[] {
  if (from === undefined) return ranges;
  return ranges.flatMap((r) =>
    r.to <= from ? [] : [{ from: r.from < from ? from : r.from, to: r.to }],
  );
}

/**
 * The id of a fence that one of `handOffs` falls under — offsets of a partition under an epoch it
 * fenced, at or past the fence's first offset, beyond `committed` (the window's latest record) —
 * if any.
 */
export function fencedIn(
  handOffs: CommitRecord['handOffs'],
  fences: Fences,
  committed: Coverage = new Map(),
): string | undefined {
  if (fences.size === 0) return undefined;
  for (const h of handOffs)
    for (const [p, ranges] of Object.entries(h.offsetRanges)) {
      const epoch = h.epochs[p];
      if (epoch === undefined || ranges.length === 0) continue;
      for (const fence of fences.get(Number(p)) ?? []) {
        if (epoch > fence.epoch) continue;
        const held = rangesFrom(rangesFromJson(ranges), fence.from);
        if (held.length > 0 && !covers(committed, new Map([[Number(p), held]]))) return fence.id;
      }
    }
  return undefined;
}

/**
 * Time between reading the fences and creating a record past which the record is not created
 * but the fences read again: with a failover's grace (fenceRequest.graceMs, 5 s) above it, a
 * commit under way when a fence is written lands before the fence's reader looks, or not at all.
 * A receiver frozen between this check and its create is caught by the fence's barrier instead
 * (windowBarrier: its version is taken).
 */
export const maxFenceReadAgeMs = 2_000;

/** Attempts at one commit when other writers keep taking the next version first. */
const maxRaces = 8;

/**
 * Commits this replica's hand-offs of one window if they cover more than the set's latest record.
 * Throws when the copy is stale (see decideCommit) or storage fails: the hand-off is tried again.
 */
export async function commitWindow(o: {
  storage: DeepStorage;
  target: HandOffTarget;
  windowStart: number;
  mine: CommitRecord['handOffs'];
  now?: () => number;
  signal?: AbortSignal | undefined;
}): Promise<CommitOutcome> {
  const dir = windowDir(o.target, o.windowStart);
  const clock = o.now ?? Date.now;
  // Why attempts came to nothing: another writer took the version, or the reads took so long
  // that the fences had to be read again (slow deep storage, a starved process).
  let raced = 0;
  let slowReads = 0;
  for (let race = 0; race < maxRaces; race++) {
    const fencesReadAt = clock();
    const fences = await fencesOf(o.storage, cubeDir(o.target), o.target.replicaSet, o.signal);
    const records = await latestRecords(o.storage, dir, o.signal);
    const latest = records.get(o.target.replicaSet);
    const decision = decideCommit({
      receiver: o.target.receiver,
      mine: o.mine,
      latest,
      otherSets: [...records].filter(([set]) => set !== o.target.replicaSet).map(([, r]) => r),
      fences,
      cubeUid: o.target.cubeUid,
    });
    if (decision.kind === 'stale')
      throw new Error(`not committed: this copy is stale: ${decision.detail}`);
    // This replica's own record covers its copy already (a generation committed with another).
    if (decision.kind === 'covered' && decision.by === o.target.receiver)
      return { kind: 'committed', version: latest!.version };
    if (decision.kind === 'fenced')
      return { kind: 'fenced', by: decision.by, version: latest?.version ?? 0 };
    if (decision.kind === 'behind')
      return {
        kind: 'behind',
        by: decision.by,
        version: latest!.version,
        offsetRanges: latest!.offsetRanges,
      };
    if (decision.kind !== 'commit')
      return { kind: decision.kind, by: decision.by, version: latest!.version };
    // Past the latest record whosever it is: versions are taken by compare-and-set, one lineage.
    const version = (latest?.version ?? 0) + 1;
    const record: CommitRecord = {
      version,
      receiver: o.target.receiver,
      replicaSet: o.target.replicaSet,
      windowStart: new Date(o.windowStart).toISOString(),
      handOffs: decision.handOffs,
      offsetRanges: rangeMapToJson(coverageOf(decision.handOffs)),
      committedAt: new Date(clock()).toISOString(),
      ...(o.target.cubeUid === undefined ? {} : { cubeUid: o.target.cubeUid }),
    };
    // A fence written since they were read must be seen before a record is created (see
    // maxFenceReadAgeMs): the fences are read again.
    if (clock() - fencesReadAt > maxFenceReadAgeMs) {
      slowReads += 1;
      continue;
    }
    const key = recordKey(dir, o.target.replicaSet, version);
    if (await o.storage.createObject(key, JSON.stringify(record, null, 2), o.signal))
      return { kind: 'committed', version };
    raced += 1;
  }
  throw new Error(notCommittedMessage(raced, slowReads));
}

/** Why `maxRaces` attempts at a commit created no record: each attempt's reason, counted. */
export function notCommittedMessage(raced: number, slowReads: number): string {
  const reasons = [
    ...(raced > 0 ? [`${raced} found a newer commit record of the window written meanwhile`] : []),
    ...(slowReads > 0
      ? [
          `${slowReads} took over ${maxFenceReadAgeMs} ms to read the fences and records (deep storage slow to answer), so the fences had to be read again`,
        ]
      : []),
  ];
  return `not committed after ${raced + slowReads} attempts: ${reasons.join('; ')}`;
}

/**
 * The fence's barrier in one window of the lost set: the set's next record version, taken by the
 * fencer (a copy of the latest record, or an empty one), unless this fence took one already.
 * Answers the window's latest record from then on. A commit of the set that read the fences
 * before the fence was written and stalled past the grace (a frozen receiver, between its read
 * and its create) then finds its version taken and reads the fences again: refused. One that
 * created its record first is what the barrier copies, so the fencer counts it as committed.
 */
async function windowBarrier(o: {
  storage: DeepStorage;
  dir: string;
  replicaSet: string;
  fence: FenceRecord;
  signal?: AbortSignal | undefined;
}): Promise<CommitRecord> {
  const windowStart = Number(/window=(-?\d+)$/.exec(o.dir)?.[1]);
  for (let race = 0; race < maxRaces; race++) {
    const newest = (await latestRecords(o.storage, o.dir, o.signal)).get(o.replicaSet);
    // Another cube's record of the same name is none of this cube's: the barrier is an empty one.
    const latest = ofAnotherCube(newest, o.fence.cubeUid) ? undefined : newest;
    if (latest?.fence === o.fence.id) return latest;
    const version = (newest?.version ?? 0) + 1;
    const barrier: CommitRecord = latest
      ? { ...latest, version, fence: o.fence.id }
      : {
          version,
          receiver: o.fence.by,
          replicaSet: o.replicaSet,
          windowStart: Number.isFinite(windowStart) ? new Date(windowStart).toISOString() : '',
          handOffs: [],
          offsetRanges: {},
          committedAt: o.fence.fencedAt,
          ...(o.fence.cubeUid === undefined ? {} : { cubeUid: o.fence.cubeUid }),
          fence: o.fence.id,
        };
    const key = recordKey(o.dir, o.replicaSet, version);
    if (await o.storage.createObject(key, JSON.stringify(barrier, null, 2), o.signal))
      return barrier;
  }
  throw new Error(
    `fence ${o.fence.id} of replica set ${o.replicaSet}: ${maxRaces} attempts each found a newer commit record of ${o.dir} written meanwhile`,
  );
}

/**
 * Fences a replica set of a cube — a lost one (a failover), or a source of a move some of whose
 * replicas missed the release (`from`: the stop offsets) — writes the fence record (once: the
 * same id twice finds it written), waits `graceMs` for a commit of that set already under way,
 * takes the set's next record version of every window it handed off to (windowBarrier: a commit
 * that stalled past the grace cannot land after the fence is read), then answers, per fenced
 * partition, the offsets the set's latest commit records cover. From the fence on, that set
 * writes no record holding a fenced partition under a fenced epoch (from `from` on, if given)
 * beyond what its records hold.
 */
export async function fenceReplicaSet(o: {
  storage: DeepStorage;
  cube: Pick<HandOffTarget, 'namespace' | 'cube'>;
  replicaSet: string;
  id: string;
  partitions: Record<string, number>;
  from?: Record<string, string> | undefined;
  by: string;
  graceMs: number;
  /** The fenced cube's metadata.uid, written into the fence and its barriers; absent: not known. */
  cubeUid?: string | undefined;
  now?: () => number;
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  signal?: AbortSignal | undefined;
}): Promise<{ committed: Map<number, OffsetRange[]>; records: number }> {
  const cube = cubeDir(o.cube);
  const fence: FenceRecord = {
    id: o.id,
    replicaSet: o.replicaSet,
    partitions: o.partitions,
    ...(o.from && Object.keys(o.from).length > 0 ? { from: o.from } : {}),
    by: o.by,
    fencedAt: new Date(o.now?.() ?? Date.now()).toISOString(),
    ...(o.cubeUid === undefined ? {} : { cubeUid: o.cubeUid }),
  };
  const key = `${fencesDir(cube, o.replicaSet)}/${o.id}.json`;
  await o.storage.createObject(key, JSON.stringify(fence, null, 2), o.signal);
  const sleep =
    o.sleep ??
    ((ms: number, signal?: AbortSignal) =>
      new Promise<void>((resolve, reject) => {
        const timer = setTimeout(resolve, ms);
        signal?.addEventListener('abort', () => {
          clearTimeout(timer);
          reject(signal.reason as Error);
        });
      }));
  if (o.graceMs > 0) await sleep(o.graceMs, o.signal);
  const fenced = new Set(Object.keys(o.partitions).map(Number));
  const committed = new Map<number, OffsetRange[]>();
  let records = 0;
  // Every window the set handed off to (a commit writes its hand-offs first), committed or not.
  const windows = new Set<string>();
  for (const k of await o.storage.listKeys(cube, o.signal)) {
    const m = /^(window=[^/]+)\/replicaSet=([^/]+)\//.exec(k);
    if (m && m[2] === o.replicaSet) windows.add(m[1]!);
  }
  for (const window of windows) {
    const record = await windowBarrier({
      storage: o.storage,
      dir: `${cube}/${window}`,
      replicaSet: o.replicaSet,
      fence,
      signal: o.signal,
    });
    if (record.handOffs.length === 0) continue;
    records += 1;
    for (const [p, ranges] of rangeMapFromJson(record.offsetRanges)) {
      if (!fenced.has(p)) continue;
      const acc = committed.get(p) ?? [];
      for (const r of ranges) addRange(acc, r.from, r.to);
      committed.set(p, acc);
    }
  }
  return { committed, records };
}
