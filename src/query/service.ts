// One answer per cube: the cube's status (from an informer), its committed view (deep storage)
// and the live segments of one Ready replica per replica set, merged by offsets (merge.ts) into
// rows (answer.ts) with per-partition coverage. I/O sits behind QuerySources; this file decides
// what to read, in what order, and what an answer says when a source fails.
import { resetAccounting, resetRangeReason } from '../api/reset-ranges.ts';
import type { CubeAssignment } from '../api/cube-assignment.ts';
import { parseDuration } from '../api/duration.ts';
import type { QueryPiece, QueryRequest, QueryResponse } from '../protocol/admin-api.ts';
import { ReceiverApiError } from '../protocol/client.ts';
import type { DeepStorage } from '../receiver/deep-storage.ts';
import { type OffsetRange, addRange, rangeMapFromJson } from '../receiver/offset-ranges.ts';
import {
  type AnswerRows,
  type CountedRows,
  type PieceRow,
  buildAnswer,
  fetchDimensions,
  pieceRowsOfHandOff,
  pieceRowsOfLive,
} from './answer.ts';
import {
  type AccountedRanges,
  addAccounted,
  deletedBeforeTheCube,
  lostInStatus,
  whereTheCubeBegan,
} from './accounted-ranges.ts';
import { CommittedViewCache } from './committed-cache.ts';
import { type CommittedIndex, type CommittedRef, rejectedOf } from './committed-index.ts';
import {
  type MergeResult,
  type PartitionBounds,
  type PartitionCoverage,
  type Piece,
  PieceCount,
  type Unavailable,
  finishMerge,
  piecePreference,
  predatesTheCube,
} from './merge.ts';
import { rollUp, rollupRuns, rollupShape } from './rollups.ts';
import { type PendingRun, countRejected, totalRejected } from './rejected.ts';
import { QueryError, type ResolvedQuery, resolveQuery } from './request.ts';

/** A receiver the service may ask: its pod's name and admin URL. */
export interface ReceiverRef {
  name: string;
  baseUrl: string;
}

/** Where the service reads from: the edges, faked in tests. */
export interface QuerySources {
  /** The cube as the informer holds it, or undefined when there is no such CubeAssignment. */
  cube(namespace: string, name: string): CubeAssignment | undefined;
  /** The Ready receivers of a replica set serving cubes of `namespace`, in a stable order. */
  receivers(namespace: string, replicaSet: string): ReceiverRef[];
  query(
    receiver: ReceiverRef,
    namespace: string,
    cube: string,
    request: QueryRequest,
    signal: AbortSignal,
  ): Promise<QueryResponse>;
  storage: DeepStorage;
}

/** A receiver's answer by segment when it holds nothing of the cube. */
export const nothingHeld: QueryResponse = Object.freeze({
  columns: [],
  rows: [],
  offsetRanges: {},
  segments: 0,
  pieces: [],
  held: {},
});

/** Why an answer is incomplete, bounded for a metric's label. */
export type IncompleteReason = 'receiver_unavailable' | 'deep_storage' | 'conflict' | 'gap';

export interface QueryServiceOptions {
  sources: QuerySources;
  /** Each receiver call's deadline; a slow receiver is left for a sibling. */
  receiverTimeoutMs: number;
  /** Rows an answer may hold at most (400 past it). */
  maxRows: number;
  /** Hand-off data files read at once. */
  storageReadsAtOnce?: number;
  /** Commit records and hand-off rows kept between answers; none kept when absent. */
  cache?: CommittedViewCache;
  /** Told of each answer, for metrics. */
  observe?: (o: {
    seconds: number;
    piecesCommitted: number;
    piecesLive: number;
    receiverCalls: { outcome: 'ok' | 'error' }[];
    incomplete: IncompleteReason[];
  }) => void;
}

/** What a replica set's live part of an answer came from. */
export interface LiveSource {
  replicaSet: string;
  /** The receiver that answered; absent when none did. */
  receiver?: string;
  pieces: number;
  /** Why a receiver (or every one) of the set could not answer. */
  errors?: string[];
}

/** A partition's coverage, and how many of its accounted offsets were rejected records. */
export interface PartitionAnswer extends PartitionCoverage {
  /** Records rejected among the accounted offsets, by reason: counted once, in no row. */
  rejected: Record<string, number>;
  /** false: some of its offsets come from a piece that does not say (written before they were counted). */
  rejectedKnown: boolean;
}

export interface CubeAnswer extends AnswerRows {
  namespace: string;
  cube: string;
  /** Every partition's offsets run without a gap from where the cube began to the live position. */
  complete: boolean;
  /** Records rejected among the offsets accounted, over every partition (as far as known). */
  rejected: number;
  /** false: some partition's count of rejected records is not known. */
  rejectedKnown: boolean;
  partitions: PartitionAnswer[];
  sources: {
    committed: {
      windows: number;
      handOffs: number;
      /**
       * Hand-offs of an earlier cube of the same name (deleted and made again): they hold only
       * offsets before where this cube began reading, so they are not this cube's to count.
       */
      predating?: number;
      /**
       * Hand-offs of another cube of the same name, told apart by uid: their commit records name
       * another metadata.uid than this CubeAssignment's (docs/deep-storage.md). Not counted.
       */
      otherCube?: number;
      error?: string;
    };
    live: LiveSource[];
    /** Pieces counted, and skipped because counted ones held all their offsets. */
    counted: number;
    duplicates: number;
    conflicts: { source: string; reason: string }[];
  };
}

type Rowed = { windowEnd: number; rows: PieceRow[] };

/** Runs `work` over `items`, at most `n` at once. */
async function atMost<T>(n: number, items: T[], work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(n, items.length) }, async () => {
      while (next < items.length) await work(items[next++]!);
    }),
  );
}

/** Runs the functions given to it at most `n` at once, in the order given. */
function limiter(n: number): <T>(work: () => Promise<T>) => Promise<T> {
  let running = 0;
  const waiting: (() => void)[] = [];
  return async (work) => {
    if (running >= n) await new Promise<void>((resolve) => waiting.push(resolve));
    else running += 1;
    try {
      return await work();
    } finally {
      const next = waiting.shift();
      if (next) next();
      else running -= 1;
    }
  };
}

const errorText = (error: unknown): string => (error as Error).message ?? String(error);

export class QueryService {
  private readonly options: QueryServiceOptions;
  private readonly cache: CommittedViewCache;

  constructor(options: QueryServiceOptions) {
    this.options = options;
    this.cache = options.cache ?? new CommittedViewCache({ maxBytes: 0, listMaxAgeMs: 0 });
  }

  /** The cube's schema, for a question to be read against it; QueryError 404 when there is none. */
  schemaOf(namespace: string, name: string): CubeAssignment['spec']['schema'] {
    const cube = this.options.sources.cube(namespace, name);
    if (!cube) throw new QueryError(404, `no CubeAssignment ${namespace}/${name}`);
    return cube.spec.schema;
  }

  /** The answer to `body` over the cube; throws QueryError (404, 400, 503). */
  async answer(namespace: string, name: string, body: unknown): Promise<CubeAnswer> {
    const started = performance.now();
    const cube = this.options.sources.cube(namespace, name);
    if (!cube) throw new QueryError(404, `no CubeAssignment ${namespace}/${name}`);
    const q = resolveQuery(body, cube.spec.schema);
    const calls: { outcome: 'ok' | 'error' }[] = [];
    const windowMs = parseDuration(cube.spec.schema.window)!;

    // Live first, then the records: a segment committed in between is then in both (a
    // duplicate, counted once), never in neither.
    const sets = replicaSetsOf(cube);
    const live = new Map(
      await Promise.all(
        sets.map(
          async (set) => [set, await this.readLive(namespace, name, set, q, 0, calls)] as const,
        ),
      ),
    );
    let committed = await this.readCommitted(namespace, name, cube, q, windowMs, false);

    let merged = this.merge(cube, q, committed, live);
    // A listing from the cache misses what was committed since: the offsets show it as a gap.
    if (!merged.complete && committed.cached) {
      committed = await this.readCommitted(namespace, name, cube, q, windowMs, true);
      merged = this.merge(cube, q, committed, live);
    }
    // A gap a set's partitions show may be held by a sibling replica (replicas commit and cut
    // windows at their own moments): ask the next replica of such a set once more.
    const gapped = new Set(merged.partitions.filter((p) => !p.complete).map((p) => p.partition));
    const retry = sets.filter((set) => {
      const l = live.get(set)!;
      return (
        l.answer !== undefined &&
        l.next < this.options.sources.receivers(namespace, set).length &&
        partitionsHeldBy(cube, set).some((p) => gapped.has(p))
      );
    });
    if (retry.length > 0) {
      await Promise.all(
        retry.map(async (set) => {
          const sibling = await this.readLive(namespace, name, set, q, live.get(set)!.next, calls);
          if (sibling.answer) live.set(`${set}\u0000sibling`, { ...sibling, set });
        }),
      );
      merged = this.merge(cube, q, committed, live);
    }

    const counted: CountedRows[] = [
      ...committed.rows,
      ...merged.live.map((p): CountedRows => ({ windowStart: p.windowStart, ...p.rows })),
    ];
    const rows = buildAnswer(counted, cube.spec.schema, q, this.options.maxRows);
    const rejected = countRejected(
      [...(committed.index?.rejectedSummary() ?? []), ...merged.live],
      merged.pendingRuns,
    );
    const partitions = merged.partitions.map((p): PartitionAnswer => {
      const r = rejected.get(p.partition);
      return { ...p, rejected: r?.byReason ?? {}, rejectedKnown: r?.known ?? true };
    });
    const answer: CubeAnswer = {
      namespace,
      cube: name,
      ...rows,
      complete: merged.complete,
      rejected: totalRejected(rejected.values()),
      rejectedKnown: partitions.every((p) => p.rejectedKnown),
      partitions,
      sources: {
        committed: {
          windows: committed.index?.windows ?? 0,
          handOffs: committed.index?.handOffs ?? 0,
          ...(committed.index?.predating ? { predating: committed.index.predating } : {}),
          ...(committed.index?.otherCube ? { otherCube: committed.index.otherCube } : {}),
          ...(committed.error ? { error: committed.error } : {}),
        },
        live: [...live.values()].map((l) => ({
          replicaSet: l.set,
          ...(l.receiver ? { receiver: l.receiver } : {}),
          pieces: l.answer?.pieces?.length ?? 0,
          ...(l.errors.length > 0 ? { errors: l.errors } : {}),
        })),
        counted: merged.committedCounted + merged.live.length,
        duplicates: merged.duplicates,
        conflicts: merged.conflicts,
      },
    };
    const incomplete = incompleteReasons(answer, merged);
    this.options.observe?.({
      seconds: (performance.now() - started) / 1000,
      piecesCommitted: merged.committedCounted,
      piecesLive: merged.live.length,
      receiverCalls: calls,
      incomplete,
    });
    if (q.requireComplete && !answer.complete) {
      const first = answer.partitions.find((p) => !p.complete)?.missing[0];
      throw new QueryError(
        503,
        `the answer is incomplete: ${first ? `offsets from ${first.from}${first.to ? ` to ${first.to}` : ''}: ${first.reason}` : (committed.error ?? 'unknown')}`,
      );
    }
    return answer;
  }

  /** One replica of `set` answering by segment, from the `from`-th Ready one on. */
  private async readLive(
    namespace: string,
    cube: string,
    set: string,
    q: ResolvedQuery,
    from: number,
    calls: { outcome: 'ok' | 'error' }[],
  ): Promise<LiveRead> {
    const receivers = this.options.sources.receivers(namespace, set);
    const errors: string[] = [];
    if (receivers.length === 0)
      return { set, errors: [`replica set ${set} has no ready receiver`], next: 0 };
    const request: QueryRequest = {
      ...(q.from === undefined ? {} : { from: q.from }),
      ...(q.to === undefined ? {} : { to: q.to }),
      filters: Object.fromEntries([...q.keep].map(([d, values]) => [d, [...values]])),
      groupBy: fetchDimensions(q),
      measures: q.measureNames,
      bySegment: true,
    };
    for (let i = from; i < receivers.length; i++) {
      const receiver = receivers[i]!;
      try {
        const answer = await this.options.sources.query(
          receiver,
          namespace,
          cube,
          request,
          AbortSignal.timeout(this.options.receiverTimeoutMs),
        );
        calls.push({ outcome: 'ok' });
        return { set, receiver: receiver.name, answer, errors, next: i + 1 };
      } catch (error) {
        // A receiver that does not hold the cube holds nothing of it.
        if (error instanceof ReceiverApiError && error.status === 404) {
          calls.push({ outcome: 'ok' });
          return { set, receiver: receiver.name, answer: nothingHeld, errors, next: i + 1 };
        }
        calls.push({ outcome: 'error' });
        errors.push(`receiver ${receiver.name} of replica set ${set}: ${errorText(error)}`);
      }
    }
    return { set, errors, next: receivers.length };
  }

  /**
   * The committed view as an index (every window's newest commit record, merged once per
   * listing), and the rows of the counted hand-offs in the time range: a whole block's from its
   * rollup, the others piece by piece.
   */
  private async readCommitted(
    namespace: string,
    cube: string,
    spec: CubeAssignment,
    q: ResolvedQuery,
    windowMs: number,
    relist: boolean,
  ): Promise<CommittedRead> {
    const { storage } = this.options.sources;
    const schema = spec.spec.schema;
    try {
      const uid = spec.metadata?.uid;
      const where = { namespace, cube, ...(uid ? { uid } : {}) };
      const { index, cached } = await this.cache.index(storage, where, windowMs, {
        relist,
        replays: resetAccounting(spec.status?.resets),
        began: whereTheCubeBegan(spec),
      });
      const runs = rollupRuns(
        index.countedIn(q.from, q.to),
        (piece) => index.blockOf(piece),
        q.granularityMs,
      );
      const rows: CountedRows[] = new Array<CountedRows>(runs.length);
      const rowsOf = async (piece: CommittedRef): Promise<PieceRow[]> =>
        pieceRowsOfHandOff(await this.cache.rows(storage, piece.key, schema), schema, q);
      // A block's rollup, or a piece's rows grouped as asked, kept under its id and the shape.
      const shape = rollupShape(q);
      const grouped = async (id: string, make: () => Promise<PieceRow[]>): Promise<PieceRow[]> => {
        const key = `${id}\u0000${shape}`;
        const kept = this.cache.rollup(key);
        if (kept) return kept;
        const made = await make();
        this.cache.keepRollup(key, made);
        return made;
      };
      const readsAtOnce = this.options.storageReadsAtOnce ?? 16;
      const read = limiter(readsAtOnce);
      await atMost(readsAtOnce, [...runs.keys()], async (i) => {
        const run = runs[i]!;
        const first = run.pieces[0]!;
        const last = run.pieces.at(-1)!;
        const block = run.block;
        const runRows = block
          ? await grouped(block.id, async () =>
              rollUp(
                await Promise.all(run.pieces.map((piece) => read(() => rowsOf(piece)))),
                schema,
                q,
              ),
            )
          : await grouped(first.key, () => read(() => rowsOf(first)));
        rows[i] = { windowStart: first.windowStart, windowEnd: last.windowEnd, rows: runRows };
      });
      return { index, rows, cached };
    } catch (error) {
      return { rows: [], cached: false, error: `deep storage: ${errorText(error)}` };
    }
  }

  /**
   * The committed index's merge, forked, offered the live pieces: the same outcome as one merge of
   * every piece, since committed pieces are always offered first.
   */
  private merge(
    cube: CubeAssignment,
    q: ResolvedQuery,
    committed: CommittedRead,
    live: Map<string, LiveRead>,
  ): MergeResult<Rowed> & {
    committedCounted: number;
    live: Piece<Rowed>[];
    pendingRuns: PendingRun[];
  } {
    const pieces: Piece<Rowed>[] = [];
    const pending = new Map<number, OffsetRange[]>();
    const pendingRuns: PendingRun[] = [];
    const bounds = new Map<number, PartitionBounds>();
    const boundOf = (p: number): PartitionBounds => {
      let b = bounds.get(p);
      if (!b) bounds.set(p, (b = {}));
      return b;
    };
    const status = cube.status;
    for (const ps of status?.partitions ?? [])
      if (ps.position !== undefined) boundOf(ps.partition).end = BigInt(ps.position);
    for (const [p, start] of Object.entries(status?.epochStarts ?? {}))
      boundOf(Number(p)).start = BigInt(start);
    for (const list of Object.values(status?.assignment ?? {})) for (const p of list) boundOf(p);
    const accounted: AccountedRanges = new Map();
    const began = whereTheCubeBegan(cube);
    const unavailable: Unavailable[] = [];
    if (committed.error) unavailable.push({ partitions: 'all', reason: committed.error });
    for (const l of live.values()) {
      if (!l.answer) {
        const held = partitionsHeldBy(cube, l.set);
        if (held.length > 0)
          unavailable.push({
            partitions: held,
            reason: l.errors.join('; ') || `replica set ${l.set} did not answer`,
          });
        continue;
      }
      for (const piece of l.answer.pieces ?? []) {
        const live = livePiece(l, piece, cube, q);
        // A receiver still holding an earlier cube's segment of the same name: not this cube's.
        if (predatesTheCube(live.ranges, began)) continue;
        pieces.push(live);
        addAccounted(accounted, 'retention', piece.lostRanges);
      }
      for (const [p, held] of Object.entries(l.answer.held ?? {})) {
        const b = boundOf(Number(p));
        const to = BigInt(held.to);
        if (b.end === undefined || to > b.end) b.end = to;
        const acc = pending.get(Number(p)) ?? [];
        const ranges: OffsetRange[] = [];
        for (const [from, end] of held.pending) {
          addRange(acc, BigInt(from), BigInt(end));
          addRange(ranges, BigInt(from), BigInt(end));
        }
        pending.set(Number(p), acc);
        pendingRuns.push({
          partition: Number(p),
          ranges,
          ...(held.pendingRejected ? { rejected: held.pendingRejected } : {}),
        });
      }
    }
    // A cube reading from the earliest offset began at 0: data missing before the first piece is
    // a gap, not where it began. (From the latest, where it began is known only by epochStarts.)
    if (cube.spec.source.startingOffsets !== 'latest')
      for (const b of bounds.values()) b.start = 0n;
    const resets = resetAccounting(status?.resets);
    const count: PieceCount<Rowed> = committed.index
      ? committed.index.count.fork<Rowed>()
      : new PieceCount<Rowed>(resets.replayOf);
    count.offer(pieces.sort(piecePreference));
    // Offsets Kafka deleted before any replica read them: before the cube began, the receivers'
    // reports in the cube's status (the latest ranges), their live segments' and the committed
    // hand-offs' (each names those right before its offsets).
    addAccounted(accounted, 'retention', deletedBeforeTheCube(cube));
    addAccounted(accounted, 'retention', lostInStatus(cube));
    addAccounted(accounted, 'retention', committed.index?.lost);
    return {
      ...finishMerge(count, {
        pending,
        bounds,
        unavailable,
        accounted,
        resets: resets.ranges.map((r) => ({ ...r, reason: resetRangeReason(r) })),
      }),
      committedCounted: count.countedBefore,
      // The fork holds only what it counted itself: the live pieces.
      live: count.counted,
      pendingRuns,
    };
  }
}

interface LiveRead {
  set: string;
  receiver?: string;
  answer?: QueryResponse;
  errors: string[];
  /** The index of the next Ready replica to ask (a sibling), if any. */
  next: number;
}

interface CommittedRead {
  /** Absent when deep storage could not be read. */
  index?: CommittedIndex;
  /** The counted committed rows of the time range, by piece or by block. */
  rows: CountedRows[];
  /** The listing came from the cache (it may miss windows committed since). */
  cached: boolean;
  error?: string;
}

function livePiece(
  l: LiveRead,
  piece: QueryPiece,
  cube: CubeAssignment,
  q: ResolvedQuery,
): Piece<Rowed> {
  const gen = piece.generation ? ` generation ${piece.generation}` : '';
  return {
    kind: 'live',
    source: `live ${l.receiver} window ${new Date(piece.windowStart).toISOString()}${gen}`,
    replicaSet: l.set,
    windowStart: piece.windowStart,
    ranges: rangeMapFromJson(piece.offsetRanges),
    epochs: new Map(Object.entries(piece.epochs).map(([p, e]) => [Number(p), e])),
    ...rejectedOf(piece.rejected),
    rows: {
      windowEnd: piece.windowEnd,
      rows: pieceRowsOfLive(piece.rows, fetchDimensions(q).length, cube.spec.schema, q),
    },
  };
}

/** Every replica set that may hold data of the cube: serving it, assigned, or keeping some. */
export function replicaSetsOf(cube: CubeAssignment): string[] {
  return [
    ...new Set([
      ...(cube.spec.replicaSets ?? []),
      ...Object.keys(cube.status?.assignment ?? {}),
      ...Object.keys(cube.status?.releasedUncommitted ?? {}),
    ]),
  ].sort();
}

/** The partitions a set holds live data of: those assigned to it, and those released uncommitted. */
export function partitionsHeldBy(cube: CubeAssignment, set: string): number[] {
  return [
    ...new Set([
      ...(cube.status?.assignment?.[set] ?? []),
      ...(cube.status?.releasedUncommitted?.[set] ?? []),
    ]),
  ];
}

function incompleteReasons(answer: CubeAnswer, merged: MergeResult<unknown>): IncompleteReason[] {
  if (answer.complete) return [];
  const out = new Set<IncompleteReason>();
  if (answer.sources.committed.error) out.add('deep_storage');
  if (answer.sources.live.some((l) => l.receiver === undefined)) out.add('receiver_unavailable');
  if (merged.conflicts.length > 0) out.add('conflict');
  if (out.size === 0) out.add('gap');
  return [...out];
}
