// Reading hand-offs back in operator tests: manifests and Arrow IPC files (apache-arrow) under a
// deep-storage directory.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, sep } from 'node:path';
import { tableFromIPC } from 'apache-arrow';
import type { HandOffManifest } from '../../src/receiver/hand-off.ts';
import type { CommitRecord } from '../../src/receiver/hand-off-commit.ts';
import type { Totals } from './events.ts';
import { FilesystemDeepStorage } from '../../src/receiver/deep-storage-filesystem.ts';
import { readCommittedView, readHandOffManifest } from '../../src/query/committed-view.ts';
import {
  type OffsetRange,
  addRange,
  rangeMapFromJson,
  rangesFromJson,
} from '../../src/receiver/offset-ranges.ts';

export interface HandOff {
  dir: string;
  manifest: HandOffManifest;
}

/** Every hand-off of cubes named `cube` (and of `namespace`, when given), whatever the layout. */
export function handOffs(deepStorageDir: string, cube: string, namespace?: string): HandOff[] {
  const out: HandOff[] = [];
  const walk = (dir: string): void => {
    if (!existsSync(dir)) return;
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (name.endsWith('.tmp') || !statSync(path).isDirectory()) continue;
      const manifest = join(path, 'manifest.json');
      if (existsSync(manifest))
        out.push({
          dir: path,
          manifest: JSON.parse(readFileSync(manifest, 'utf8')) as HandOffManifest,
        });
      else walk(path);
    }
  };
  walk(deepStorageDir);
  return out.filter(
    (h) =>
      h.manifest.cube === cube && (namespace === undefined || h.manifest.namespace === namespace),
  );
}

export interface Committed {
  windowStart: number;
  replicaSet: string;
  record: CommitRecord;
  /** The hand-offs the record lists. */
  handOffs: HandOff[];
}

/**
 * The newest commit record of each window and replica set of cubes named `cube` (and of
 * `namespace`, when given), with the hand-offs it lists: what a reader of committed data reads,
 * read by the product's reader (src/query/committed-view.ts).
 */
export async function committed(
  deepStorageDir: string,
  cube: string,
  namespace?: string,
): Promise<Committed[]> {
  const namespaces =
    namespace !== undefined
      ? [namespace]
      : existsSync(deepStorageDir)
        ? readdirSync(deepStorageDir)
            .filter((n) => n.startsWith('namespace='))
            .map((n) => n.slice('namespace='.length))
        : [];
  // Cubes of before namespaces (`<cube>/window=…`) too, when no namespace is asked for.
  const cubes = [
    ...namespaces.map((ns) => ({ namespace: ns, cube })),
    ...(namespace === undefined ? [{ cube }] : []),
  ];
  const storage = new FilesystemDeepStorage(deepStorageDir);
  const out: Committed[] = [];
  for (const c of cubes)
    for (const w of await readCommittedView(storage, c)) {
      const listed = await Promise.all(
        w.handOffKeys.map(async (key) => ({
          dir: storage.locationOf(key),
          manifest: await readHandOffManifest(storage, key),
        })),
      );
      out.push({
        windowStart: w.windowStart,
        replicaSet: w.replicaSet,
        record: w.record,
        handOffs: listed,
      });
    }
  return out;
}

/** partition → the offsets the newest commit records of `replicaSet` cover, merged. */
export async function committedBy(
  deepStorageDir: string,
  cube: string,
  replicaSet: string,
): Promise<Map<number, OffsetRange[]>> {
  const out = new Map<number, OffsetRange[]>();
  for (const c of await committed(deepStorageDir, cube)) {
    if (c.replicaSet !== replicaSet) continue;
    for (const [p, list] of Object.entries(c.record.offsetRanges)) {
      const acc = out.get(Number(p)) ?? [];
      for (const r of rangesFromJson(list)) addRange(acc, r.from, r.to);
      out.set(Number(p), acc);
    }
  }
  return out;
}

/** Totals of the test schema's measures over the given hand-offs' Arrow files. */
export function handOffTotals(list: HandOff[]): Totals {
  const totals: Totals = { events: 0, revenue: 0, cheapest: Infinity, dearest: -Infinity };
  for (const h of list) {
    const table = tableFromIPC(readFileSync(join(h.dir, h.manifest.dataFile)));
    const column = (name: string): ArrayLike<unknown> =>
      (table.getChild(name)?.toArray() as ArrayLike<unknown> | undefined) ?? [];
    const [events, revenue, cheapest, dearest] = ['events', 'revenue', 'cheapest', 'dearest'].map(
      column,
    );
    for (let i = 0; i < table.numRows; i++) {
      totals.events += Number(events![i]);
      totals.revenue += Number(revenue![i]);
      totals.cheapest = Math.min(totals.cheapest, Number(cheapest![i]));
      totals.dearest = Math.max(totals.dearest, Number(dearest![i]));
    }
  }
  return totals;
}

export function addTotals(a: Totals, b: Totals): Totals {
  return {
    events: a.events + b.events,
    revenue: a.revenue + b.revenue,
    cheapest: Math.min(a.cheapest, b.cheapest),
    dearest: Math.max(a.dearest, b.dearest),
  };
}

/** Where the fence records of `replicaSet` for a cube of `namespace` are, in deep storage. */
export function fenceDir(
  deepStorageDir: string,
  namespace: string,
  cube: string,
  replicaSet: string,
): string {
  return join(deepStorageDir, `namespace=${namespace}`, cube, 'fences', `replicaSet=${replicaSet}`);
}

/** The cube's directory in deep storage, which holds its windows and `fences/`. */
const cubeDirOf = (h: HandOff): string => h.dir.slice(0, h.dir.lastIndexOf(`${sep}window=`));

/**
 * The replica sets of cubes named `cube` that a fence covers, a failover's or a move's stop fence (a `fences/replicaSet=<set>`
 * directory beside the cube's windows in deep storage).
 */
export function fencedReplicaSets(
  deepStorageDir: string,
  cube: string,
  namespace?: string,
): string[] {
  const out = new Set<string>();
  const cubeDirs = new Set(handOffs(deepStorageDir, cube, namespace).map(cubeDirOf));
  for (const dir of cubeDirs) {
    const fences = join(dir, 'fences');
    if (!existsSync(fences)) continue;
    for (const name of readdirSync(fences))
      if (name.startsWith('replicaSet=')) out.add(name.slice('replicaSet='.length));
  }
  return [...out].sort();
}

/**
 * The hand-offs of `list` that a failover's fence keeps from ever being data: they hold offsets
 * of a partition under an epoch their replica set was fenced at (hand-off-commit.ts, `fences/`)
 * that their window's newest commit record does not cover, and no version of it names them. A reader of committed data never reads
 * them, and neither does an audit of a replica's copy.
 */
export function fencedCopies(list: HandOff[]): Set<string> {
  const out = new Set<string>();
  /** partition → each fence's epoch and first offset fenced (a move's stop fence; else 0). */
  type Fenced = Map<number, { epoch: number; from: bigint }[]>;
  const fences = new Map<string, Fenced>();
  const fencesOf = (cubeDir: string, replicaSet: string): Fenced => {
    const key = `${cubeDir}\n${replicaSet}`;
    let found = fences.get(key);
    if (found) return found;
    found = new Map();
    const dir = join(cubeDir, 'fences', `replicaSet=${replicaSet}`);
    if (existsSync(dir))
      for (const name of readdirSync(dir).filter((n) => n.endsWith('.json'))) {
        const fence = JSON.parse(readFileSync(join(dir, name), 'utf8')) as {
          partitions: Record<string, number>;
          from?: Record<string, string>;
        };
        for (const [p, epoch] of Object.entries(fence.partitions))
          found.set(Number(p), [
            ...(found.get(Number(p)) ?? []),
            { epoch, from: BigInt(fence.from?.[p] ?? '0') },
          ]);
      }
    fences.set(key, found);
    return found;
  };
  /** What the newest commit record of a window and set covers, and every hand-off any names. */
  const records = new Map<string, { named: Set<string>; covered: Map<number, OffsetRange[]> }>();
  const recordsIn = (setDir: string) => {
    let found = records.get(setDir);
    if (found) return found;
    found = { named: new Set(), covered: new Map() };
    const versions = readdirSync(setDir)
      .filter((n) => /^commit\.\d+\.json$/.test(n))
      .sort();
    for (const name of versions) {
      const record = JSON.parse(readFileSync(join(setDir, name), 'utf8')) as CommitRecord;
      for (const h of record.handOffs) found.named.add(join(setDir, h.dir));
      found.covered = rangeMapFromJson(record.offsetRanges);
    }
    records.set(setDir, found);
    return found;
  };
  const within = (outer: OffsetRange[], r: OffsetRange): boolean =>
    outer.some((o) => o.from <= r.from && r.to <= o.to);
  for (const h of list) {
    const setDir = dirname(h.dir);
    const fence = fencesOf(cubeDirOf(h), h.manifest.replicaSet);
    if (fence.size === 0) continue;
    const { named, covered } = recordsIn(setDir);
    if (named.has(h.dir)) continue;
    // Fenced offsets beyond what the window's record covers: a copy never to be data.
    const beyond = Object.entries(h.manifest.offsetRanges).some(([p, ranges]) =>
      (fence.get(Number(p)) ?? []).some(
        (f) =>
          (h.manifest.epochs[p] ?? Infinity) <= f.epoch &&
          rangesFromJson(ranges).some(
            (r) =>
              r.to > f.from &&
              !within(covered.get(Number(p)) ?? [], {
                from: r.from < f.from ? f.from : r.from,
                to: r.to,
              }),
          ),
      ),
    );
    if (beyond) out.add(h.dir);
  }
  return out;
}

/** Offset ranges per partition, gathered from their JSON form (a manifest's, a segment's). */
export function rangesByPartition(): {
  ranges: Map<number, OffsetRange[]>;
  add: (offsetRanges: Record<string, [string, string][]>) => void;
} {
  const ranges = new Map<number, OffsetRange[]>();
  const add = (offsetRanges: Record<string, [string, string][]>): void => {
    for (const [p, list] of Object.entries(offsetRanges)) {
      ranges.set(Number(p), [...(ranges.get(Number(p)) ?? []), ...rangesFromJson(list)]);
    }
  };
  return { ranges, add };
}
