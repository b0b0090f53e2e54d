// The checkpoint's encoding on disk, versioned: a small manifest (positions, counters, and the name
// of one record per segment), the segment records, each rewritten only when its segment changes,
// and the fragments of rows they name. Version 1 held every segment inline in one file; version 2
// has records; version 3 holds a scaled sum's units in fragments (versions before held its float
// sum). Older versions are still read, and written as the current one at the next checkpoint. A
// version this receiver does not know is refused by name.
import type { CubeSchema, KafkaSource } from '../api/cube.ts';
import {
  type Units,
  exactScaleOf,
  toUnits,
  unitsFromText,
  unitsToText,
} from '../api/scaled-sum.ts';
import type { PartitionStateName } from '../protocol/admin-api.ts';
import {
  type OffsetRange,
  type RangeJson,
  rangeMapFromJson,
  rangeMapToJson,
  rangesFromJson,
  rangesToJson,
} from './offset-ranges.ts';
import type { LostOffsetsJson } from './lost-offsets.ts';
import type { PartitionState } from './partition-state.ts';
import { rejectReasons } from './event.ts';
import {
  type PartitionClock,
  type Row,
  type Segment,
  type SegmentState,
  epochsToJson,
  reasonCountsFromJson,
  reasonCountsToJson,
  rejectedFromJson,
  rejectedToJson,
} from './segments.ts';

export const checkpointVersion = 3;
const readableVersions = [1, 2, 3];
/** The first version whose fragments hold a scaled sum's units. */
const unitsSince = 3;

export interface PartitionCheckpoint {
  partition: number;
  epoch: number;
  state: PartitionStateName;
  position: string;
  stopOffset: string | null;
  watermark: number | null;
  currentWindow: number | null;
  pending: RangeJson[];
  /**
   * Rejected records among `pending`, by reason; absent in checkpoints written before they were
   * counted (not known then, unless nothing was pending).
   */
  pendingRejected?: Record<string, number>;
  /** PartitionState.elsewhere; absent when none. */
  elsewhere?: RangeJson[];
}

export interface SegmentCheckpoint {
  /** The segment's key (segments.ts), absent when it is the window start (generation 0). */
  key?: number;
  windowStart: number;
  windowEnd: number;
  state: SegmentState;
  fragments: string[];
  ranges: Record<string, RangeJson[]>;
  epochs: Record<string, number>;
  handedOffRows?: number;
  handOffPath?: string;
  /** Absent in checkpoints written before retention: the restart then counts as the hand-off. */
  handedOffAt?: number;
  /** Segment.rejected; absent when not known (and in checkpoints written before it was kept). */
  rejected?: Record<string, Record<string, number>>;
}

/** What the manifest says besides its segments. */
export interface CheckpointHeader {
  cube: string;
  /** The CubeAssignment's namespace; absent in checkpoints written before receivers knew it. */
  namespace?: string;
  /** The CubeAssignment's metadata.uid; absent while the receiver was not told it. */
  cubeUid?: string;
  replicaSet: string;
  source: KafkaSource;
  schema: CubeSchema;
  partitions: PartitionCheckpoint[];
  rejected: Record<string, number>;
  /** Absent in checkpoints written before it was counted. */
  ingested?: number;
  fragmentSeq: number;
  /** Windows before this one were handed off and purged; absent when none was. */
  purgedBelow?: number | null;
  /**
   * partition → offsets of the segments purged so far; absent in checkpoints written before it
   * was kept (the receiver's coverage is unknown then, once a segment was purged).
   */
  purged?: Record<string, RangeJson[]>;
  /** partition → offsets Kafka deleted before they were read; absent when none was. */
  lost?: Record<string, LostOffsetsJson>;
}

/** A checkpoint as read back, whatever its version: every segment with its record. */
export interface CubeCheckpoint extends CheckpointHeader {
  version: number;
  segments: SegmentCheckpoint[];
}

/** The manifest of versions 2 and 3: the header and, per segment, the file holding its record. */
export interface CheckpointManifest extends CheckpointHeader {
  version: 2 | 3;
  /** Per segment, its key (named `windowStart`: a window's first segment has it as key). */
  segments: { windowStart: number; record: string }[];
  recordSeq: number;
}

export class CheckpointVersionError extends Error {
  override readonly name = 'CheckpointVersionError';
  constructor(file: string, version: unknown) {
    super(
      `${file} has checkpoint version ${JSON.stringify(version)}; this receiver reads versions ${readableVersions.join(', ')} — it was written by a newer receiver, or is not a checkpoint`,
    );
  }
}

function versionOf(file: string, json: unknown): number {
  const version = (json as { version?: unknown } | null)?.version;
  if (typeof version !== 'number' || !readableVersions.includes(version))
    throw new CheckpointVersionError(file, version);
  return version;
}

/**
 * A manifest file's text: a manifest (version 2 or later) whose segment records are still to be
 * read, or a version-1 checkpoint holding them all.
 */
export function decodeManifest(
  file: string,
  text: string,
): { version: 1; checkpoint: CubeCheckpoint } | { version: 2 | 3; manifest: CheckpointManifest } {
  const json: unknown = JSON.parse(text);
  const version = versionOf(file, json);
  return version === 1
    ? { version: 1, checkpoint: json as CubeCheckpoint }
    : { version: version as 2 | 3, manifest: json as CheckpointManifest };
}

export const encodeManifest = (manifest: Omit<CheckpointManifest, 'version'>): string =>
  JSON.stringify({ version: checkpointVersion, ...manifest });

export function decodeSegmentRecord(file: string, text: string): SegmentCheckpoint {
  const json: unknown = JSON.parse(text);
  versionOf(file, json);
  const record = { ...(json as SegmentCheckpoint & { version?: number }) };
  delete record.version;
  return record;
}

export const encodeSegmentRecord = (record: SegmentCheckpoint): string =>
  JSON.stringify({ version: checkpointVersion, ...record });

export function partitionCheckpoint(
  ps: PartitionState,
  clock: Readonly<PartitionClock>,
): PartitionCheckpoint {
  return {
    partition: ps.partition,
    epoch: ps.epoch,
    state: ps.state,
    position: ps.position.toString(),
    stopOffset: ps.stopOffset?.toString() ?? null,
    watermark: clock.watermark,
    currentWindow: clock.currentWindow,
    pending: rangesToJson(clock.pending),
    ...(clock.pendingRejected
      ? { pendingRejected: reasonCountsToJson(clock.pendingRejected) }
      : {}),
    ...(ps.elsewhere?.length ? { elsewhere: rangesToJson(ps.elsewhere) } : {}),
  };
}

/** A partition as a checkpoint recorded it, and its clock; silent from `now` on. */
export function restoredPartition(
  p: PartitionCheckpoint,
  now: number,
): { state: PartitionState; clock: PartitionClock } {
  return {
    state: {
      partition: p.partition,
      epoch: p.epoch,
      state: p.state,
      position: BigInt(p.position),
      stopOffset: p.stopOffset === null ? null : BigInt(p.stopOffset),
      highWatermark: null,
      lastRecordAt: now,
      generation: 0,
      ...(p.elsewhere ? { elsewhere: rangesFromJson(p.elsewhere) } : {}),
    },
    clock: {
      watermark: p.watermark,
      currentWindow: p.currentWindow,
      pending: rangesFromJson(p.pending),
      pendingRejected: p.pendingRejected
        ? reasonCountsFromJson(p.pendingRejected)
        : p.pending.length === 0
          ? new Array<number>(rejectReasons.length).fill(0)
          : null,
    },
  };
}

/** The checkpoint header's record of purged offsets: absent when unknown. */
export const purgedCheckpoint = (
  purged: ReadonlyMap<number, OffsetRange[]> | null,
): Pick<CheckpointHeader, 'purged'> => (purged ? { purged: rangeMapToJson(new Map(purged)) } : {});

/** A checkpointed segment's key: its window start unless it says otherwise. */
export const segmentKey = (s: Pick<SegmentCheckpoint, 'key' | 'windowStart'>): number =>
  s.key ?? s.windowStart;

export function segmentCheckpoint(
  s: Segment,
  fragments: string[],
  handOffPath: string | undefined,
): SegmentCheckpoint {
  return {
    ...(s.key === s.windowStart ? {} : { key: s.key }),
    windowStart: s.windowStart,
    windowEnd: s.windowEnd,
    state: s.state,
    fragments: s.state === 'HANDED_OFF' ? [] : fragments,
    ranges: rangeMapToJson(s.ranges),
    epochs: epochsToJson(s.epochs),
    ...(s.handedOffRows === undefined ? {} : { handedOffRows: s.handedOffRows }),
    ...(s.handedOffAt === undefined ? {} : { handedOffAt: s.handedOffAt }),
    ...(handOffPath === undefined ? {} : { handOffPath }),
    ...(s.rejected ? { rejected: rejectedToJson(s.rejected) } : {}),
  };
}

/** A segment as SegmentManager.restoreSegment takes it (rows come from the fragments). */
export function restoredSegment(
  s: SegmentCheckpoint,
  now: number,
): Omit<Segment, 'rows' | 'delta'> {
  return {
    key: segmentKey(s),
    windowStart: s.windowStart,
    windowEnd: s.windowEnd,
    state: s.state,
    ranges: rangeMapFromJson(s.ranges),
    epochs: new Map(Object.entries(s.epochs).map(([p, e]) => [Number(p), e])),
    ...(s.handedOffRows === undefined ? {} : { handedOffRows: s.handedOffRows }),
    ...(s.state === 'HANDED_OFF' ? { handedOffAt: s.handedOffAt ?? now } : {}),
    ...(s.rejected ? { rejected: rejectedFromJson(s.rejected) } : {}),
  };
}

/**
 * A row as a fragment file holds it (one JSON line each): a scaled sum's units as a string of
 * digits, exact past 2^53; every other measure a number.
 */
export interface FragmentRow {
  dimensions: string[];
  values: (number | string)[];
  /** partition → epoch of the partitions that touched the row (row-budget.ts), when known. */
  touchedBy?: Map<number, number>;
}

/** The measures whose values are units: a sum with a scale. */
export const unitMeasures = (schema: Pick<CubeSchema, 'measures'>): boolean[] =>
  schema.measures.map((m) => exactScaleOf(m) !== undefined);

export const fragmentRow = (row: Row, units: readonly boolean[]): FragmentRow => ({
  dimensions: row.dimensions,
  values: row.values.map((v, i) => (units[i] ? unitsToText(v) : (v as number))),
  ...(row.touchedBy ? { touchedBy: row.touchedBy } : {}),
});

/** Whether a checkpoint's fragments hold a scaled sum's float (written before units were kept). */
export const holdsFloatSums = (version: number, schema: Pick<CubeSchema, 'measures'>): boolean =>
  version < unitsSince && schema.measures.some((m) => exactScaleOf(m) !== undefined);

/**
 * A fragment's row read back. A checkpoint of a version before units holds a scaled sum's float
 * sum: it is rounded to units here, once (the restored segment is written anew as units).
 */
export function rowOfFragment(
  row: FragmentRow,
  schema: Pick<CubeSchema, 'measures'>,
  version: number,
): Row {
  return {
    dimensions: row.dimensions,
    values: row.values.map((v, i): Units => {
      const scale = exactScaleOf(schema.measures[i]!);
      if (scale === undefined) return Number(v);
      if (typeof v === 'string') return unitsFromText(v);
      if (version >= unitsSince) return v;
      return unitsFromText(toUnits(v, scale).toString());
    }),
    ...(row.touchedBy ? { touchedBy: row.touchedBy } : {}),
  };
}
