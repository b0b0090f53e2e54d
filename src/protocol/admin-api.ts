// The receiver's admin API: every request and response body as one zod definition, from which
// come the TypeScript types, the server's validation and the client's types. Paths are versioned.
import { z } from 'zod';
import { cubeName, cubeSchema, identifier, kafkaSource } from '../api/cube.ts';

/** Kafka offsets travel as decimal strings: int64 does not fit a JSON number. */
export const offset = z
  .string()
  .regex(/^(0|[1-9][0-9]{0,18})$/, 'must be a non-negative int64 as a decimal string');
export const partitionId = z.number().int().min(0).max(1_000_000);
export const epoch = z.number().int().min(0);

export const partitionStart = z.object({
  partition: partitionId,
  /** Next offset to consume. */
  position: offset,
  epoch,
  /** Event-time watermark carried over from the previous owner, so a move changes no decision. */
  watermark: z.number().int().nullable().default(null),
});

export const assignCubeRequest = z.object({
  source: kafkaSource,
  schema: cubeSchema,
  replicaSet: z.string().min(1).max(63),
  partitions: z.array(partitionStart).max(10_000),
});
export type AssignCubeRequest = z.input<typeof assignCubeRequest>;

export const partitionsRequest = z.object({ partitions: z.array(partitionId).min(1) });
export type PartitionsRequest = z.infer<typeof partitionsRequest>;

export const drainRequest = z.object({
  /** partition → stop offset: consume up to, not including, this offset and stop. */
  stopOffsets: z.record(z.string().regex(/^[0-9]+$/, 'keys must be partition numbers'), offset),
  timeoutMs: z.number().int().min(0).max(600_000).default(30_000),
});
export type DrainRequest = z.input<typeof drainRequest>;

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
export type ReportedPartitionState = PartitionStateName | 'failed';

export interface PartitionStatus {
  partition: number;
  state: ReportedPartitionState;
  /** While `failed`: the state the partition returns to when its consumer recovers. */
  intendedState?: 'consuming' | 'draining';
  /** While `failed`: the consumer's last error. */
  error?: string;
  epoch: number;
  /** Next offset to consume. */
  position: string;
  highWatermark: string | null;
  /** highWatermark − position: 0 when caught up. */
  lag: string | null;
  stopOffset: string | null;
  watermark: number | null;
}

export interface SegmentStatus {
  windowStart: number;
  windowEnd: number;
  state: 'ACTIVE' | 'IMMUTABLE' | 'HANDED_OFF';
  rowCount: number;
  /** partition → [[from, to), ...] offsets accounted to this segment. */
  offsetRanges: Record<string, [string, string][]>;
  epochs: Record<string, number>;
  handOff?: { path?: string; attempts: number; lastError?: string };
}

export interface CubeStatus {
  cube: string;
  replicaSet: string;
  receiver: string;
  topic: string;
  /** cubeSpecDigest of the source and schema the receiver runs for this cube. */
  specDigest: string;
  partitions: PartitionStatus[];
  /** Every ACTIVE and IMMUTABLE segment, and the latest handed-off ones, in window order. */
  segments: SegmentStatus[];
  /** Every segment held, by state: older handed-off ones are counted here, not listed. */
  segmentCounts?: Record<SegmentStatus['state'], number>;
  /** Events aggregated into segments since the cube was assigned here (kept across restarts). */
  ingested: number;
  /** Records skipped, by reason, since the cube was assigned here (kept across restarts). */
  rejected: Record<string, number>;
  consumer: ConsumerStatus;
}

/**
 * The cube's Kafka consumer. `failed` from a crash or a failed start until a restarted consumer
 * has delivered records or stayed up for a while; restarts back off exponentially meanwhile.
 */
export interface ConsumerStatus {
  state: 'running' | 'failed';
  /** Crashes and failed starts since the receiver opened the cube. */
  failures: number;
  /** While failed: the last error, as the Kafka client named it. */
  error?: { name: string; message: string };
  /** While failed: when the consumer first failed (ISO-8601), through the restarts since. */
  failedSince?: string;
}

export interface ReceiverStatus {
  receiver: string;
  replicaSet: string;
  cubes: CubeStatus[];
}

export interface DrainResponse {
  done: boolean;
  partitions: PartitionStatus[];
}

export interface QueryResponse {
  columns: string[];
  rows: (string | number)[][];
  /** partition → offset ranges the answer covers. */
  offsetRanges: Record<string, [string, string][]>;
  segments: number;
}

export interface ErrorResponse {
  error: string;
  /** The request field at fault, as a dotted path, when there is one. */
  field?: string;
  reason: string;
}

export { cubeName };
