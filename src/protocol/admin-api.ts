// The receiver's admin API: every request and response body as one zod definition, from which
// come the TypeScript types, the server's validation of requests and the client's validation of
// answers. Paths are versioned.
import { z } from 'zod';
import {
  cubeName,
  cubeSchema,
  identifier,
  kafkaSource,
  plaintextSaslProblem,
} from '../api/cube.ts';
import { dnsLabelPattern, replicaSetName, segmentCounts } from '../api/cube-assignment.ts';
import { offset, partitionKey, partitionNumber } from '../api/kafka-numbers.ts';

export const epoch = z.number().int().min(0);

/** Lost ranges a partition's status lists at most, the latest ones; `lostOffsets` counts all. */
export const maxListedLostRanges = 10;

/**
 * The header carrying the leader term of the operator making a mutating call (PUT, DELETE, and
 * every POST but query): a decimal integer ≥ 0, the Lease's leaseTransitions when the operator
 * took it. A call without it is a call at term 0. Receivers keep the highest term seen per cube
 * and refuse a lower one with 409 and reason `StaleLeader`.
 */
export const leaderTermHeader = 'x-streamcube-term';
export const leaderTerm = z
  .string()
  .regex(/^[0-9]{1,15}$/, 'the leader term must be a decimal integer ≥ 0')
  .transform(Number);
export const staleLeaderReason = 'StaleLeader';

export const partitionStart = z.object({
  partition: partitionNumber,
  /** Next offset to consume. */
  position: offset,
  epoch,
  /** Event-time watermark carried over from the previous owner, so a move changes no decision. */
  watermark: z.number().int().nullable().default(null),
  /**
   * Offset ranges [from, to) at or past `position` that a fenced replica set committed already
   * (a failover): read over, never aggregated here, and reported as `elsewhere` in the coverage.
   */
  committedElsewhere: z
    .array(z.tuple([offset, offset]))
    .max(1000)
    .optional(),
});

/**
 * A CubeAssignment's metadata.uid: which cube of its name (one deleted and made again under the
 * same name is another). Written into the cube's hand-offs, commit records and fences, so that a
 * cube's commits and its query leave out another cube's records of the same name.
 */
export const cubeUid = z
  .string()
  .min(1)
  .max(128)
  .regex(/^[A-Za-z0-9-]+$/, 'must be a Kubernetes uid (letters, digits, -)');

export const assignCubeRequest = z.object({
  /**
   * The CubeAssignment's namespace (a DNS label). The path names it (`/v1/namespaces/<ns>/…`);
   * when the body names it too, the two must agree. Absent from an operator before namespaces.
   */
  namespace: cubeName.optional(),
  /** SASL only over TLS unless the cube allows plaintext: a caller cannot send credentials in clear. */
  source: kafkaSource.superRefine((source, ctx) => {
    const plaintext = plaintextSaslProblem(source);
    if (plaintext !== undefined)
      ctx.addIssue({ code: 'custom', message: plaintext, path: ['sasl'] });
  }),
  schema: cubeSchema,
  /** A DNS label: it becomes part of the cube's deep-storage keys. */
  replicaSet: replicaSetName,
  partitions: z.array(partitionStart).max(10_000),
  /** The CubeAssignment's metadata.uid; absent from an operator before it was sent (unknown). */
  cubeUid: cubeUid.optional(),
});
export type AssignCubeRequest = z.input<typeof assignCubeRequest>;

export const partitionsRequest = z.object({ partitions: z.array(partitionNumber).min(1) });
export type PartitionsRequest = z.infer<typeof partitionsRequest>;

export const releaseRequest = partitionsRequest.extend({
  /**
   * partition → the offset its next owner starts from. A partition short of it is refused (409:
   * drain it first); one past it is released with the segments holding the excess fenced: dropped,
   * never handed off. Absent: released where it is.
   */
  stopOffsets: z.record(partitionKey, offset).optional(),
});
export type ReleaseRequest = z.input<typeof releaseRequest>;

export const drainRequest = z.object({
  /** partition → stop offset: consume up to, not including, this offset and stop. */
  stopOffsets: z.record(partitionKey, offset),
  timeoutMs: z.number().int().min(0).max(600_000).default(30_000),
});
export type DrainRequest = z.input<typeof drainRequest>;

/**
 * POST …/cubes/:cube/fence, to a receiver of another replica set: fences `replicaSet` (lost, or
 * the source of a move some of whose replicas missed the release) for `partitions` — a record in
 * deep storage under which none of that set's copies holding those partitions under those epochs
 * or older (at or past `from`, when given) is committed any more — then, after `graceMs` (for a
 * commit of the set already under way), takes the set's next record version of each of its
 * windows and reads what the set had committed of them (hand-off-commit.ts, fenceReplicaSet).
 */
export const fenceRequest = z.object({
  /** A DNS label, as every replica set name: it becomes part of a deep-storage key. */
  replicaSet: replicaSetName,
  /**
   * The failover's id: the fence record's name (the same request twice writes it once). A DNS
   * label, as the operator makes them (`f-<generation>-<hex>`, `…-stop`): it becomes a file name.
   */
  id: z
    .string()
    .min(1)
    .max(63)
    .regex(dnsLabelPattern, 'must be a DNS label (lowercase letters, digits, -)'),
  /** partition → the highest epoch fenced. */
  partitions: z.record(partitionKey, epoch),
  /** partition → the first offset fenced (a move's stop offset); absent: every offset. */
  from: z.record(partitionKey, offset).optional(),
  graceMs: z.number().int().min(0).max(60_000).default(5_000),
  /** The CubeAssignment's metadata.uid, written into the fence: another cube's commits ignore it. */
  cubeUid: cubeUid.optional(),
});
export type FenceRequest = z.input<typeof fenceRequest>;

export const fenceResponse = z.object({
  /** partition → merged ranges [from, to) the set's latest commit records cover. */
  committed: z.record(partitionKey, z.array(z.tuple([offset, offset]))),
  /** The set's commit records read (the newest of each window). */
  records: z.int().min(0),
});
export type FenceResponse = z.infer<typeof fenceResponse>;

export const sealRequest = z.object({
  /** Wait for the hand-off of the sealed segments, up to this long. */
  waitMs: z.number().int().min(0).max(600_000).default(0),
});

export const queryRequest = z.object({
  /** Event-time range [from, to), epoch milliseconds; segments overlapping it answer. */
  from: z.number().int().optional(),
  to: z.number().int().optional(),
  filters: z.record(identifier, z.array(z.string())).default({}),
  groupBy: z.array(identifier).default([]),
  measures: z.array(identifier).optional(),
  /**
   * Also answer each live segment apart (`pieces`) and what is held per partition (`held`): what
   * the query service merges with the committed view, by offsets.
   */
  bySegment: z.boolean().optional(),
});
export type QueryRequest = z.input<typeof queryRequest>;

/** What a partition is set to do: the receiver keeps it (and checkpoints it) through failures. */
export const partitionStates = ['consuming', 'paused', 'draining', 'stopped', 'released'] as const;
export type PartitionStateName = (typeof partitionStates)[number];

/**
 * The state a partition reports: its own state, or `failed` while it should be consuming or
 * draining but the cube's Kafka consumer is down (it resumes as `intendedState` once the
 * consumer is back).
 */
export const reportedPartitionStates = [...partitionStates, 'failed'] as const;
export type ReportedPartitionState = (typeof reportedPartitionStates)[number];

/** One partition of a cube as a receiver reports it. */
export const partitionStatus = z.object({
  partition: partitionNumber,
  state: z.enum(reportedPartitionStates),
  /** While `failed`: the state the partition returns to when its consumer recovers. */
  intendedState: z.enum(['consuming', 'draining']).optional(),
  /** While `failed`: the consumer's last error. */
  error: z.string().optional(),
  epoch,
  /** Next offset to consume. */
  position: offset,
  highWatermark: offset.nullable(),
  /** highWatermark − position: 0 when caught up. */
  lag: offset.nullable(),
  stopOffset: offset.nullable(),
  watermark: z.int().nullable(),
  /**
   * Offsets Kafka deleted (retention) before this receiver read them, in all since the cube was
   * assigned here; absent when none was.
   */
  lostOffsets: offset.optional(),
  /** The latest of those ranges [from, to), oldest first. */
  lostRanges: z
    .array(z.tuple([offset, offset]))
    .max(maxListedLostRanges)
    .optional(),
  /**
   * When this replica last consumed records of the partition (its position moved), ISO-8601;
   * absent until it has since it started. A released source's is when it consumed its last event.
   */
  consumedAt: z.string().optional(),
  /** When it first consumed records of the partition under this epoch: a target's first event. */
  firstConsumedAt: z.string().optional(),
});
export type PartitionStatus = z.infer<typeof partitionStatus>;

const offsetRanges = z.record(partitionKey, z.array(z.tuple([offset, offset])));

export const segmentStates = ['ACTIVE', 'IMMUTABLE', 'HANDED_OFF'] as const;

export const segmentStatus = z.object({
  windowStart: z.int(),
  windowEnd: z.int(),
  /**
   * Present (1, 2…) on a window's later segments: one opened after the window's first was sealed,
   * for a partition that had not passed the window yet (moved in from another replica set, or
   * silent). A window's generations hold disjoint offsets; a reader adds them up.
   */
  generation: z.int().min(1).optional(),
  state: z.enum(segmentStates),
  rowCount: z.int().min(0),
  /** partition → [[from, to), ...] offsets accounted to this segment. */
  offsetRanges,
  /**
   * partition → offsets Kafka deleted before they were read, right before a range of this
   * segment (reading went on from their end); with `offsetRanges` they tile the log. Absent: none.
   */
  lostRanges: offsetRanges.optional(),
  epochs: z.record(partitionKey, epoch),
  handOff: z
    .object({
      path: z.string().optional(),
      attempts: z.int().min(0),
      lastError: z.string().optional(),
      /** When a failed hand-off is tried again (ISO-8601); retries back off exponentially. */
      nextAttemptAt: z.string().optional(),
      /**
       * The window's commit record for this replica set after this receiver's last commit of the
       * window (hand-off-commit.ts): which replica's copy readers read. `committed`: this
       * receiver's, `covered`: another replica's covering at least as much, `behind`: another's
       * covering offsets this one has not handed off yet, `fenced`: never to be committed, its
       * replica set fenced by a failover (`by` names the fence; `version` 0: no record).
       */
      commit: z
        .object({
          outcome: z.enum(['committed', 'covered', 'behind', 'fenced']),
          by: z.string(),
          version: z.int().min(0),
        })
        .optional(),
    })
    .optional(),
});
export type SegmentStatus = z.infer<typeof segmentStatus>;

/**
 * The cube's Kafka consumer. `failed` from a crash or a failed start until a restarted consumer
 * has delivered records or stayed up for a while; restarts back off exponentially meanwhile.
 */
export const consumerStatus = z.object({
  state: z.enum(['running', 'failed']),
  /** Crashes and failed starts since the receiver opened the cube. */
  failures: z.int().min(0),
  /** While failed: the last error, as the Kafka client named it. */
  error: z.object({ name: z.string(), message: z.string() }).optional(),
  /** While failed: when the consumer first failed (ISO-8601), through the restarts since. */
  failedSince: z.string().optional(),
});
export type ConsumerStatus = z.infer<typeof consumerStatus>;

/** What every status of a cube says, with or without its segments. */
const cubeStatusBase = z.object({
  /** The cube's namespace: with `cube`, who it is on the receiver. */
  namespace: cubeName,
  cube: cubeName,
  replicaSet: z.string(),
  receiver: z.string(),
  topic: z.string(),
  /** cubeSpecDigest of the source and schema the receiver runs for this cube. */
  specDigest: z.string(),
  partitions: z.array(partitionStatus),
  /** Events aggregated into segments since the cube was assigned here (kept across restarts). */
  ingested: z.int().min(0),
  /** Records skipped, by reason, since the cube was assigned here (kept across restarts). */
  rejected: z.record(z.string(), z.int().min(0)),
  consumer: consumerStatus,
  /**
   * partition → the offsets this receiver keeps of it (in segments of any state, purged ones
   * included, and offsets pending a segment) and, of those, the ones handed off and committed
   * (their window's commit record is this receiver's or covers them, or a sibling's record this
   * receiver's copy is behind holds them: hand-off-commit.ts), as merged
   * ranges [from, to); absent when a checkpoint of an older receiver left the purged ones
   * unknown. The operator checks with them that each partition's offsets tile across replica
   * sets, and how far each is handed off.
   */
  coverage: z
    .record(
      partitionKey,
      z.object({
        kept: z.array(z.tuple([offset, offset])),
        handedOff: z.array(z.tuple([offset, offset])),
        /**
         * Offsets a fenced replica set committed, read over here (a failover's new owner): in no
         * segment of this receiver, counted in that set's commit records. Absent: none.
         */
        elsewhere: z.array(z.tuple([offset, offset])).optional(),
      }),
    )
    .optional(),
});

export const cubeStatus = cubeStatusBase.extend({
  /** Every ACTIVE and IMMUTABLE segment, and the latest handed-off ones, in window order. */
  segments: z.array(segmentStatus),
  /** Every segment held, by state: older handed-off ones are counted here, not listed. */
  segmentCounts: z.partialRecord(z.enum(segmentStates), z.int().min(0)).optional(),
});
export type CubeStatus = z.infer<typeof cubeStatus>;

/** A cube's status with its segments counted by state, not listed: what the operator reads. */
export const cubeSummary = cubeStatusBase.extend({ segments: segmentCounts });
export type CubeSummary = z.infer<typeof cubeSummary>;

/** The summary of a full cube status: its segments counted by state. */
export function cubeSummaryOf(status: CubeStatus): CubeSummary {
  const { segmentCounts, ...rest } = status;
  return { ...rest, segments: summarySegments(segmentCounts ?? countStates(status.segments)) };
}

/** Segments counted by state. */
export function countStates(
  segments: Iterable<{ state: (typeof segmentStates)[number] }>,
): Partial<Record<(typeof segmentStates)[number], number>> {
  const counts: Partial<Record<(typeof segmentStates)[number], number>> = {};
  for (const s of segments) counts[s.state] = (counts[s.state] ?? 0) + 1;
  return counts;
}

/** A summary's `segments` from counts by state. */
export function summarySegments(
  counts: Partial<Record<(typeof segmentStates)[number], number>>,
): CubeSummary['segments'] {
  return {
    active: counts.ACTIVE ?? 0,
    immutable: counts.IMMUTABLE ?? 0,
    handedOff: counts.HANDED_OFF ?? 0,
  };
}

/**
 * GET /v1/namespaces/:ns/cubes/:cube?view=summary: the summary, or the full status from a
 * receiver of before the view (which ignores the parameter), summarised here.
 */
export const cubeSummaryAnswer = z.union([cubeSummary, cubeStatus.transform(cubeSummaryOf)]);

/** GET /v1/cubes: every cube of the receiver, summarised; one call covers them all. */
export const cubeSummaries = z.object({
  receiver: z.string(),
  replicaSet: z.string(),
  cubes: z.array(cubeSummary),
});
export type CubeSummaries = z.infer<typeof cubeSummaries>;

export const receiverStatus = z.object({
  receiver: z.string(),
  replicaSet: z.string(),
  cubes: z.array(cubeStatus),
});
export type ReceiverStatus = z.infer<typeof receiverStatus>;

export const partitionsResponse = z.object({ partitions: z.array(partitionStatus) });
export type PartitionsResponse = z.infer<typeof partitionsResponse>;

export const drainResponse = z.object({
  done: z.boolean(),
  partitions: z.array(partitionStatus),
});
export type DrainResponse = z.infer<typeof drainResponse>;

export const unassignResponse = z.object({
  namespace: cubeName,
  cube: cubeName,
  unassigned: z.literal(true),
});
export type UnassignResponse = z.infer<typeof unassignResponse>;

const queryRows = z.array(z.array(z.union([z.string(), z.number()])));

/** Records rejected, by reason (the reasons of the receiver's `rejected` counter). */
const reasonCounts = z.record(z.string(), z.int().min(0));

/** One live (not handed-off) segment in a query's answer by segment. */
export const queryPiece = z.object({
  windowStart: z.int(),
  windowEnd: z.int(),
  /** As in segmentStatus: present on a window's later segments. */
  generation: z.int().min(1).optional(),
  epochs: z.record(partitionKey, epoch),
  offsetRanges,
  /** false: outside the query's [from, to): its offsets are accounted, its rows left out. */
  inRange: z.boolean(),
  /**
   * partition → records rejected among the segment's offsets, by reason (no row holds them);
   * absent when the receiver does not know (a segment restored from a checkpoint of before).
   */
  rejected: z.record(partitionKey, reasonCounts).optional(),
  /** As in segmentStatus: offsets Kafka deleted right before the segment's ranges. Absent: none. */
  lostRanges: offsetRanges.optional(),
  /** The segment's rows, filtered and grouped as the answer's `rows` are. */
  rows: queryRows,
});
export type QueryPiece = z.infer<typeof queryPiece>;

export const queryResponse = z.object({
  columns: z.array(z.string()),
  rows: queryRows,
  /** partition → offset ranges the answer covers. */
  offsetRanges,
  segments: z.int().min(0),
  /** With `bySegment`: every segment not handed off, each apart (in or out of the time range). */
  pieces: z.array(queryPiece).optional(),
  /**
   * With `bySegment`: partition → what this receiver holds of it: `to`, the end of the offsets
   * its held segments (handed-off ones too) and `pending` cover (its position, unless a segment
   * was purged since); `pending`, offsets consumed that carry no event and are in no segment yet.
   */
  held: z
    .record(
      partitionKey,
      z.object({
        to: offset,
        pending: z.array(z.tuple([offset, offset])),
        /** Records rejected among `pending`, by reason; absent when not known. */
        pendingRejected: reasonCounts.optional(),
      }),
    )
    .optional(),
});
export type QueryResponse = z.infer<typeof queryResponse>;

export const errorResponse = z.object({
  error: z.string(),
  /** The request field at fault, as a dotted path, when there is one. */
  field: z.string().optional(),
  /** What went wrong, for a person; `StaleLeader` (a 409) for a call from a deposed operator. */
  reason: z.string(),
  /** With a machine-readable `reason` (`StaleLeader`): the text for a person. */
  message: z.string().optional(),
});
export type ErrorResponse = z.infer<typeof errorResponse>;

export { cubeName };
