// Writes one cube's checkpoints: the segments' new rows as fragment files and a checkpoint naming
// them with the positions they pair with, taken from memory at once and written one flush at a
// time; and restores the cube from the last one, beside the code that writes each field.
import type { Logger } from '../observability/logger.ts';
import type { ChannelMetrics } from './channel-metrics.ts';
import {
  type CheckpointHeader,
  type CubeCheckpoint,
  type SegmentCheckpoint,
  fragmentRow,
  holdsFloatSums,
  partitionCheckpoint,
  purgedCheckpoint,
  restoredPartition,
  restoredSegment,
  rowOfFragment,
  segmentCheckpoint,
  unitMeasures,
} from './checkpoint.ts';
import type { CubeStore } from './cube-store.ts';
import type { HandOffScheduler } from './hand-off-scheduler.ts';
import type { IngestPipeline } from './ingest-pipeline.ts';
import type { LostOffsets } from './lost-offsets.ts';
import { rangeMapFromJson } from './offset-ranges.ts';
import type { PartitionTable } from './partition-table.ts';
import type { Row, SegmentManager, SegmentState } from './segments.ts';

/** A fragment taken from a segment's delta, to be written under its name. */
interface FragmentToWrite {
  name: string;
  rows: Map<string, Row>;
}

/**
 * What one flush writes, taken from memory in one synchronous step: the checkpoint's positions
 * cover exactly the rows of the fragments it names, whatever is ingested while it is written.
 */
interface FlushSnapshot {
  fragments: FragmentToWrite[];
  header: CheckpointHeader;
  records: SegmentCheckpoint[];
  held: number[];
  counts: Record<SegmentState, number>;
  /** The positions of the partitions not released: the group's committed offsets once durable. */
  positions: Map<number, bigint>;
}

/** The file of the `seq`-th fragment, of the segment `segmentKey`: names sort in write order. */
export function fragmentName(seq: number, segmentKey: number): string {
  return `${String(seq).padStart(10, '0')}-${segmentKey}.jsonl`;
}

export interface CheckpointWriterOptions {
  /** What the header names besides the state: the cube, where it runs, and its spec. */
  identity: Pick<
    CheckpointHeader,
    'cube' | 'namespace' | 'cubeUid' | 'replicaSet' | 'source' | 'schema'
  >;
  store: CubeStore;
  partitions: PartitionTable;
  segments: SegmentManager;
  /** Its counters are checkpointed; its `dirty` flag, records applied since, is taken here. */
  ingest: Pick<IngestPipeline, 'dirty' | 'ingested' | 'rejected' | 'restoreCounters'>;
  lost: LostOffsets;
  handOffs: Pick<HandOffScheduler, 'pathOf' | 'restorePath'>;
  metrics: Pick<ChannelMetrics, 'flushTimer' | 'publish' | 'offsetsLost'>;
  logger: Logger;
  /** Mirrors a durable checkpoint's positions as the consumer group's committed offsets. */
  commitPositions: (positions: Map<number, bigint>) => Promise<void>;
}

export class CheckpointWriter {
  private readonly options: CheckpointWriterOptions;
  /** Per segment key, the fragment files holding its rows. */
  private readonly segmentFragments = new Map<number, string[]>();
  private fragmentSeq = 0;
  /** Something besides ingested records changed since the last checkpoint. */
  private dirty = false;
  /** The flushes of this cube, one after the other: each starts when the one before ended. */
  private flushes: Promise<void> = Promise.resolve();
  /** A flush asked for that has not started: who asks for one meanwhile is given this one. */
  private nextFlush: Promise<void> | undefined;
  /**
   * Set when a flush failed after it took the changes: the next one writes every segment's
   * record, and the fragments it took and could not write, again.
   */
  private rewriteAll = false;
  private unwritten: FragmentToWrite[] = [];

  constructor(options: CheckpointWriterOptions) {
    this.options = options;
  }

  /** Something the next checkpoint must hold changed (besides records, which ingest flags). */
  markChanged(): void {
    this.dirty = true;
  }

  /** The segment is no longer held: its fragments leave the next checkpoint. */
  forget(segmentKey: number): void {
    this.segmentFragments.delete(segmentKey);
  }

  /** Restores the cube's partitions, segments and counters from its last checkpoint. */
  restore(c: CubeCheckpoint): void {
    const { partitions, segments, store, handOffs, metrics } = this.options;
    const now = Date.now();
    for (const p of c.partitions) {
      const { state, clock } = restoredPartition(p, now);
      partitions.restore(state);
      segments.restoreClock(p.partition, clock);
      segments.restoreRowKeysEpoch(p.partition, p.epoch);
      metrics.offsetsLost(p.partition, 0n);
    }
    segments.restorePurgedBelow(c.purgedBelow ?? null);
    segments.restorePurgedCoverage(c.purged ? rangeMapFromJson(c.purged) : undefined);
    // Fragments holding float sums of a scaled sum are converted to units once: the rows go to the
    // next checkpoint as new fragments, which replace them.
    const convert = holdsFloatSums(c.version, segments.schema);
    for (const s of c.segments) {
      const segment = segments.restoreSegment(restoredSegment(s, now));
      for (const name of s.fragments) {
        const rows = store
          .readFragment(name)
          .map((r) => rowOfFragment(r, segments.schema, c.version));
        segments.restoreRows(segment, rows, convert);
      }
      this.segmentFragments.set(segment.key, convert ? [] : [...s.fragments]);
      if (s.handOffPath) handOffs.restorePath(segment.key, s.handOffPath);
    }
    this.options.ingest.restoreCounters(c.ingested ?? 0, c.rejected);
    this.options.lost.restore(c.lost);
    this.fragmentSeq = c.fragmentSeq;
    this.options.logger.info('restored from checkpoint', {
      partitions: c.partitions.map((p) => `${p.partition}@${p.position}`).join(','),
      segments: c.segments.length,
    });
  }

  /**
   * Writes fragments for changed segments and a checkpoint naming them with the positions: when
   * the promise resolves, everything in memory when flush() was called is durable. What is
   * written is taken from memory in one synchronous step, and written off the event loop (the
   * consumers of every cube go on meanwhile). One flush at a time: asked for while one runs, a
   * flush starts when it ends, and every request made until then shares that one. A flush that
   * fails rejects; the next one writes what it could not.
   */
  flush(): Promise<void> {
    this.nextFlush ??= this.inFlushTurn(() => {
      this.nextFlush = undefined;
      return this.flushNow();
    });
    return this.nextFlush;
  }

  /**
   * Writes the whole checkpoint anew, every segment's record with it, in its turn: for a new
   * cube, or one whose checkpoint names another version, source or namespace.
   */
  writeAll(): Promise<void> {
    this.rewriteAll = true;
    return this.inFlushTurn(() => this.writeSnapshot(this.takeSnapshot()));
  }

  /** Runs `step` after every flush asked for before it has ended. */
  private inFlushTurn(step: () => Promise<void>): Promise<void> {
    const run = this.flushes.then(step);
    this.flushes = run.catch(() => undefined);
    return run;
  }

  private async flushNow(): Promise<void> {
    const { ingest, metrics, partitions, segments } = this.options;
    if (!this.dirty && !ingest.dirty && !this.rewriteAll) return;
    const end = metrics.flushTimer();
    const snapshot = this.takeSnapshot();
    await this.writeSnapshot(snapshot);
    end();
    metrics.publish(partitions.values(), (p) => segments.clock(p).watermark, snapshot.counts);
    // Every checkpoint's positions become the group's committed offsets, paused and stopped
    // partitions' too: lag exporters then see what this receiver holds, no more, no less.
    void this.options.commitPositions(snapshot.positions).catch(() => undefined);
  }

  /**
   * Takes what the next checkpoint holds, in one synchronous step: the segments' deltas as new
   * fragments, the records of the segments changed since the last checkpoint (of every segment
   * after a failed one), and the positions and counters. The changes count as written from here.
   */
  private takeSnapshot(): FlushSnapshot {
    const { segments, handOffs } = this.options;
    const fragments = this.takeUnwritten();
    for (const segment of segments.segments.values()) {
      if (segment.delta.size === 0) continue;
      this.fragmentSeq += 1;
      const name = fragmentName(this.fragmentSeq, segment.key);
      fragments.push({ name, rows: segments.takeDelta(segment) });
      const list = this.segmentFragments.get(segment.key) ?? [];
      list.push(name);
      this.segmentFragments.set(segment.key, list);
    }
    const all = this.rewriteAll;
    const counts = { ACTIVE: 0, IMMUTABLE: 0, HANDED_OFF: 0 };
    const changed = segments.changes();
    const records = [];
    for (const segment of segments.segments.values()) {
      counts[segment.state] += 1;
      if (!all && !changed.has(segment.key)) continue;
      records.push(
        segmentCheckpoint(
          segment,
          [...(this.segmentFragments.get(segment.key) ?? [])],
          handOffs.pathOf(segment.key),
        ),
      );
    }
    segments.clearChanges();
    this.rewriteAll = false;
    this.dirty = false;
    this.options.ingest.dirty = false;
    return {
      fragments,
      header: this.header(),
      records,
      held: [...segments.segments.keys()],
      counts,
      positions: this.options.partitions.positions(),
    };
  }

  /** Fragments a failed flush took: written again unless their segment has gone since. */
  private takeUnwritten(): FragmentToWrite[] {
    if (this.unwritten.length === 0) return [];
    const named = new Set([...this.segmentFragments.values()].flat());
    const fragments = this.unwritten.filter((f) => named.has(f.name));
    this.unwritten = [];
    return fragments;
  }

  /**
   * Writes a snapshot's fragments, then commits its checkpoint. On failure the next snapshot
   * holds what this one took: its fragments, and every segment's record.
   */
  private async writeSnapshot(snapshot: FlushSnapshot): Promise<void> {
    const { store, segments } = this.options;
    const units = unitMeasures(segments.schema);
    try {
      await store.writeFragments(
        snapshot.fragments.map(({ name, rows }) => ({
          name,
          rows: Array.from(rows.values(), (row) => fragmentRow(row, units)),
        })),
      );
      await store.commit(snapshot.header, snapshot.records, snapshot.held);
    } catch (error) {
      this.unwritten = snapshot.fragments;
      this.rewriteAll = true;
      this.dirty = true;
      throw error;
    }
  }

  private header(): CheckpointHeader {
    const { identity, partitions, segments, ingest, lost } = this.options;
    return {
      cube: identity.cube,
      ...(identity.namespace ? { namespace: identity.namespace } : {}),
      ...(identity.cubeUid ? { cubeUid: identity.cubeUid } : {}),
      replicaSet: identity.replicaSet,
      source: identity.source,
      schema: identity.schema,
      partitions: [...partitions.values()].map((p) =>
        partitionCheckpoint(p, segments.clock(p.partition)),
      ),
      rejected: Object.fromEntries(ingest.rejected),
      ingested: ingest.ingested,
      fragmentSeq: this.fragmentSeq,
      purgedBelow: segments.firstUnpurgedWindow,
      ...purgedCheckpoint(segments.purgedOffsets),
      lost: lost.toJson(),
    };
  }
}
