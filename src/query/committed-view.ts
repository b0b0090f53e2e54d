// The committed view of a cube in deep storage, read by the committed-view rule (hand-off-commit.ts):
// per window and replica set, the newest commit record and the hand-offs it lists; every other
// hand-off is a copy nobody committed. The one reader of it: the query service and the tests.
import { tableFromIPC } from 'apache-arrow';
import type { CubeSchema } from '../api/cube.ts';
import { exactScaleOf, toUnits } from '../api/scaled-sum.ts';
import type { DeepStorage } from '../receiver/deep-storage.ts';
import { type HandOffManifest, handOffFormatVersion } from '../receiver/hand-off.ts';
import {
  type CommitRecord,
  commitRecordName,
  cubeDir,
  ofAnotherCube,
} from '../receiver/hand-off-commit.ts';

/**
 * Which cube: its namespace (absent for the layout of before namespaces) and name, and its
 * metadata.uid when known (records of another uid are another cube's of the same name).
 */
export interface CommittedCube {
  namespace?: string | undefined;
  cube: string;
  uid?: string | undefined;
}

/** One window of one replica set as its newest commit record says it is. */
export interface CommittedWindow {
  windowStart: number;
  replicaSet: string;
  /** The record's directory, relative to the storage root (`…/window=…/replicaSet=…`). */
  dir: string;
  record: CommitRecord;
  /** Keys of the hand-offs the record lists, relative to the storage root, in its order. */
  handOffKeys: string[];
  /**
   * True when the window holds no record of this cube, only another cube's of the same name
   * (`record` is the newest of those): none of its hand-offs are this cube's.
   */
  otherCube?: boolean;
}

/** Commit records read at once. */
const recordsAtOnce = 32;

const recordKey = /^window=(-?\d+)\/replicaSet=([^/]+)\/commit\.(\d+)\.json$/;

/** Reads the text of a commit record: storage itself, or a cache in front of it (records never change). */
export type RecordReader = (key: string, signal?: AbortSignal) => Promise<string | undefined>;

/** Per window and replica set (`window=…/replicaSet=…`), the newest record version listed. */
export type RecordVersions = Map<
  string,
  { windowStart: number; replicaSet: string; version: number }
>;

/**
 * Adds the commit records among `keys` (relative to the cube's directory) to `versions`, keeping
 * the newest of each window and replica set; returns those that were new or newer.
 */
export function addRecordKeys(versions: RecordVersions, keys: Iterable<string>): string[] {
  const changed = new Set<string>();
  for (const key of keys) {
    const m = recordKey.exec(key);
    if (!m) continue;
    const [, start, replicaSet, version] = m as unknown as [string, string, string, string];
    const at = `window=${start}/replicaSet=${replicaSet}`;
    if ((versions.get(at)?.version ?? 0) < Number(version)) {
      versions.set(at, { windowStart: Number(start), replicaSet, version: Number(version) });
      changed.add(at);
    }
  }
  return [...changed];
}

/** The newest commit record of every window and replica set of the cube: one listing of it all. */
export async function listRecordVersions(
  storage: DeepStorage,
  cube: CommittedCube,
  signal?: AbortSignal,
): Promise<RecordVersions> {
  const versions: RecordVersions = new Map();
  addRecordKeys(versions, await storage.listKeys(cubeDir(cube), signal));
  return versions;
}

/**
 * Every window's newest commit record of each replica set of the cube. A record that is a fence's
 * barrier with no hand-offs stays in the list (it says the set committed nothing of the window).
 * With the cube's uid, the newest record OF THIS CUBE (readRecords): another cube's, newer or not,
 * never hides it.
 */
export async function readCommittedView(
  storage: DeepStorage,
  cube: CommittedCube,
  signal?: AbortSignal,
  readRecord: RecordReader = (key, s) => storage.readObject(key, s),
): Promise<CommittedWindow[]> {
  return readRecords(cube, await listRecordVersions(storage, cube, signal), readRecord, signal);
}

/**
 * The records `versions` names, read (`readRecord`) and sorted by window and replica set. When the
 * newest is another cube's of the same name (ofAnotherCube, with `cube.uid`), older versions are
 * read down to this cube's newest; below another cube's record, a record without a uid is that
 * cube's earlier one, not this cube's. A window with none of this cube's is `otherCube`.
 */
export async function readRecords(
  cube: CommittedCube,
  versions: RecordVersions,
  readRecord: RecordReader,
  signal?: AbortSignal,
): Promise<CommittedWindow[]> {
  const root = cubeDir(cube);
  // Records read a bounded number at once: a month of 1-minute windows is tens of thousands of
  // them, more than a process may hold files or connections open.
  const entries = [...versions];
  const out = new Array<CommittedWindow | undefined>(entries.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(recordsAtOnce, entries.length) }, async () => {
      while (next < entries.length) {
        const i = next++;
        const [at, n] = entries[i]!;
        const dir = `${root}/${at}`;
        const text = await readRecord(`${dir}/${commitRecordName(n.version)}`, signal);
        if (text === undefined) continue;
        const newest = JSON.parse(text) as CommitRecord;
        const own = ofAnotherCube(newest, cube.uid)
          ? await newestOfCube(dir, n.version - 1, cube.uid!, readRecord, signal)
          : newest;
        const record = own ?? newest;
        out[i] = {
          windowStart: n.windowStart,
          replicaSet: n.replicaSet,
          dir,
          record,
          handOffKeys: record.handOffs.map((h) => `${dir}/${h.dir}`),
          ...(own ? {} : { otherCube: true }),
        };
      }
    }),
  );
  return out
    .filter((w) => w !== undefined)
    .sort((a, b) => a.windowStart - b.windowStart || (a.replicaSet < b.replicaSet ? -1 : 1));
}

/** The newest record of `dir` at or below `version` whose cubeUid is `uid`, if any. */
async function newestOfCube(
  dir: string,
  version: number,
  uid: string,
  readRecord: RecordReader,
  signal: AbortSignal | undefined,
): Promise<CommitRecord | undefined> {
  for (let v = version; v >= 1; v--) {
    const text = await readRecord(`${dir}/${commitRecordName(v)}`, signal);
    if (text === undefined) continue;
    const record = JSON.parse(text) as CommitRecord;
    if (record.cubeUid === uid) return record;
  }
  return undefined;
}

/** The manifest of the hand-off at `key`; throws when it is missing (a record lists only whole ones). */
export async function readHandOffManifest(
  storage: DeepStorage,
  key: string,
  signal?: AbortSignal,
): Promise<HandOffManifest> {
  const text = await storage.readManifest(key, signal);
  if (text === undefined)
    throw new Error(`a commit record lists ${storage.locationOf(key)}, which has no manifest`);
  return JSON.parse(text) as HandOffManifest;
}

/** One row of a hand-off: its dimension values and measure values, in schema order. */
export interface HandOffRow {
  dimensions: string[];
  /** A sum with a scale: its units (bigint); every other measure a number. */
  values: (number | bigint)[];
}

/**
 * How a measure's column becomes a row's value. Format 2 holds a scaled sum as Int64 units at the
 * manifest's scale; format 1 held its float sum, rounded to units here (exact while the row's
 * float error stayed below half a unit).
 */
function measureReader(
  measure: CubeSchema['measures'][number],
  manifest: HandOffManifest,
  where: string,
): (value: unknown) => number | bigint {
  const scale = exactScaleOf(measure);
  if (scale === undefined) return (v) => Number(v ?? 0);
  const format = manifest.formatVersion ?? 1;
  if (format === 1) return (v) => toUnits(Number(v ?? 0), scale);
  const written = manifest.scales?.[measure.name];
  if (written !== scale)
    throw new Error(
      `the hand-off ${where} holds ${measure.name} at scale ${written ?? 'none'}, the cube's is ${scale}`,
    );
  return (v) => BigInt((v as bigint | number | null | undefined) ?? 0);
}

/** The rows of the hand-off at `key` (its Arrow IPC data file), in the schema's column order. */
export async function readHandOffRows(
  storage: DeepStorage,
  key: string,
  schema: Pick<CubeSchema, 'dimensions' | 'measures'>,
  manifest?: HandOffManifest,
  signal?: AbortSignal,
): Promise<HandOffRow[]> {
  const m = manifest ?? (await readHandOffManifest(storage, key, signal));
  if ((m.formatVersion ?? 1) > handOffFormatVersion)
    throw new Error(
      `the hand-off ${storage.locationOf(key)} has format ${m.formatVersion}; this reader reads formats up to ${handOffFormatVersion}`,
    );
  const bytes = await storage.readBytes(`${key}/${m.dataFile}`, signal);
  if (bytes === undefined)
    throw new Error(`the hand-off ${storage.locationOf(key)} has no data file ${m.dataFile}`);
  const table = tableFromIPC(bytes);
  const column = (name: string): ArrayLike<unknown> => {
    const child = table.getChild(name);
    if (!child) throw new Error(`the hand-off ${storage.locationOf(key)} has no column '${name}'`);
    return child.toArray() as ArrayLike<unknown>;
  };
  const dims = schema.dimensions.map(column);
  const measures = schema.measures.map((x) => column(x.name));
  const readers = schema.measures.map((x) => measureReader(x, m, storage.locationOf(key)));
  const rows: HandOffRow[] = [];
  for (let i = 0; i < table.numRows; i++)
    rows.push({
      dimensions: dims.map((c) => (c[i] as string | null | undefined) ?? ''),
      values: measures.map((c, j) => readers[j]!(c[i])),
    });
  return rows;
}
