// On-disk state of one cube on one receiver: fragment files (deltas of aggregated rows) and one
// checkpoint naming the fragments and the positions they correspond to. The checkpoint's rename
// is the commit point: fragments it does not name are leftovers of a crash and are deleted.
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { KafkaSource, CubeSchema } from '../api/cube.ts';
import type { PartitionStateName } from '../protocol/admin-api.ts';
import { faultPoint } from '../observability/fault-injection.ts';
import { writeFileDurably } from './durable-files.ts';
import type { RangeJson } from './offset-ranges.ts';
import type { Row, SegmentState } from './segments.ts';

export interface PartitionCheckpoint {
  partition: number;
  epoch: number;
  state: PartitionStateName;
  position: string;
  stopOffset: string | null;
  watermark: number | null;
  currentWindow: number | null;
  pending: RangeJson[];
}

export interface SegmentCheckpoint {
  windowStart: number;
  windowEnd: number;
  state: SegmentState;
  fragments: string[];
  ranges: Record<string, RangeJson[]>;
  epochs: Record<string, number>;
  handedOffRows?: number;
  handOffPath?: string;
}

export interface CubeCheckpoint {
  version: 1;
  cube: string;
  replicaSet: string;
  source: KafkaSource;
  schema: CubeSchema;
  partitions: PartitionCheckpoint[];
  segments: SegmentCheckpoint[];
  rejected: Record<string, number>;
  /** Absent in checkpoints written before it was counted. */
  ingested?: number;
  fragmentSeq: number;
}

export class CubeStore {
  readonly dir: string;
  private readonly fragmentDir: string;

  constructor(dataDir: string, cube: string) {
    this.dir = join(dataDir, 'cubes', cube);
    this.fragmentDir = join(this.dir, 'fragments');
    mkdirSync(this.fragmentDir, { recursive: true });
  }

  private get checkpointFile(): string {
    return join(this.dir, 'checkpoint.json');
  }

  readCheckpoint(): CubeCheckpoint | undefined {
    if (!existsSync(this.checkpointFile)) return undefined;
    return JSON.parse(readFileSync(this.checkpointFile, 'utf8')) as CubeCheckpoint;
  }

  /** Writes one fragment durably (its directory is synced with the checkpoint that names it). */
  writeFragment(name: string, rows: Iterable<Row>): void {
    const lines: string[] = [];
    for (const row of rows) lines.push(JSON.stringify([row.dimensions, row.values]));
    writeFileDurably(join(this.fragmentDir, name), lines.join('\n'), false);
  }

  readFragment(name: string): Row[] {
    const text = readFileSync(join(this.fragmentDir, name), 'utf8');
    if (text === '') return [];
    return text.split('\n').map((line) => {
      const [dimensions, values] = JSON.parse(line) as [string[], number[]];
      return { dimensions, values };
    });
  }

  /** Commits a checkpoint: after this returns, a restart resumes from exactly this state. */
  writeCheckpoint(checkpoint: CubeCheckpoint): void {
    faultPoint('before-checkpoint');
    writeFileDurably(this.checkpointFile, JSON.stringify(checkpoint));
    faultPoint('after-checkpoint');
  }

  /** Deletes fragment files the checkpoint does not name (written before a crash, or purged). */
  removeUnlistedFragments(checkpoint: CubeCheckpoint | undefined): number {
    const listed = new Set(checkpoint?.segments.flatMap((s) => s.fragments) ?? []);
    let removed = 0;
    for (const name of readdirSync(this.fragmentDir)) {
      if (!listed.has(name)) {
        rmSync(join(this.fragmentDir, name), { force: true });
        removed += 1;
      }
    }
    return removed;
  }

  removeAll(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}
