// On-disk state of one cube on one receiver: fragment files (deltas of aggregated rows), one
// record per segment, and the manifest (checkpoint.json) naming the records and the positions
// they correspond to. The manifest's rename is the commit point: records and fragments are durable
// before it, and those it does not name are leftovers of a crash or superseded, and are deleted.
// Writes are asynchronous (durable-files.ts) and their caller runs them one at a time: a commit
// reads and replaces what the one before it committed. Reading, at start-up, is synchronous.
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { faultPoint } from '../observability/fault-injection.ts';
import { eachAtOnce } from './at-once.ts';
import {
  type CheckpointHeader,
  type CubeCheckpoint,
  type FragmentRow,
  type SegmentCheckpoint,
  decodeManifest,
  decodeSegmentRecord,
  encodeManifest,
  encodeSegmentRecord,
  segmentKey,
} from './checkpoint.ts';
import { fsyncDirectoryAsync, writeFileDurablyAsync } from './durable-files.ts';

export type { CubeCheckpoint, PartitionCheckpoint, SegmentCheckpoint } from './checkpoint.ts';

interface CommittedRecord {
  name: string;
  fragments: string[];
}

/**
 * Files a commit writes or deletes at once: a pass that hands off thousands of segments changes
 * thousands of records (at-once.ts).
 */
const filesAtOnce = 8;

/** Reads a cube's checkpoint from its directory, or undefined when it has none. */
export function readCubeCheckpoint(dir: string): CubeCheckpoint | undefined {
  return readWithRecords(dir)?.checkpoint;
}

function readWithRecords(
  dir: string,
): { checkpoint: CubeCheckpoint; records: Map<number, string>; recordSeq: number } | undefined {
  const file = join(dir, 'checkpoint.json');
  if (!existsSync(file)) return undefined;
  const decoded = decodeManifest(file, readFileSync(file, 'utf8'));
  if (decoded.version === 1) {
    return { checkpoint: decoded.checkpoint, records: new Map(), recordSeq: 0 };
  }
  const { manifest } = decoded;
  const { segments: refs, recordSeq, ...header } = manifest;
  const segments = refs.map((ref) => {
    const path = join(dir, 'segments', ref.record);
    return decodeSegmentRecord(path, readFileSync(path, 'utf8'));
  });
  return {
    checkpoint: { ...header, segments },
    records: new Map(refs.map((r) => [r.windowStart, r.record])),
    recordSeq,
  };
}

export class CubeStore {
  readonly dir: string;
  private readonly fragmentDir: string;
  private readonly recordDir: string;
  /** Per segment key, the record the committed manifest names and the fragments it lists. */
  private readonly committed = new Map<number, CommittedRecord>();
  private recordSeq = 0;
  /** Fragments written since the last commit: their directory is synced before it. */
  private fragmentsWritten = false;

  /** `dir`: the cube's own directory (cube-directories.ts says where it is). */
  constructor(dir: string) {
    this.dir = dir;
    this.fragmentDir = join(this.dir, 'fragments');
    this.recordDir = join(this.dir, 'segments');
    mkdirSync(this.fragmentDir, { recursive: true });
    mkdirSync(this.recordDir, { recursive: true });
  }

  private get checkpointFile(): string {
    return join(this.dir, 'checkpoint.json');
  }

  /** Reads the committed checkpoint and remembers which records it names. */
  readCheckpoint(): CubeCheckpoint | undefined {
    const read = readWithRecords(this.dir);
    this.committed.clear();
    if (!read) return undefined;
    for (const s of read.checkpoint.segments) {
      const name = read.records.get(segmentKey(s));
      if (name !== undefined) this.committed.set(segmentKey(s), { name, fragments: s.fragments });
    }
    this.recordSeq = read.recordSeq;
    return read.checkpoint;
  }

  /** Writes fragments durably (their directory is synced before the commit that names them). */
  async writeFragments(fragments: { name: string; rows: Iterable<FragmentRow> }[]): Promise<void> {
    if (fragments.length > 0) this.fragmentsWritten = true;
    await eachAtOnce(fragments, filesAtOnce, async ({ name, rows }) => {
      const lines: string[] = [];
      // A third element, when known: [partition, epoch] of the partitions that touched the row.
      for (const row of rows)
        lines.push(
          JSON.stringify(
            row.touchedBy
              ? [row.dimensions, row.values, [...row.touchedBy]]
              : [row.dimensions, row.values],
          ),
        );
      await writeFileDurablyAsync(join(this.fragmentDir, name), lines.join('\n'), false);
      faultPoint('after-fragment');
    });
  }

  readFragment(name: string): FragmentRow[] {
    const text = readFileSync(join(this.fragmentDir, name), 'utf8');
    if (text === '') return [];
    return text.split('\n').map((line) => {
      const [dimensions, values, touchedBy] = JSON.parse(line) as [
        string[],
        (number | string)[],
        [number, number][]?,
      ];
      return touchedBy
        ? { dimensions, values, touchedBy: new Map(touchedBy) }
        : { dimensions, values };
    });
  }

  /**
   * Commits a checkpoint: after this returns, a restart resumes from exactly this state. Only the
   * records of `changed` segments are written; the segments held are `held` (keys), and the records and
   * fragments of any other, or superseded, are deleted once the manifest no longer names them.
   * The caller awaits one commit before it starts the next. A commit that fails leaves what was
   * committed before as it was, on disk and here; its records may be left over (deleted at the
   * next start), and the next commit must give every held segment's record again.
   */
  async commit(
    header: CheckpointHeader,
    changed: SegmentCheckpoint[],
    held: Iterable<number>,
  ): Promise<void> {
    const next = new Map<number, CommittedRecord>();
    const changedKeys = new Set(changed.map(segmentKey));
    for (const key of held) {
      const record = this.committed.get(key);
      if (record) next.set(key, record);
      else if (!changedKeys.has(key))
        throw new Error(`segment ${key} has no record on disk and none was given`);
    }
    const records = changed.map((segment) => {
      this.recordSeq += 1;
      const name = `${String(this.recordSeq).padStart(10, '0')}-${segmentKey(segment)}.json`;
      next.set(segmentKey(segment), { name, fragments: segment.fragments });
      return { name, segment };
    });
    await eachAtOnce(records, filesAtOnce, ({ name, segment }) =>
      writeFileDurablyAsync(join(this.recordDir, name), encodeSegmentRecord(segment), false),
    );
    if (changed.length > 0) await fsyncDirectoryAsync(this.recordDir);
    if (this.fragmentsWritten) await fsyncDirectoryAsync(this.fragmentDir);
    this.fragmentsWritten = false;
    const segments = [...next]
      .sort(([a], [b]) => a - b)
      .map(([key, r]) => ({ windowStart: key, record: r.name }));
    const manifest = encodeManifest({ ...header, segments, recordSeq: this.recordSeq });
    faultPoint('before-checkpoint');
    await writeFileDurablyAsync(this.checkpointFile, manifest);
    faultPoint('after-checkpoint');
    const previous = [...this.committed];
    this.committed.clear();
    for (const [key, r] of next) this.committed.set(key, r);
    const stillListed = new Set([...next.values()].flatMap((r) => r.fragments));
    const superseded: string[] = [];
    for (const [key, old] of previous) {
      if (next.get(key)?.name === old.name) continue;
      superseded.push(join(this.recordDir, old.name));
      for (const f of old.fragments)
        if (!stillListed.has(f)) superseded.push(join(this.fragmentDir, f));
    }
    await eachAtOnce(superseded, filesAtOnce, (path) => rm(path, { force: true }));
  }

  /**
   * Deletes files the checkpoint does not name: fragments and records written before a crash,
   * superseded, or purged. Returns how many fragments were removed.
   */
  removeUnlisted(checkpoint: CubeCheckpoint | undefined): number {
    const fragments = new Set(checkpoint?.segments.flatMap((s) => s.fragments) ?? []);
    const records = new Set([...this.committed.values()].map((r) => r.name));
    let removed = 0;
    for (const name of readdirSync(this.fragmentDir)) {
      if (!fragments.has(name)) {
        rmSync(join(this.fragmentDir, name), { force: true });
        removed += 1;
      }
    }
    for (const name of readdirSync(this.recordDir))
      if (!records.has(name)) rmSync(join(this.recordDir, name), { force: true });
    return removed;
  }

  removeAll(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}
