// The bound on rows per window, decided per partition so that every replica decides alike: a
// partition may bring at most `maxRows` distinct row keys (dimension values) into one window under
// its current epoch; a record that would bring one more is rejected `too_many_rows`. A count per
// segment would depend on how a replica happened to interleave its partitions; this one depends on
// the partition's own offsets only, from the start of its epoch. The keys come back after a restart
// from the rows' own record of which partitions touched them (fragments), so a restored replica
// decides as one that never stopped. A window's keys are forgotten once the partition's watermark
// is past its end plus lateness: every later record for it is too late anyway.
import type { CubeSchema } from '../api/cube.ts';

/** Distinct rows a partition may bring into one window when the cube does not say. */
export const defaultMaxRowsPerWindow = 100_000;

export const maxRowsPerWindowOf = (schema: CubeSchema): number =>
  schema.maxRowsPerWindow ?? defaultMaxRowsPerWindow;

/** The row keys one partition brought into each open window, under one epoch. */
export class PartitionRowKeys {
  private epochOf: number | undefined;
  private readonly windows = new Map<number, Set<string>>();
  private readonly maxRows: number;

  constructor(maxRows: number) {
    this.maxRows = maxRows;
  }

  /** A new epoch starts the count again: the keys of an earlier owner's offsets are not known. */
  private at(epoch: number): void {
    if (this.epochOf === epoch) return;
    this.epochOf = epoch;
    this.windows.clear();
  }

  /** Whether the row `key` may go to `windowStart`; a key admitted is remembered. */
  admits(epoch: number, windowStart: number, key: string): boolean {
    this.at(epoch);
    let keys = this.windows.get(windowStart);
    if (!keys) this.windows.set(windowStart, (keys = new Set()));
    if (keys.has(key)) return true;
    if (keys.size >= this.maxRows) return false;
    keys.add(key);
    return true;
  }

  /** A key the partition brought under `epoch`, read back from a checkpoint. */
  restore(epoch: number, windowStart: number, key: string): void {
    if (this.epochOf !== undefined && epoch !== this.epochOf) return;
    this.at(epoch);
    let keys = this.windows.get(windowStart);
    if (!keys) this.windows.set(windowStart, (keys = new Set()));
    keys.add(key);
  }

  /** The epoch the keys are counted under (a checkpoint's partition epoch), before restore. */
  startEpoch(epoch: number): void {
    this.at(epoch);
  }

  /** Forgets the windows that close at or before `watermark` (closing = end + lateness). */
  forgetClosed(watermark: number, closesAt: (windowStart: number) => number): void {
    for (const w of this.windows.keys()) if (closesAt(w) <= watermark) this.windows.delete(w);
  }

  /** Distinct keys counted for `windowStart` (0 when none). */
  count(windowStart: number): number {
    return this.windows.get(windowStart)?.size ?? 0;
  }
}
