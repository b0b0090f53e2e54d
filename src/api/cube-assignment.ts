// The CubeAssignment resource: which replica sets serve one cube, and what the operator observed.
// These zod definitions are the one source of truth for the TypeScript types, runtime checks and
// the CRD (src/api/crd.ts); the CEL rules beside them say to the API server what zod refines.
import { z } from 'zod';
import type { V1ObjectMeta } from '@kubernetes/client-node';
import { cubeSchema, identifier, kafkaSource, measure, plaintextSaslProblem } from './cube.ts';
import { condition } from './conditions.ts';
import { offset, partitionKey, partitionNumber } from './kafka-numbers.ts';
import { kubernetes } from './structural-schema.ts';

export { offset, partitionKey, partitionNumber };

export const group = 'streamcube.io';
export const version = 'v1alpha1';
export const apiVersion = `${group}/${version}` as const;
export const kind = 'CubeAssignment';
export const listKind = 'CubeAssignmentList';
export const plural = 'cubeassignments';
export const singular = 'cubeassignment';
export const shortNames = ['cube'];

// Bounds keep the API server's estimate of the CEL rules' cost within its budget (the disjoint
// pins rule is quadratic in both); they are far above what a cube uses.
export const maxReplicaSets = 32;
export const maxPinnedReplicaSets = 16;
export const maxPinnedPartitions = 128;
export const maxMeasures = 64;
export const maxBrokers = 32;

export const dnsLabelPattern = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const dnsSubdomainPattern = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/**
 * Durations in the units CEL's duration() (Go's time.ParseDuration) shares with parseDuration:
 * no `d`. At most six digits per part and 20 characters keep every value inside int64
 * nanoseconds, beyond which duration() fails with an evaluation error instead of a message.
 */
export const kubernetesDurationPattern = '^([0-9]{1,6}(ms|s|m|h))+$';
export const kubernetesDuration = z
  .string()
  .max(20)
  .regex(new RegExp(kubernetesDurationPattern), 'must be a duration like 1h, 10m, 1h30m, 500ms');

/** Replica set names are DNS labels: they are StatefulSet names and label values. */
export const replicaSetName = z
  .string()
  .max(63)
  .regex(dnsLabelPattern, 'must be a DNS label (lowercase letters, digits, -)');

export const secretName = z
  .string()
  .max(253)
  .regex(dnsSubdomainPattern, 'must be the name of a Secret in the same namespace');

export const timestamp = z.iso.datetime();

/** A share such as 1%, 0.5% or 100%: at most two decimals, as a string (no floats in a spec). */
export const percentagePattern = '^(100|[0-9]{1,2}([.][0-9]{1,2})?)%$';
export const percentage = z
  .string()
  .max(6)
  .regex(new RegExp(percentagePattern), 'must be a percentage from 0% to 100%, such as 1% or 0.5%');

/** A valid percentage in hundredths of a percent, exact for comparisons: '1%' → 100, '0.5%' → 50. */
export const basisPointsOf = (text: string): number => Math.round(Number(text.slice(0, -1)) * 100);

const uniqueItems = <T>(items: readonly T[]): boolean => new Set(items).size === items.length;

export const saslMechanisms = ['plain', 'scram-sha-256', 'scram-sha-512'] as const;
export type SaslMechanism = (typeof saslMechanisms)[number];

export const cubeSource = kafkaSource
  .extend({
    brokers: kafkaSource.shape.brokers.max(maxBrokers),
    tls: z
      .object({
        secretRef: secretName
          .optional()
          .describe(
            'Secret with ca.crt (and tls.crt, tls.key for mutual TLS); without it the system trust store is used.',
          ),
      })
      .optional()
      .describe('Connect to the brokers over TLS.'),
    sasl: z
      .object({
        mechanism: z.enum(saslMechanisms),
        secretRef: secretName.describe('Secret with the keys username and password.'),
      })
      .optional()
      .describe('Authenticate to the brokers with SASL (with tls, unless allowPlaintext).'),
    allowPlaintext: z
      .boolean()
      .optional()
      .describe(
        'Allow sasl without tls: the credentials then cross the network unencrypted. Refused by default.',
      ),
  })
  .meta(
    kubernetes({
      validations: [
        {
          rule: '!has(self.sasl) || has(self.tls) || (has(self.allowPlaintext) && self.allowPlaintext)',
          message:
            'spec.source.sasl without spec.source.tls sends the credentials unencrypted: add tls, or set allowPlaintext: true',
          fieldPath: '.sasl',
        },
        {
          // Segments, hand-offs and epochs are offsets of this topic: another topic is another cube.
          rule: 'self.topic == oldSelf.topic',
          message:
            'spec.source.topic is immutable: stored segments hold offsets of this topic; create a new CubeAssignment to read another topic',
          fieldPath: '.topic',
        },
      ],
    }),
  );
export type CubeSource = z.infer<typeof cubeSource>;

const boundedMeasure = measure
  .safeExtend({ name: identifier.max(63), field: z.string().min(1).max(253).optional() })
  .meta(
    kubernetes({
      validations: [
        {
          rule: "self.function == 'count' || has(self.field)",
          message: 'field is required when function is sum, min or max',
          fieldPath: '.field',
          reason: 'FieldValueRequired',
        },
        {
          rule: "self.function == 'sum' || !has(self.scale)",
          message: 'scale is for sum only',
          fieldPath: '.scale',
        },
      ],
    }),
  );

// The API server runs CEL rules even when a pattern already failed; the guard keeps duration()
// from adding a conversion error to the pattern's clear message.
const durationGuard = (field: string): string =>
  `self.${field}.matches('${kubernetesDurationPattern}')`;

/** The cube schema of src/api/cube.ts with the bounds and duration units the CRD needs. */
export const assignedCubeSchema = cubeSchema
  .safeExtend({
    dimensions: z
      .array(identifier.max(63))
      .max(32)
      .default([])
      .meta(kubernetes({ listType: 'set' })),
    measures: z.array(boundedMeasure).min(1).max(maxMeasures),
    timestampField: z.string().min(1).max(253),
    window: kubernetesDuration.describe('Length of a segment window, e.g. 1h.'),
    allowedLateness: kubernetesDuration
      .default('0s')
      .describe('How long after its end a window still takes late events; below window.'),
  })
  .meta(
    kubernetes({
      validations: [
        {
          rule: `!${durationGuard('window')} || duration(self.window) > duration('0s')`,
          message: 'window must be a positive duration',
          fieldPath: '.window',
        },
        {
          rule: `!has(self.allowedLateness) || !${durationGuard('allowedLateness')} || !${durationGuard('window')} || duration(self.allowedLateness) < duration(self.window)`,
          message: 'allowedLateness must be below window',
          fieldPath: '.allowedLateness',
        },
        {
          rule: 'self.measures.all(m, !(has(self.dimensions) && m.name in self.dimensions) && self.measures.exists_one(n, n.name == m.name))',
          message: 'names must be unique across dimensions and measures',
          fieldPath: '.measures',
        },
        {
          // Every part of the schema decides what stored segments mean: their rows (timestamp
          // field, dimensions, measures), their windows, and which events they took (lateness).
          rule: 'self == oldSelf',
          message:
            'spec.schema is immutable: it defines the data already stored in segments and hand-offs; create a new CubeAssignment for a new schema',
        },
      ],
    }),
  );
export type AssignedCubeSchema = z.infer<typeof assignedCubeSchema>;

export const assignmentStrategies = ['range', 'roundRobin', 'sticky'] as const;
export type AssignmentStrategy = (typeof assignmentStrategies)[number];

/** replica set → partitions; partitions of a cube are disjoint across replica sets. */
const partitionsByReplicaSet = (maxKeys?: number, maxPartitions?: number) => {
  const map = z.record(
    replicaSetName,
    (maxPartitions === undefined
      ? z.array(partitionNumber)
      : z.array(partitionNumber).max(maxPartitions)
    )
      .refine(uniqueItems, 'partitions must be unique')
      .meta(kubernetes({ listType: 'set' })),
  );
  return maxKeys === undefined
    ? map
    : map.refine((m) => Object.keys(m).length <= maxKeys, `at most ${maxKeys} replica sets`);
};

export const cubeAssignmentSpec = z
  .object({
    source: cubeSource,
    schema: assignedCubeSchema,
    replicaSets: z
      .array(replicaSetName)
      .min(1)
      .max(maxReplicaSets)
      .refine(uniqueItems, 'replica sets must be unique')
      .meta(kubernetes({ listType: 'set' }))
      .describe('Replica sets (StatefulSets labelled streamcube.io/replica-set) serving the cube.'),
    strategy: z
      .enum(assignmentStrategies)
      .default('sticky')
      .describe('How partitions are spread over replica sets that pins do not cover.'),
    pins: partitionsByReplicaSet(maxPinnedReplicaSets, maxPinnedPartitions)
      .meta(
        kubernetes({
          maxProperties: maxPinnedReplicaSets,
          validations: [
            {
              rule: 'self.all(a, self.all(b, a == b || self[a].all(p, !(p in self[b]))))',
              message: 'a partition is pinned to more than one replica set; pins must be disjoint',
            },
          ],
        }),
      )
      .optional()
      .describe('Explicit placement replica set → partitions; overrides the strategy.'),
    suspend: z
      .boolean()
      .default(false)
      .describe('Stop reconciling: no moves start (one in flight completes).'),
    failoverAfter: kubernetesDuration
      .default('5m')
      .describe(
        'How long every receiver pod of a replica set holding partitions may be not Ready before its partitions fail over to the other replica sets, from the end of what it committed (its copies fenced).',
      ),
    rejectedEventsThreshold: percentage
      .default('1%')
      .describe(
        'Degraded (EventsRejected) when a receiver rejects more than this share of the records it read over the last minutes (too late for a sealed window, or not a valid event); 100% turns it off.',
      ),
  })
  .superRefine((spec, ctx) => {
    const plaintext = plaintextSaslProblem(spec.source);
    if (plaintext !== undefined)
      ctx.addIssue({ code: 'custom', message: plaintext, path: ['source', 'sasl'] });
    const pinned = new Map<number, string>();
    for (const [replicaSet, partitions] of Object.entries(spec.pins ?? {})) {
      if (!spec.replicaSets.includes(replicaSet)) {
        ctx.addIssue({
          code: 'custom',
          message: `replica set '${replicaSet}' is pinned but not listed in replicaSets`,
          path: ['pins', replicaSet],
        });
      }
      for (const p of partitions) {
        const other = pinned.get(p);
        if (other !== undefined) {
          ctx.addIssue({
            code: 'custom',
            message: `partition ${p} is pinned to both '${other}' and '${replicaSet}'`,
            path: ['pins', replicaSet],
          });
        }
        pinned.set(p, replicaSet);
      }
    }
  })
  .meta(
    kubernetes({
      validations: [
        {
          rule: '!has(self.pins) || self.pins.all(rs, rs in self.replicaSets)',
          message: 'every replica set in pins must be listed in replicaSets',
          fieldPath: '.pins',
        },
      ],
    }),
  );
export type CubeAssignmentSpec = z.infer<typeof cubeAssignmentSpec>;
/** The spec as written in a manifest: defaulted fields may be left out. */
export type CubeAssignmentSpecInput = z.input<typeof cubeAssignmentSpec>;

export const reassignPhases = [
  'Planned',
  'Pausing',
  'Draining',
  /** A failover only: the lost replica sets are fenced and their committed offsets read. */
  'Fencing',
  'Starting',
  'Sealing',
  'Done',
] as const;
export type ReassignPhase = (typeof reassignPhases)[number];

export const partitionMove = z.object({
  partition: partitionNumber,
  /** Absent when the partition had no owner (a new partition or a lost replica set). */
  from: replicaSetName.optional(),
  to: replicaSetName,
});
export type PartitionMove = z.infer<typeof partitionMove>;

/** partition → offset ranges [from, to) another replica set committed: read over, not again. */
const committedRanges = z.record(
  partitionKey,
  z.array(z.object({ from: offset, to: offset })).max(1000),
);

/** Replica sets a move fenced in deep storage, and where the new owners read over their data. */
const fencedSets = z.object({
  replicaSets: z
    .array(replicaSetName)
    .min(1)
    .meta(kubernetes({ listType: 'set' })),
  /**
   * partition → offset ranges [from, to) at or past its stop offset that a fenced set had
   * committed already (the stop offsets are past the first of them): the new owner skips them
   * (they are counted once, in that set's commit records). Written with the fence.
   */
  committedAbove: committedRanges.optional(),
});

/** The journal of the move in flight; every phase is persisted before the next begins. */
export const reassignJournal = z.object({
  id: z.string().min(1).max(63),
  phase: z.enum(reassignPhases),
  moves: z.array(partitionMove).meta(kubernetes({ listType: 'map', listMapKeys: ['partition'] })),
  /** stop[p] = max position over the source replicas; set when merging after the pause. */
  stopOffsets: z.record(partitionKey, offset).optional(),
  /**
   * Event-time watermark (epoch ms) of each moving partition once drained, the highest over the
   * source replicas: the target starts with it, so the move changes no lateness decision.
   */
  watermarks: z.record(partitionKey, z.int()).optional(),
  /**
   * Present on a failover: the replica sets lost (no ready receiver for spec.failoverAfter) whose
   * partitions the moves take elsewhere. Its phases are Planned → Fencing → Starting.
   */
  failover: fencedSets.optional(),
  /**
   * Written in Starting when a source set has replicas that are not Ready (they missed the
   * release, and may come back consuming past the stop offsets under the old epoch): each such
   * set is fenced in deep storage from the stop offsets on, before any target starts.
   */
  stopFence: fencedSets.optional(),
  /**
   * Written in Starting when a set of the move has had no ready receiver for spec.failoverAfter
   * before the targets started (they wait for the sources' data to be committed): the set is
   * fenced; the partitions it was the source of restart from the end of what it committed, not the
   * stop offsets, and those moved to it go to their source, or another live set, instead.
   */
  lostSets: fencedSets.optional(),
  /**
   * The targets started before the sources' data of the moved partitions was committed (they
   * waited the phase timeout for it): a source set lost since keeps that data
   * (status.releasedUncommitted) and is not failed over until it is committed.
   */
  startedUncommitted: z.boolean().optional(),
  startedAt: timestamp,
  /** When the current phase began: its deadline counts from here. */
  phaseStartedAt: timestamp.optional(),
});
export type ReassignJournal = z.infer<typeof reassignJournal>;

/** What the operator observed of one partition, for users (status.partitions). */
export const observedPartition = z.object({
  partition: partitionNumber,
  replicaSet: replicaSetName,
  /** Next offset to consume. */
  position: offset.optional(),
  highWatermark: offset.optional(),
  lag: offset.optional(),
  /**
   * Offsets Kafka deleted (retention) before the replica set read them, in all, as its receivers
   * report them; absent when none was. They are in no segment.
   */
  lostOffsets: offset.optional(),
  /** The latest of those ranges [from, to), oldest first. */
  lostRanges: z
    .array(z.object({ from: offset, to: offset }))
    .max(10)
    .optional(),
  /**
   * Offsets before this one, from the first a receiver keeps, are handed off to deep storage and
   * committed (a commit record of their window names a copy holding them): the partition's
   * committed-to offset. Written at most once per resync, like the position.
   */
  handedOffTo: offset.optional(),
});
export type ObservedPartition = z.infer<typeof observedPartition>;

export const segmentCounts = z.object({
  active: z.int().min(0),
  immutable: z.int().min(0),
  handedOff: z.int().min(0),
});
export type SegmentCounts = z.infer<typeof segmentCounts>;

export const cubeAssignmentStatus = z
  .object({
    observedGeneration: z.int().min(0).optional(),
    /** cubeSpecDigest of the source and schema every receiver holding the cube was brought to. */
    specDigest: z.string().max(64).optional(),
    /** replica set → partitions, as applied now. */
    assignment: partitionsByReplicaSet().optional(),
    /** partition → assignment epoch, bumped on every move. */
    epochs: z.record(partitionKey, z.int().min(0)).optional(),
    /**
     * partition → the offset its current epoch began at (the stop offset of the move that gave it
     * to its owner): where a replica that missed that move, still holding the partition under the
     * epoch before, hands it over once every sibling that knew the stop has dropped the cube.
     */
    epochStarts: z.record(partitionKey, offset).optional(),
    /** Present only while a move is in flight. */
    reassign: reassignJournal.optional(),
    /**
     * replica set → partitions moved away from it of which it keeps data not committed yet (its
     * windows open at the move): while a set holds any, it is not failed over, since a failover
     * re-reads only the partitions the lost set owns. Kept here so that a new leader knows it of a
     * set gone before it started.
     */
    releasedUncommitted: partitionsByReplicaSet().optional(),
    /**
     * replica set → since when it has had no ready receiver pod, as the operator first saw it: a
     * set holding partitions fails over spec.failoverAfter from then. Kept here so that a leader
     * started later waits out only the rest of that time, not the whole of it again.
     */
    unavailableSince: z.record(replicaSetName, timestamp).optional(),
    partitions: z
      .array(observedPartition)
      .meta(kubernetes({ listType: 'map', listMapKeys: ['partition'] }))
      .optional(),
    /** Sum of the partitions' lag, for the Lag printer column. */
    totalLag: offset.optional(),
    segments: segmentCounts.optional(),
    conditions: z
      .array(condition)
      .meta(kubernetes({ listType: 'map', listMapKeys: ['type'] }))
      .optional(),
  })
  /**
   * One field to the API server's field manager: only the operator writes the status, and with
   * every field of a 16-partition cube tracked (partitions, epochs, the assignment), its
   * managedFields were over half of the object and their upkeep most of the API server's work at
   * each status write. bench:scale, 1,000 cubes placed: 44 s of API-server CPU against 78-88 s.
   */
  .meta(kubernetes({ mapType: 'atomic' }));
export type CubeAssignmentStatus = z.infer<typeof cubeAssignmentStatus>;

export const cubeAssignment = z.object({
  apiVersion: z.literal(apiVersion),
  kind: z.literal(kind),
  metadata: z.custom<V1ObjectMeta>((m) => typeof m === 'object' && m !== null),
  spec: cubeAssignmentSpec,
  status: cubeAssignmentStatus.optional(),
});
/** A CubeAssignment as read from the API server (defaults applied). */
export type CubeAssignment = z.infer<typeof cubeAssignment>;

/**
 * A JSON merge patch (RFC 7396) of a value: a field left out is kept, `null` deletes it; objects
 * and maps merge key by key (so a map key is deleted by sending it as `null`), lists replace.
 */
export type MergePatch<T> = {
  [K in keyof T]?: MergePatchValue<NonNullable<T[K]>> | null;
};
type MergePatchValue<T> = T extends readonly unknown[] ? T : T extends object ? MergePatch<T> : T;

/** What the operator writes to status (the status subresource, as a merge patch). */
export type CubeAssignmentStatusPatch = MergePatch<CubeAssignmentStatus>;
