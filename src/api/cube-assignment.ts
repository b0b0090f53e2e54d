// The CubeAssignment resource: which replica sets serve one cube, and what the operator observed.
// These zod definitions are the one source of truth for the TypeScript types, runtime checks and
// the CRD (src/api/crd.ts); the CEL rules beside them say to the API server what zod refines.
import { z } from 'zod';
import type { V1ObjectMeta } from '@kubernetes/client-node';
import { cubeSchema, identifier, kafkaSource, measure, plaintextSaslProblem } from './cube.ts';
import { condition } from './conditions.ts';
import { offset, partitionKey, partitionNumber } from './kafka-numbers.ts';
import { journalReset, resetAnnotation, resetRecord } from './offset-reset.ts';
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
export const dnsSubdomainPattern =
  /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

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
    brokers: kafkaSource.shape.brokers
      .max(maxBrokers)
      .describe(
        'Bootstrap brokers as host:port, 1 to 32. May change: the operator rolls a new list out to every receiver holding the cube (Progressing, reason RollingOut) before status.observedGeneration moves.',
      ),
    topic: kafkaSource.shape.topic.describe(
      'The Kafka topic read. Immutable: stored segments hold offsets of this topic; to read another topic, create a new CubeAssignment.',
    ),
    startingOffsets: kafkaSource.shape.startingOffsets.describe(
      "Where the cube starts reading when it is first placed: earliest (each partition's log start) or latest (its end: only records produced afterwards). It applies to the partitions the topic has at that first placement; a partition added to the topic later is read from its log start. Default earliest.",
    ),
    tls: z
      .object({
        secretRef: secretName
          .optional()
          .describe(
            "Name of a Secret in the cube's namespace with ca.crt (the CA that signed the brokers' certificates; without it the system trust store is used) and, for mutual TLS, tls.crt and tls.key together (or a Strimzi KafkaUser Secret as it is: user.crt and user.key, its ca.crt, the clients CA, not trusted for brokers; Strimzi's <cluster>-cluster-ca-cert holds the brokers' ca.crt). Receivers read it again periodically (--secret-refresh, 30s), and new connections use what it holds then.",
          ),
      })
      .optional()
      .describe(
        'Connect to the brokers over TLS. tls: {} verifies the brokers against the system trust store. An untrusted certificate is reported as Degraded, reason SourceTLSFailed.',
      ),
    sasl: z
      .object({
        mechanism: z
          .enum(saslMechanisms)
          .describe('The SASL mechanism: plain, scram-sha-256 or scram-sha-512.'),
        secretRef: secretName.describe(
          "Name of a Secret in the cube's namespace with the keys username and password; without username the Secret's name is the user (a Strimzi KafkaUser Secret, which holds password only). Read again when rotated, like tls.secretRef.",
        ),
      })
      .optional()
      .describe(
        'Authenticate to the brokers with SASL. Needs tls unless allowPlaintext is true. Refused credentials are reported as Degraded, reason SourceAuthFailed.',
      ),
    allowPlaintext: z
      .boolean()
      .optional()
      .describe(
        'Allow sasl without tls: the credentials then cross the network unencrypted. Refused by default (false).',
      ),
  })
  .describe(
    "The Kafka topic the cube reads and how to reach its brokers: the operator reads the topic's partitions through it (again every --resync, so partitions added to the topic are placed), and every receiver holding the cube consumes through it.",
  )
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
  .safeExtend({
    name: identifier
      .max(63)
      .describe(
        'Name of the measure: its column in segments, hand-off files and query answers. A letter or _, then letters, digits or _ (at most 63 in all).',
      ),
    function: measure.shape.function.describe(
      'count (events), or sum, min or max of field, per window and combination of dimension values.',
    ),
    field: z
      .string()
      .min(1)
      .max(253)
      .optional()
      .describe(
        'Event field the measure reads: a JSON number. Required for sum, min and max; count reads none. An event where it is absent, null or not a finite number is rejected (missing_measure, bad_measure).',
      ),
    scale: measure.shape.scale.describe(
      'sum only: the decimals the field carries (2 for money), 0 to 18. The sum is then kept exactly, as an integer count of 10^-scale units read from the digits of each event (rounded half to even past the scale), and answered as a decimal string with that many decimals. Without it a sum is a float.',
    ),
  })
  .describe('One aggregate of the cube.')
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
      .meta(kubernetes({ listType: 'set' }))
      .describe(
        'Event fields to group by, up to 32 unique names (a letter or _, then letters, digits or _); each is also the column name. A string, number or boolean value is kept as text, an absent or null one as the empty string; an object or array rejects the event (bad_dimension), as does a value longer than maxDimensionBytes (dimension_too_long). Default none.',
      ),
    measures: z
      .array(boundedMeasure)
      .min(1)
      .max(maxMeasures)
      .describe(
        'The aggregates computed per window and combination of dimension values, 1 to 64. Names are unique across dimensions and measures.',
      ),
    timestampField: z
      .string()
      .min(1)
      .max(253)
      .describe(
        'Event field holding the event time, which picks the window: epoch milliseconds (a JSON number, or a string of digits) or an ISO-8601 date or date-time (UTC when it has no offset). An event without it is rejected (missing_timestamp, bad_timestamp), as is one before 2000-01-01 (ancient_timestamp) or more than maxEventTimeSkew past the timestamp of its record batch (future_timestamp).',
      ),
    window: kubernetesDuration.describe(
      "Length of a window, a positive duration in ms, s, m or h (combined: 1h30m). Windows are aligned to the Unix epoch (with 1h, each starts on the hour, UTC); the receivers keep a window's data in segments, sealed and handed off to deep storage once it has closed.",
    ),
    allowedLateness: kubernetesDuration
      .default('0s')
      .describe(
        "How long after its end a window still takes events, judged by the partition's event-time watermark (the highest event time it has seen), never by the wall clock; a later event is rejected (too_late). Below window. Default 0s.",
      ),
    maxEventTimeSkew: cubeSchema.shape.maxEventTimeSkew.describe(
      "How far an event time may lie past the timestamp of its Kafka record batch (the producer's, or the broker's append time) before the record is rejected (future_timestamp); such a record moves no watermark. A duration in ms, s, m or h; the receivers take 1h when absent.",
    ),
    maxDimensionBytes: cubeSchema.shape.maxDimensionBytes.describe(
      'The longest dimension value, in bytes of UTF-8, before the record is rejected (dimension_too_long); 1 to 1048576, the receivers take 4096 when absent.',
    ),
    maxRowsPerWindow: cubeSchema.shape.maxRowsPerWindow.describe(
      "The most distinct rows (combinations of dimension values) one partition may bring into one window under its epoch; a record that would bring one more is rejected (too_many_rows). Counted per partition, from the partition's own records only, so every replica rejects the same records. 1 to 10000000, the receivers take 100000 when absent.",
    ),
  })
  .describe(
    'What the cube computes: each record value is a JSON object (an event); its event time picks a window, its dimensions group it, and its measures are aggregated per window and group. A record that is not such an event is counted as rejected, by reason, and skipped. Immutable as a whole: it defines the data already stored in segments and hand-offs; create a new CubeAssignment for a new schema.',
  )
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

export const approvalModes = ['auto', 'manual'] as const;
export type ApprovalMode = (typeof approvalModes)[number];

/** The annotation whose value, a proposal's id, approves that proposal (spec.approval: manual). */
export const approveAnnotation = `${group}/approve`;

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
      .optional()
      .describe(
        "Names of the replica sets serving the cube, 1 to 32 unique DNS labels. A replica set is the receiver pods labelled streamcube.io/replica-set=<name> (the chart's StatefulSets), in the cube's namespace or the operator's --receiver-namespace; its replicas consume the same partitions from the same offsets. Partitions are placed only on sets with a Ready receiver. An edit moves only the partitions whose owner changes. Exactly one of replicaSets and pool.",
      ),
    pool: z
      .string()
      .max(49)
      .regex(/^[a-z]([-a-z0-9]*[a-z0-9])?$/, 'must be the name of a ReceiverPool')
      .optional()
      .describe(
        "Name of a ReceiverPool (in the receivers' namespace: the cube's, or the operator's --receiver-namespace) whose Active sets serve the cube, instead of listing replicaSets: the cube follows the pool as it grows (partitions move onto new sets by the strategy) and shrinks (partitions move off Draining sets, which the pool removes once no cube uses them). A pool that does not exist keeps the partitions where they are (Degraded, reason PoolNotFound). Exactly one of replicaSets and pool; pins need replicaSets.",
      ),
    strategy: z
      .enum(assignmentStrategies)
      .default('sticky')
      .describe(
        "How the partitions that pins do not place are spread over the replica sets with a Ready receiver: range (contiguous runs over the sets in name order, as Kafka's RangeAssignor), roundRobin (partition i to set i mod n), or sticky (as balanced as range, and a partition stays where it is unless balance requires a move). Default sticky.",
      ),
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
      .describe(
        'Explicit placement, replica set → partitions, made before the strategy places the rest. At most 16 sets and 128 partitions each; every set named must be in replicaSets, and a partition is pinned to one set only. A pin to a set with no Ready receiver is not honoured while it has none (the strategy places the partition); a pin naming a partition the topic does not have waits for it (Degraded, reason InvalidPin).',
      ),
    suspend: z
      .boolean()
      .default(false)
      .describe(
        "Pause the cube. While true, the operator pauses the cube's assigned partitions on every Ready receiver of their replica sets (again every --resync, so a receiver that comes back is paused too) and reports Ready and Progressing False, reason Suspended. It plans nothing meanwhile: no move starts, no replica set fails over, partitions added to the topic are not placed, and status.partitions, totalLag and segments are not refreshed. A move already in flight completes first; its partitions are then paused too. Source edits are still rolled out to the receivers, and deleting the cube still seals and hands off its data. Set back to false, the paused partitions resume where they stopped. Default false.",
      ),
    failoverAfter: kubernetesDuration
      .default('5m')
      .describe(
        'How long a replica set holding partitions may have no Ready receiver pod before it is lost: it is fenced in deep storage and its partitions fail over to the other replica sets, which restart them where its committed data ends (Warning FailoverStarted). Counted from when the operator first saw the set without a Ready pod (status.unavailableSince). No failover starts while the cube is suspended, while another move is in flight, or while the set keeps data of partitions moved away from it that is not committed yet (Degraded, reason FailoverBlocked). A duration in ms, s, m or h. Default 5m.',
      ),
    approval: z
      .enum(approvalModes)
      .default('auto')
      .describe(
        `Whether a move between replica sets starts at once (auto) or waits for a person (manual). With manual, a move that an edit of replicaSets, strategy or pins asks for, or a rebalance onto a set that is Ready again, is written as status.proposal (Progressing False, reason AwaitingApproval) and starts only once the annotation ${approveAnnotation} is set to the proposal's id; a proposal whose spec changed is replaced by one with a new id, never applied. Partitions without an owner never wait: a first placement, partitions new to the topic, and a failover of a lost replica set start at once. Default auto.`,
      ),
    rejectedEventsThreshold: percentage
      .default('1%')
      .describe(
        "Degraded, reason EventsRejected (the cube stays Ready), when a receiver rejects more than this share of the records it read over the operator's --rejected-events-window (5m by default): events too late for their window, and records that are not valid events. A percentage from 0% to 100% with at most two decimals; 100% turns it off. Default 1%.",
      ),
  })
  .superRefine((spec, ctx) => {
    const plaintext = plaintextSaslProblem(spec.source);
    if (plaintext !== undefined)
      ctx.addIssue({ code: 'custom', message: plaintext, path: ['source', 'sasl'] });
    if ((spec.replicaSets === undefined) === (spec.pool === undefined))
      ctx.addIssue({
        code: 'custom',
        message: 'spec needs exactly one of replicaSets and pool',
        path: spec.replicaSets === undefined ? ['replicaSets'] : ['pool'],
      });
    const pinned = new Map<number, string>();
    for (const [replicaSet, partitions] of Object.entries(spec.pins ?? {})) {
      if (!(spec.replicaSets ?? []).includes(replicaSet)) {
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
  .describe(
    'What the cube reads (source), what it computes (schema), and which replica sets run it (replicaSets, strategy, pins). Written by the user; the operator places the partitions and moves them when this changes.',
  )
  .meta(
    kubernetes({
      validations: [
        {
          rule: '!has(self.pins) || (has(self.replicaSets) && self.pins.all(rs, rs in self.replicaSets))',
          message:
            'every replica set in pins must be listed in replicaSets (a cube on a pool has no pins)',
          fieldPath: '.pins',
        },
        {
          rule: 'has(self.replicaSets) != has(self.pool)',
          message: 'spec needs exactly one of replicaSets and pool',
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
  partition: partitionNumber.describe('The partition changing owner.'),
  from: replicaSetName
    .optional()
    .describe(
      'The replica set giving it up (for a failover, the lost set); absent when the partition had no owner: a first placement, or a partition new to the topic.',
    ),
  to: replicaSetName.describe('The replica set taking it.'),
});
export type PartitionMove = z.infer<typeof partitionMove>;

/** Offsets [from, to) of one partition, as status and the journal name them. */
const offsetRange = z.object({
  from: offset.describe('First offset of the range.'),
  to: offset.describe('End of the range: the offset after its last one.'),
});

/** partition → offset ranges [from, to) another replica set committed: read over, not again. */
const committedRanges = z.record(partitionKey, z.array(offsetRange).max(1000));

/** Replica sets a move fenced in deep storage, and where the new owners read over their data. */
const fencedSets = z.object({
  replicaSets: z
    .array(replicaSetName)
    .min(1)
    .meta(kubernetes({ listType: 'set' }))
    .describe(
      'The replica sets fenced: a fence record in deep storage keeps their commits from holding the fenced offsets.',
    ),
  committedAbove: committedRanges
    .optional()
    .describe(
      "Partition → offset ranges [from, to), past where the new owner starts, that a fenced set had committed already: the new owner reads over them (skips them), since that set's commit records count them. Written with the fence.",
    ),
});

/** The id of a move or of a proposal: a short name Events, logs and annotations carry. */
const moveId = z.string().min(1).max(63);

/** The journal of the move in flight; every phase is persisted before the next begins. */
export const reassignJournal = z
  .object({
    id: moveId.describe(
      "The move's id, named by its Events and the operator's logs: r-<generation>-<random> for a move or a first placement, f-<generation>-<random> for a failover.",
    ),
    phase: z
      .enum(reassignPhases)
      .describe(
        "The phase the move is in: Planned, Pausing, Draining, Fencing (a failover only), Starting, Sealing, Done. A phase blocked past the operator's --phase-timeout in Pausing or Draining rolls the move back (the sources resume, the next plan tries again); from Starting on the move only rolls forward, and Degraded says what it waits for.",
      ),
    moves: z
      .array(partitionMove)
      .meta(kubernetes({ listType: 'map', listMapKeys: ['partition'] }))
      .describe(
        'The partitions changing owner, one entry each; every other partition keeps being consumed.',
      ),
    stopOffsets: z
      .record(partitionKey, offset)
      .optional()
      .describe(
        "Partition → the offset where its sources stop and its targets start: the highest position over the source replicas once paused (raised when a replica had read past it), the starting offset of a partition that had no owner, or, for a failover, where the lost set's committed data ends. Written at the end of Pausing (Fencing for a failover).",
      ),
    watermarks: z
      .record(partitionKey, z.int())
      .optional()
      .describe(
        'Partition → its event-time watermark (epoch milliseconds) once drained, the highest over the source replicas: the target starts with it, so the move changes no lateness decision. Written in Draining.',
      ),
    failover: fencedSets
      .optional()
      .describe(
        'Present on a failover: the replica sets lost (no Ready receiver pod for spec.failoverAfter) whose partitions the moves take to live sets, and what they had committed past the restart offsets. Its phases are Planned, Fencing, Starting.',
      ),
    stopFence: fencedSets
      .optional()
      .describe(
        'Written in Starting when a source set has receiver pods that are not Ready (they missed the release, and may come back reading past the stop offsets under the old epoch): each such set is fenced in deep storage from the stop offsets on, before any target starts (Warning StopFenced).',
      ),
    lostSets: fencedSets
      .optional()
      .describe(
        'Written in Starting when a replica set of the move has had no Ready receiver pod for spec.failoverAfter before the targets started: the set is fenced (Warning ReplicaSetLostInMove). The partitions it was the source of restart where its committed data ends, not at the stop offsets; those moving to it go back to their source, or to another live set.',
      ),
    startedUncommitted: z
      .boolean()
      .optional()
      .describe(
        "True when the targets started before the sources' data of the moved partitions was committed (the wait for it ran out the phase timeout; Warning ReleasedDataUncommitted): a source set lost since keeps that data (status.releasedUncommitted) and is not failed over until it is committed.",
      ),
    reset: journalReset
      .optional()
      .describe(
        `Present on an offset reset (the ${resetAnnotation} annotation): its moves take each partition from its owner back to the same owner, which restarts at targets instead of the stop offsets, under a new epoch. Its phases are those of a move; Sealing seals nothing (the owner keeps the cube).`,
      ),
    proposal: moveId
      .optional()
      .describe(
        `The id of the approved proposal this move carries out (spec.approval: manual); absent for a move that needed no approval. While it runs, an ${approveAnnotation} annotation naming it is removed.`,
      ),
    startedAt: timestamp.describe('When the move was planned.'),
    phaseStartedAt: timestamp
      .optional()
      .describe("When the current phase began: the phase's deadline counts from here."),
  })
  .describe(
    'The journal of the move in flight (partitions changing owner, a first placement, or a failover); absent at rest. The operator writes each phase before its effects and runs one phase per reconcile, so a new leader resumes the move where it was. kubectl get cube shows the phase; when a phase waits, the Degraded condition says why.',
  );
export type ReassignJournal = z.infer<typeof reassignJournal>;

/** A move waiting for approval (spec.approval: manual): what it would do, and its id to approve. */
export const reassignProposal = z
  .object({
    id: moveId.describe(
      `The proposal's id, p-<generation>-<digest of the moves>: the same plan gives the same id. Approve the move with the annotation ${approveAnnotation}=<id>.`,
    ),
    generation: z
      .int()
      .min(0)
      .describe(
        'The metadata.generation of the spec the moves were planned for. A spec edited since is planned again, and its proposal replaces this one.',
      ),
    moves: z
      .array(partitionMove)
      .meta(kubernetes({ listType: 'map', listMapKeys: ['partition'] }))
      .describe('The partitions that would change owner, one entry each.'),
    replicaSets: z
      .array(replicaSetName)
      .meta(kubernetes({ listType: 'set' }))
      .describe(
        'The replica sets the moves touch, sources and targets: their receivers pause, drain, start or seal; every other set keeps consuming untouched.',
      ),
    lag: z
      .record(partitionKey, offset)
      .optional()
      .describe(
        "Partition → records its owner had not consumed yet when the proposal was made (status.partitions' lag), where known: the new owner reads them after the move.",
      ),
    uncommitted: z
      .record(partitionKey, offset)
      .optional()
      .describe(
        "Partition → offsets its owner had read but not committed to deep storage when the proposal was made (status.partitions' position minus handedOffTo), where known. Should the owner's replica set be lost during the move, a failover restarts the partition where its committed data ends and reads these offsets again; once the move is done the new owner commits them.",
      ),
    createdAt: timestamp.describe('When the proposal was first written.'),
  })
  .describe(
    `A move waiting for approval (spec.approval: manual), absent otherwise. Nothing of it has started; set the annotation ${approveAnnotation}=<id> to start exactly these moves (status.reassign). An annotation naming another id starts nothing (Warning ApprovalStale).`,
  );
export type ReassignProposal = z.infer<typeof reassignProposal>;

/** What the operator observed of one partition, for users (status.partitions). */
export const observedPartition = z.object({
  partition: partitionNumber.describe('The partition.'),
  replicaSet: replicaSetName.describe('The replica set that owns it (status.assignment).'),
  position: offset
    .optional()
    .describe(
      "Next offset the owner consumes (Kafka's committed-offset convention): every offset before it has been read.",
    ),
  highWatermark: offset
    .optional()
    .describe(
      "The partition's high watermark (the offset the next record produced gets), as the owner last fetched it; absent before its first fetch.",
    ),
  lag: offset
    .optional()
    .describe(
      'Records not consumed yet: highWatermark minus position, 0 when caught up; absent while the high watermark is unknown.',
    ),
  lostOffsets: offset
    .optional()
    .describe(
      'Offsets Kafka deleted (retention) before the owner read them, in all, as its receivers report them; absent when none was. They are in no segment; each new range is also a Warning Event OffsetsLost.',
    ),
  lostRanges: z
    .array(offsetRange)
    .max(10)
    .optional()
    .describe('The latest ten of those ranges [from, to), oldest first.'),
  handedOffTo: offset
    .optional()
    .describe(
      "The partition's committed-to offset: the offsets before it, from the first one a receiver keeps, are handed off to deep storage and committed (a commit record of their window names a copy holding them), so readers of deep storage see them.",
    ),
});
export type ObservedPartition = z.infer<typeof observedPartition>;

export const segmentCounts = z.object({
  active: z.int().min(0).describe('ACTIVE segments: windows still taking events.'),
  immutable: z
    .int()
    .min(0)
    .describe(
      'IMMUTABLE segments: sealed, not handed off to deep storage yet. A count that keeps growing means hand-offs are failing or not keeping up.',
    ),
  handedOff: z
    .int()
    .min(0)
    .describe(
      'HANDED_OFF segments: in deep storage, kept on the receivers until their --handed-off-retention (1h by default) has passed.',
    ),
});
export type SegmentCounts = z.infer<typeof segmentCounts>;

export const cubeAssignmentStatus = z
  .object({
    observedGeneration: z
      .int()
      .min(0)
      .optional()
      .describe(
        'The metadata.generation of the spec the operator last acted on. Below metadata.generation, an edit is not applied yet: a move in flight completes before the next is planned, and a source edit counts once every receiver holding the cube runs it.',
      ),
    /** cubeSpecDigest of the source and schema every receiver holding the cube was brought to. */
    specDigest: z
      .string()
      .max(64)
      .optional()
      .describe(
        "Digest of spec.source and spec.schema (defaults applied) that every receiver holding the cube was brought to. Each receiver reports the digest it runs (its admin API's GET …/cubes/<cube>): one that reports another has not been brought to the spec yet.",
      ),
    assignment: partitionsByReplicaSet()
      .optional()
      .describe(
        'Replica set → partitions, as applied now: the owner of each partition placed, one per partition. Written only when a journal (status.reassign) completes; partitions of the topic not listed have no owner yet.',
      ),
    epochs: z
      .record(partitionKey, z.int().min(0))
      .optional()
      .describe(
        'Partition → its assignment epoch, bumped each time it changes owner. Receivers tag what they read with it, so that data read under a superseded epoch can be fenced.',
      ),
    epochStarts: z
      .record(partitionKey, offset)
      .optional()
      .describe(
        "Partition → the offset its current epoch began at: the stop offset of the move that gave it to its owner, or where its first placement started. The operator's tiling check and replica repair count from here; a replica that missed that move, still holding the partition under the epoch before, hands it over there.",
      ),
    firstOffsets: z
      .record(partitionKey, offset)
      .optional()
      .describe(
        "Partition → the offset the cube began reading it at: where its first placement started (the log start for startingOffsets earliest, the end for latest), written once. Offsets before it were never the cube's to read; from earliest, Kafka had deleted them (retention) before the cube began, and query answers count them lost to retention.",
      ),
    reassign: reassignJournal.optional(),
    proposal: reassignProposal.optional(),
    resets: z
      .array(resetRecord)
      .max(10)
      .optional()
      .describe(
        `The last ten offset resets asked for with the ${resetAnnotation} annotation, applied or refused, oldest first: a request whose id is here is never run again. The query service and the tiling check read the applied ones: offsets skipped by a reset are reported as skipped, those read again as re-read, neither as missing nor double.`,
      ),
    releasedUncommitted: partitionsByReplicaSet()
      .optional()
      .describe(
        'Replica set → partitions moved away from it of which it keeps data not committed yet (only after a move whose targets started without waiting for it: reassign.startedUncommitted). While a set keeps any, it is not failed over (Degraded, reason FailoverBlocked), since a failover re-reads only the partitions the lost set owns. Kept here so that a new leader knows it of a set gone before it started; cleared once the data is committed.',
      ),
    unavailableSince: z
      .record(replicaSetName, timestamp)
      .optional()
      .describe(
        'Replica set holding partitions → since when it has had no Ready receiver pod, as the operator first saw it: it fails over spec.failoverAfter from then. Kept here so that a leader started later waits out only the rest of that time; removed when the set has a Ready receiver again.',
      ),
    partitions: z
      .array(observedPartition)
      .meta(kubernetes({ listType: 'map', listMapKeys: ['partition'] }))
      .optional()
      .describe(
        "Per partition owned by a replica set: its owner and what one replica of the owner reports (one whose consumer runs). Written when a partition's lag changes by an order of magnitude, a row changes otherwise, or once per --resync (10s by default): not on every observation, and not while the cube is suspended. The receivers' metrics have live figures.",
      ),
    totalLag: offset
      .optional()
      .describe(
        "Sum of the partitions' lag (the LAG column of kubectl get cube), written with partitions.",
      ),
    segments: segmentCounts
      .optional()
      .describe(
        'Segments of the cube held by receivers, counting one replica (one whose consumer runs) of each replica set that owns partitions.',
      ),
    conditions: z
      .array(condition)
      .meta(kubernetes({ listType: 'map', listMapKeys: ['type'] }))
      .optional()
      .describe(
        "Ready (every partition has a consuming replica set), Progressing (a move, or a source edit being rolled out; False with reason AwaitingApproval while a move waits for approval) and Degraded (True with the first problem's reason; its message lists every problem), in metav1.Condition shape.",
      ),
  })
  .describe(
    'What the operator applied and observed; written by the operator only (status subresource). Look at conditions first. A status field is only as fresh as its last write: see partitions.',
  )
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
