// Hand-off of a sealed segment to deep storage: its rows as an Arrow IPC file (readable by
// pyarrow, DuckDB, Polars, …) and a manifest saying what it covers, written last (deep-storage.ts),
// so a reader never sees half a hand-off; a repeated hand-off finds it done. A sum with a scale
// is an Int64 column of its units (format 2); hand-offs of format 1 held its float sum.
import { createHash } from 'node:crypto';
import {
  Float64,
  Int64,
  RecordBatch,
  Schema,
  Table,
  TimestampMillisecond,
  Utf8,
  type Vector,
  tableToIPC,
  vectorFromArray,
} from 'apache-arrow';
import type { CubeSchema } from '../api/cube.ts';
import { exactScaleOf } from '../api/scaled-sum.ts';
import type { DeepStorage } from './deep-storage.ts';
import { type OffsetRange, type RangeJson, rangeMapToJson } from './offset-ranges.ts';
import { type Segment, epochsToJson, rejectedToJson } from './segments.ts';

/**
 * The hand-off format this receiver writes. 2: a sum with a scale is an Int64 column of its
 * integer count of 10^-scale units (`scales` says each one's scale). 1 (manifests without
 * `formatVersion`): every sum was a Float64 column.
 */
export const handOffFormatVersion = 2;

export interface HandOffManifest {
  /** Absent in hand-offs of format 1. */
  formatVersion?: number;
  /**
   * Measure → scale of each sum with one, whose column holds units: 36098535 at scale 2 is
   * 360985.35. Absent when the cube has none (and in hand-offs of format 1).
   */
  scales?: Record<string, number>;
  /** The CubeAssignment's namespace; absent when the receiver did not know it yet. */
  namespace?: string;
  cube: string;
  /** The CubeAssignment's metadata.uid; absent when the receiver did not know it. */
  cubeUid?: string;
  replicaSet: string;
  receiver: string;
  windowStart: string;
  windowEnd: string;
  /** partition → epoch under which its offsets were consumed. */
  epochs: Record<string, number>;
  /** partition → offset ranges [from, to) the segment covers. */
  offsetRanges: Record<string, RangeJson[]>;
  /**
   * partition → offsets [from, to) Kafka deleted before they were read, right before a range of
   * this segment; with the offset ranges they tile the log. Absent when there are none.
   */
  lostRanges?: Record<string, RangeJson[]>;
  /**
   * partition → reason → records rejected among its offsets (no row holds them); absent when the
   * receiver did not know (a segment restored from a checkpoint of before), or wrote before it was kept.
   */
  rejected?: Record<string, Record<string, number>>;
  rowCount: number;
  dataFile: string;
  schema: CubeSchema;
}

export interface HandOffTarget {
  /** Undefined for a cube restored from a checkpoint written before receivers knew namespaces. */
  namespace?: string | undefined;
  cube: string;
  /**
   * The CubeAssignment's metadata.uid, as the operator's assign said it; undefined while not known
   * (a cube restored from a checkpoint written before receivers were told it).
   */
  cubeUid?: string | undefined;
  replicaSet: string;
  receiver: string;
  schema: CubeSchema;
}

/**
 * Where a segment's hand-off lives, relative to the deep storage's root (a directory, or a
 * bucket and prefix): `namespace=<ns>/<cube>/window=…/replicaSet=…/<receiver>.e<epoch>.<digest>`, so that cubes of one
 * name in two namespaces stay apart. A cube whose namespace the receiver does not know yet
 * (restored from a checkpoint of before) keeps the layout of then, `<cube>/window=…`; `=` is in no
 * DNS label, so the two cannot meet. A receiver that gets partitions of a cube back after a move
 * holds a new segment of the same window, under the partition's new epoch but not always under a
 * new highest epoch (another partition of the old segment may have had a higher one), so the name
 * carries a digest of what the segment covers — its partitions' epochs and offset ranges — beside
 * the highest epoch, and the cube's uid when known: a cube made again under the same name reads
 * the same offsets under the same epochs, and its hand-offs are its own. A sealed segment's ranges
 * never change, so a repeated hand-off of it finds its own directory.
 */
export function handOffKey(
  t: HandOffTarget,
  segment: Pick<Segment, 'windowStart' | 'epochs' | 'ranges'>,
): string {
  const epoch = Math.max(0, ...segment.epochs.values());
  const covers = createHash('sha256')
    .update(
      JSON.stringify({
        epochs: epochsToJson(segment.epochs),
        ranges: rangeMapToJson(segment.ranges),
        ...(t.cubeUid === undefined ? {} : { cubeUid: t.cubeUid }),
      }),
    )
    .digest('hex')
    .slice(0, 12);
  return [
    ...(t.namespace === undefined ? [] : [`namespace=${t.namespace}`]),
    t.cube,
    `window=${segment.windowStart}`,
    `replicaSet=${t.replicaSet}`,
    `${t.receiver}.e${epoch}.${covers}`,
  ].join('/');
}

/** A sum's units as an Int64 value, or a RangeError naming where it does not fit. */
function int64Units(value: number | bigint, measure: string, segment: Segment): bigint {
  const units = BigInt(value);
  if (units > 2n ** 63n - 1n || units < -(2n ** 63n))
    throw new RangeError(
      `the sum of ${measure} in a row of window ${new Date(segment.windowStart).toISOString()} is ${units} units, past what an Int64 column holds`,
    );
  return units;
}

export function segmentTable(schema: CubeSchema, segment: Segment): Table {
  const rows = [...segment.rows.values()];
  const columns: Record<string, Vector> = {
    window_start: vectorFromArray(
      rows.map(() => segment.windowStart),
      new TimestampMillisecond(),
    ),
  };
  schema.dimensions.forEach((name, i) => {
    columns[name] = vectorFromArray(
      rows.map((r) => r.dimensions[i] ?? ''),
      new Utf8(),
    );
  });
  schema.measures.forEach((m, i) => {
    columns[m.name] =
      m.function === 'count'
        ? vectorFromArray(
            rows.map((r) => BigInt(r.values[i] ?? 0)),
            new Int64(),
          )
        : exactScaleOf(m) !== undefined
          ? vectorFromArray(
              rows.map((r) => int64Units(r.values[i] ?? 0, m.name, segment)),
              new Int64(),
            )
          : vectorFromArray(
              rows.map((r) => Number(r.values[i] ?? 0)),
              new Float64(),
            );
  });
  // The format and each scale also in the file's own metadata, for a reader of the file alone.
  const table = new Table(columns);
  const scales = scalesOf(schema);
  const withMetadata = new Schema(
    table.schema.fields.map((f) =>
      Object.hasOwn(scales, f.name)
        ? f.clone({ metadata: new Map([['streamcube.scale', String(scales[f.name])]]) })
        : f,
    ),
    new Map([['streamcube.formatVersion', String(handOffFormatVersion)]]),
  );
  return new Table(
    withMetadata,
    table.batches.map((b) => new RecordBatch(withMetadata, b.data)),
  );
}

/** Measure → scale of the schema's sums with one. */
export const scalesOf = (schema: Pick<CubeSchema, 'measures'>): Record<string, number> =>
  Object.fromEntries(
    schema.measures.flatMap((m) => {
      const scale = exactScaleOf(m);
      return scale === undefined ? [] : [[m.name, scale]];
    }),
  );

/**
 * Writes the segment to deep storage, or finds it already there; returns where it is. The Arrow
 * file is made before the first write, so the segment may change meanwhile without tearing it.
 */
export async function handOffSegment(
  storage: DeepStorage,
  target: HandOffTarget,
  segment: Segment,
  lost: Map<number, OffsetRange[]> = new Map(),
  signal?: AbortSignal,
): Promise<string> {
  const key = handOffKey(target, segment);
  const location = storage.locationOf(key);
  const scales = scalesOf(target.schema);
  const manifest: HandOffManifest = {
    formatVersion: handOffFormatVersion,
    ...(Object.keys(scales).length > 0 ? { scales } : {}),
    ...(target.namespace === undefined ? {} : { namespace: target.namespace }),
    cube: target.cube,
    ...(target.cubeUid === undefined ? {} : { cubeUid: target.cubeUid }),
    replicaSet: target.replicaSet,
    receiver: target.receiver,
    windowStart: new Date(segment.windowStart).toISOString(),
    windowEnd: new Date(segment.windowEnd).toISOString(),
    epochs: epochsToJson(segment.epochs),
    offsetRanges: rangeMapToJson(segment.ranges),
    ...(lost.size > 0 ? { lostRanges: rangeMapToJson(lost) } : {}),
    ...(segment.rejected ? { rejected: rejectedToJson(segment.rejected) } : {}),
    rowCount: segment.rows.size,
    dataFile: 'data.arrow',
    schema: target.schema,
  };
  const data = tableToIPC(segmentTable(target.schema, segment), 'file');
  const existingText = await storage.readManifest(key, signal);
  if (existingText !== undefined) {
    const existing = JSON.parse(existingText) as HandOffManifest;
    if (JSON.stringify(existing.offsetRanges) === JSON.stringify(manifest.offsetRanges))
      return location;
    throw new Error(
      `deep storage already holds a different hand-off of window ${manifest.windowStart} at ${location}`,
    );
  }
  await storage.writeHandOff(
    key,
    [{ name: manifest.dataFile, body: data }],
    JSON.stringify(manifest, null, 2),
    signal,
  );
  return location;
}
