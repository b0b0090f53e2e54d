// The exactness audit of the e2e scenario, read from the cluster as a user could: for each replica
// index, one receiver per replica set (its live segments through the admin API, plus its
// hand-offs in deep storage, copied out of a pod) must tile every partition's log up to the high
// watermark and add up to exactly what the producer wrote.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type OffsetRange, tilingProblems } from '../../src/receiver/offset-ranges.ts';
import type { QueryResponse, SegmentStatus } from '../../src/protocol/admin-api.ts';
import { cubePath } from '../../src/protocol/cube-paths.ts';
import { handOffTotals, handOffs, rangesByPartition } from '../support/hand-offs.ts';
import { NotHeld, config, kubectl, receiverApi } from './cluster.ts';
import { expected, workload } from './workload.ts';

/**
 * The StatefulSets whose receivers the audit reads, `<name>-<replica>` being replica `replica`:
 * those running (live segments and hand-offs), and those of sets removed by a scale-in (their
 * hand-offs only). The pool's sets rs-a and rs-b keep the previous chart's names.
 */
export const auditedSets = {
  running: [`${config.release}-rs-a`, `${config.release}-rs-b`],
  removed: [] as string[],
};

/**
 * What replica `replica` of every replica set holds, live and handed off: offset ranges per
 * partition and totals. Every replica index must tile each partition's log and add up exactly.
 */
async function heldByReplica(
  replica: number,
  deepStorage: string,
): Promise<{ ranges: Map<number, OffsetRange[]>; events: number; revenue: number }> {
  const { ranges, add } = rangesByPartition();
  let events = 0;
  let revenue = 0;
  const deep = handOffs(deepStorage, config.cube, config.namespace);
  const cube = { namespace: config.namespace, name: config.cube };
  for (const set of [...auditedSets.running, ...auditedSets.removed]) {
    const pod = `${set}-${replica}`;
    if (auditedSets.running.includes(set))
      try {
        const status = await receiverApi<{ segments: SegmentStatus[] }>(pod, 'GET', cubePath(cube));
        for (const s of status.segments) if (s.state !== 'HANDED_OFF') add(s.offsetRanges);
        const answer = await receiverApi<QueryResponse>(pod, 'POST', cubePath(cube, 'query'), {});
        const row = answer.rows[0];
        if (row) {
          events += Number(row[answer.columns.indexOf('events')]);
          revenue += Number(row[answer.columns.indexOf('revenue')]);
        }
      } catch (error) {
        if (!(error instanceof NotHeld)) throw error;
      }
    const own = deep.filter((h) => h.manifest.receiver === pod);
    for (const h of own) add(h.manifest.offsetRanges);
    const handedOff = handOffTotals(own);
    events += handedOff.events;
    revenue += handedOff.revenue;
  }
  return { ranges, events, revenue };
}

/** Copies the deep-storage volume out of a receiver pod (the same on every cluster). */
export async function copyDeepStorage(): Promise<{ dir: string; root: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'streamcube-e2e-deep-'));
  const root = join(dir, 'deep-storage');
  await kubectl([
    'cp',
    '-c',
    'receiver',
    `${config.release}-rs-b-0:/var/lib/streamcube/deep-storage`,
    root,
  ]);
  return { dir, root };
}

/** partition → high watermark, as the producer read it back once it had written everything. */
let highWatermarks = new Map<number, bigint>();

export async function readHighWatermarks(producer = 'producer'): Promise<void> {
  const line = (await kubectl(['logs', producer]))
    .split('\n')
    .find((l) => l.startsWith('high watermarks '));
  if (!line) throw new Error('the producer did not print its high watermarks');
  const parsed = JSON.parse(line.slice('high watermarks '.length)) as Record<string, string>;
  highWatermarks = new Map(Object.entries(parsed).map(([p, hw]) => [Number(p), BigInt(hw)]));
  const inTopic = [...highWatermarks.values()].reduce((a, b) => a + b, 0n);
  if (highWatermarks.size !== workload.partitions || inTopic !== BigInt(expected.events)) {
    throw new Error(`the topic holds ${inTopic} records, the producers wrote ${expected.events}`);
  }
}

/** Exact totals and tiling of [0, high watermark) for every partition, replica by replica. */
export async function expectExactAndTiled(): Promise<void> {
  const deep = await copyDeepStorage();
  try {
    for (const replica of [0, 1]) {
      const held = await heldByReplica(replica, deep.root);
      const problems: string[] = [];
      for (const [p, end] of highWatermarks) {
        for (const x of tilingProblems(held.ranges.get(p) ?? [], 0n, end)) {
          problems.push(`partition ${p}: ${x.kind} [${x.from}, ${x.to})`);
        }
      }
      if (problems.length > 0) throw new Error(`replica ${replica}: ${problems.join('; ')}`);
      if (held.events !== expected.events || held.revenue !== expected.revenue) {
        throw new Error(
          `replica ${replica}: ${held.events} events, revenue ${held.revenue}; produced ${expected.events}, revenue ${expected.revenue}`,
        );
      }
    }
  } finally {
    rmSync(deep.dir, { recursive: true, force: true });
  }
}
