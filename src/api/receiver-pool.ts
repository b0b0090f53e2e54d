// The ReceiverPool resource: replica sets of receivers that the operator runs as StatefulSets
// (one per set, `<pool>-<index>`), and what it observed of them. Like cube-assignment.ts, these
// zod definitions are the one source of the TypeScript types, runtime checks and the CRD.
import { z } from 'zod';
import type { V1ObjectMeta } from '@kubernetes/client-node';
import { condition } from './conditions.ts';
import { group, secretName, version } from './cube-assignment.ts';
import { poolAutoscale, poolAutoscaleStatus, poolSetsLimit } from './pool-autoscale.ts';
import { kubernetes } from './structural-schema.ts';

export { group, version };
export {
  autoscaleActions,
  autoscaleDefaults,
  poolAutoscale,
  poolAutoscaleStatus,
  type AutoscaleAction,
  type PoolAutoscale,
  type PoolAutoscaleStatus,
} from './pool-autoscale.ts';
export const apiVersion = `${group}/${version}` as const;
export const kind = 'ReceiverPool';
export const listKind = 'ReceiverPoolList';
export const plural = 'receiverpools';
export const singular = 'receiverpool';
export const shortNames = ['rpool'];

/** The label every object of a pool carries, its value the pool's name. */
export const poolLabel = `${group}/pool`;

/** Sets a pool may have; set indices are 0 to maxSets - 1, so at most two digits. */
export const maxSets = poolSetsLimit;
/**
 * A StatefulSet's name goes into its pods' controller-revision-hash label with a dash and a
 * 10-character hash: at most 52 characters. `<pool>-<index>` with a two-digit index leaves 49.
 */
export const maxPoolNameLength = 52 - '-99'.length;
/** A Service name (the set's headless Service) is a DNS-1035 label: a letter first, no dots. */
export const poolNamePattern = '^[a-z]([-a-z0-9]*[a-z0-9])?$';

const dnsSubdomain = z
  .string()
  .min(1)
  .max(253)
  .regex(
    /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/,
    'must be a DNS subdomain (lowercase letters, digits, - and .)',
  );

/** A resource quantity as Kubernetes writes it: 250m, 1, 512Mi, 10Gi. */
export const quantityPattern =
  '^[+-]?([0-9]+([.][0-9]*)?|[.][0-9]+)([eE][+-]?[0-9]+|[numkMGTPE]|[KMGTPE]i)?$';
const quantity = z
  .string()
  .min(1)
  .max(64)
  .regex(new RegExp(quantityPattern), 'must be a quantity such as 250m, 2, 512Mi or 10Gi');

const resourceList = z
  .record(z.string().min(1).max(253), quantity)
  .refine((m) => Object.keys(m).length <= 16, 'at most 16 resources')
  .meta(kubernetes({ maxProperties: 16 }));

const stringMap = (what: string) =>
  z
    .record(z.string().min(1).max(317), z.string().max(4096))
    .refine((m) => Object.keys(m).length <= 64, `at most 64 ${what}`)
    .meta(kubernetes({ maxProperties: 64 }));

/** A Secret of the pool's namespace and the key in it that a receiver reads as a file. */
const secretKeyRef = (what: string) =>
  z
    .object({
      name: secretName.describe(`Name of the Secret (in the pool's namespace) holding ${what}.`),
      key: z
        .string()
        .min(1)
        .max(253)
        .default('token')
        .describe(
          `The key of the Secret holding ${what} (its first line, at least 16 characters). Default token.`,
        ),
    })
    .describe(
      `The Secret holding ${what}, mounted into every receiver and read again when it changes.`,
    );

export const s3DeepStorage = z
  .object({
    bucket: z.string().min(3).max(63).describe('The bucket.'),
    prefix: z
      .string()
      .max(512)
      .optional()
      .describe("Key prefix inside the bucket (none: the bucket's root)."),
    endpoint: z
      .string()
      .max(2048)
      .regex(/^https?:\/\/\S+$/, 'must be an http:// or https:// URL')
      .optional()
      .describe("An S3-compatible server's URL (http:// or https://); absent for AWS S3 itself."),
    region: z
      .string()
      .max(64)
      .optional()
      .describe("The region (absent: the pod's AWS_REGION, else us-east-1)."),
    forcePathStyle: z
      .boolean()
      .optional()
      .describe(
        'endpoint/bucket/key URLs instead of bucket.endpoint/key (most S3-compatible servers want it).',
      ),
    credentialsSecret: secretName
      .optional()
      .describe(
        "A Secret with the keys AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, given to the receivers as environment variables; absent for the pod's own identity (IRSA, EKS Pod Identity, the node's role).",
      ),
  })
  .describe('An S3-compatible bucket.');

export const deepStorage = z
  .object({
    claimName: dnsSubdomain
      .optional()
      .describe(
        "A ReadWriteMany PersistentVolumeClaim of the pool's namespace shared by every receiver, mounted at /var/lib/streamcube/deep-storage.",
      ),
    s3: s3DeepStorage.optional(),
  })
  .refine(
    (d) => (d.claimName === undefined) !== (d.s3 === undefined),
    'spec.deepStorage needs exactly one of claimName and s3',
  )
  .describe(
    'Where the receivers hand sealed segments off to: a shared claim (claimName) or an S3-compatible bucket (s3), exactly one. The query service and every other pool of the same cubes must use the same.',
  )
  .meta(
    kubernetes({
      validations: [
        {
          rule: 'has(self.claimName) != has(self.s3)',
          message: 'spec.deepStorage needs exactly one of claimName and s3',
        },
      ],
    }),
  );

const envVar = z
  .object({
    name: z.string().min(1).max(253).describe('The variable.'),
    value: z.string().max(32768).optional().describe('Its value.'),
    valueFrom: z
      .looseObject({})
      .meta(kubernetes({ preserveUnknownFields: true }))
      .optional()
      .describe(
        "Where its value comes from, as a container's env[].valueFrom (secretKeyRef, configMapKeyRef, fieldRef); checked by the API server when the StatefulSet is applied.",
      ),
  })
  .describe('A Kubernetes EnvVar.');

export const receiverSettings = z
  .object({
    port: z
      .int()
      .min(1)
      .max(65535)
      .default(8080)
      .describe(
        "The admin API's port (the operator's --receiver-port must be the same). Default 8080.",
      ),
    metricsPort: z
      .int()
      .min(1)
      .max(65535)
      .default(9090)
      .describe('The port of /metrics, /healthz and /readyz (plain HTTP). Default 9090.'),
    adminToken: secretKeyRef('the admin API token (the operator holds the same)'),
    readToken: secretKeyRef('the read token (status and query only)'),
    tlsSecret: secretName
      .optional()
      .describe(
        'A kubernetes.io/tls Secret (tls.crt, tls.key, ca.crt) the receivers serve the admin API with over HTTPS; absent: plain HTTP.',
      ),
    serviceAccountName: dnsSubdomain
      .optional()
      .describe(
        "The receivers' ServiceAccount. Its token is mounted only with leaderLease (the receivers read that Lease); absent: the namespace's default, with no token mounted.",
      ),
    leaderLease: dnsSubdomain
      .optional()
      .describe(
        "Name of the operator's leader Lease in the pool's namespace: a receiver refuses a leader term above its leaseTransitions (--leader-lease). Needs serviceAccountName with get on that Lease.",
      ),
    extraArgs: z
      .array(z.string().max(4096))
      .max(64)
      .optional()
      .describe(
        'More flags for `streamcube receiver`, after those the operator sets (a later flag wins), e.g. --flush-interval=1s, --idle-timeout=30s.',
      ),
    extraEnv: z
      .array(envVar)
      .max(64)
      .optional()
      .describe('More environment variables of the receiver container, e.g. STREAMCUBE_LOG_LEVEL.'),
  })
  .describe('How each receiver runs: its ports, the Secrets it reads, its flags.');

export const retainPolicies = ['Retain', 'Delete'] as const;

export const poolStorage = z
  .object({
    size: quantity.describe(
      "Size of each receiver's data claim (segments, checkpoints), e.g. 10Gi.",
    ),
    storageClassName: z
      .string()
      .max(253)
      .optional()
      .describe("The data claims' StorageClass; absent: the cluster's default."),
    retainOnScaleIn: z
      .enum(retainPolicies)
      .default('Retain')
      .describe(
        "What becomes of a set's data claims when the set is removed (spec.sets lowered, once no cube uses it): Retain keeps them (a set of the same index made again later reuses them), Delete deletes them. Default Retain.",
      ),
  })
  .describe(
    "Each receiver's data volume: one claim per pod (the StatefulSet's volumeClaimTemplates).",
  );

const toleration = z
  .object({
    key: z.string().max(317).optional().describe('The taint key; absent with Exists: every taint.'),
    operator: z
      .enum(['Exists', 'Equal'])
      .optional()
      .describe('Exists (any value) or Equal (the value below). Default Equal.'),
    value: z.string().max(63).optional().describe('The taint value, with Equal.'),
    effect: z
      .enum(['NoSchedule', 'PreferNoSchedule', 'NoExecute'])
      .optional()
      .describe('The taint effect tolerated; absent: every effect.'),
    tolerationSeconds: z
      .int()
      .min(0)
      .optional()
      .describe('With NoExecute: how long a pod stays on a node once tainted.'),
  })
  .describe('A core/v1 Toleration.');

const zoneSpread = z
  .object({
    maxSkew: z.int().min(1).describe("The largest difference in a set's pods between two domains."),
    topologyKey: z
      .string()
      .min(1)
      .max(317)
      .describe('The node label whose values are the domains, e.g. topology.kubernetes.io/zone.'),
    whenUnsatisfiable: z
      .enum(['DoNotSchedule', 'ScheduleAnyway'])
      .default('ScheduleAnyway')
      .describe('DoNotSchedule or ScheduleAnyway (default).'),
    minDomains: z
      .int()
      .min(1)
      .optional()
      .describe('With DoNotSchedule: the domains a set must spread over at least.'),
  })
  .describe(
    "A topology spread constraint over the pods of one set (its labelSelector is the set's own labels): the replicas of a set, which hold the same data, land in different zones or nodes.",
  );

export const poolScheduling = z
  .object({
    nodeSelector: stringMap('labels')
      .optional()
      .describe("Node labels every receiver pod needs, as a pod spec's nodeSelector."),
    tolerations: z
      .array(toleration)
      .max(32)
      .optional()
      .describe('Taints the receiver pods tolerate.'),
    affinity: z
      .looseObject({})
      .meta(kubernetes({ preserveUnknownFields: true }))
      .optional()
      .describe(
        "A core/v1 Affinity of the receiver pods, as in a pod spec; the API server checks it when the StatefulSets are applied (an error is the pool's Degraded condition, reason ApplyFailed).",
      ),
    topologySpreadConstraints: z
      .array(zoneSpread)
      .max(8)
      .optional()
      .describe("How each set's replicas spread over zones or nodes."),
    priorityClassName: z
      .string()
      .max(253)
      .optional()
      .describe('The PriorityClass of the receiver pods.'),
  })
  .describe('Where the receiver pods run.');

export const poolDisruptionBudget = z
  .object({
    maxUnavailable: z
      .int()
      .min(1)
      .optional()
      .describe(
        'Receivers of one set a voluntary disruption (a node drain) may take at once; at least 1, since 0 would hold every drain forever. Default 1 when minAvailable is not set.',
      ),
    minAvailable: z
      .int()
      .min(0)
      .optional()
      .describe(
        'Receivers of one set a voluntary disruption must leave running instead; below spec.replicas, else no drain could ever evict one.',
      ),
  })
  .refine(
    (b) => b.maxUnavailable === undefined || b.minAvailable === undefined,
    'spec.podDisruptionBudget takes one of maxUnavailable and minAvailable, not both',
  )
  .describe("Each set's PodDisruptionBudget: one of maxUnavailable and minAvailable.")
  .meta(
    kubernetes({
      validations: [
        {
          rule: '!(has(self.maxUnavailable) && has(self.minAvailable))',
          message:
            'spec.podDisruptionBudget takes one of maxUnavailable and minAvailable, not both',
        },
      ],
    }),
  );

export const receiverPoolSpec = z
  .object({
    sets: z
      .int()
      .min(0)
      .max(maxSets)
      .describe(
        'Number of replica sets, 0 to 100: sets <pool>-0 to <pool>-<sets-1>, each a StatefulSet, headless Service and PodDisruptionBudget of that name, its pods labelled streamcube.io/replica-set=<pool>-<index> (the name CubeAssignments list in spec.replicaSets). The scale subresource sets it: kubectl scale receiverpool/<pool> --replicas=<sets>. Lowered, the sets past it are Draining: removed only once no CubeAssignment lists them, holds partitions on them or moves partitions to or from them (Degraded, reason SetsInUse, meanwhile).',
      ),
    replicas: z
      .int()
      .min(1)
      .max(16)
      .default(2)
      .describe(
        'Receivers per set, 1 to 16: they consume the same partitions from the same offsets, so a set survives losing all but one. Default 2.',
      ),
    image: z
      .string()
      .min(1)
      .max(1024)
      .describe(
        'The streamcube image the receivers run, e.g. registry.example.com/streamcube:0.1.0.',
      ),
    imagePullPolicy: z
      .enum(['Always', 'IfNotPresent', 'Never'])
      .default('IfNotPresent')
      .describe('Always, IfNotPresent (default) or Never.'),
    imagePullSecrets: z
      .array(secretName)
      .max(16)
      .optional()
      .describe('Secrets to pull the image with.'),
    resources: z
      .object({
        requests: resourceList
          .optional()
          .describe('Resources each receiver is guaranteed, e.g. cpu: 250m, memory: 512Mi.'),
        limits: resourceList
          .optional()
          .describe('Resources each receiver may use at most, e.g. memory: 2Gi.'),
      })
      .optional()
      .describe("The receiver container's resources, as in a pod spec; quantities as strings."),
    storage: poolStorage,
    deepStorage,
    receiver: receiverSettings,
    setNames: z
      .array(
        z
          .string()
          .min(1)
          .max(maxPoolNameLength)
          .regex(new RegExp(poolNamePattern), 'must be a DNS-1035 label: a lowercase letter first'),
      )
      .max(maxSets)
      .refine((names) => new Set(names).size === names.length, 'the names must be unique')
      .meta(kubernetes({ listType: 'set' }))
      .optional()
      .describe(
        "Names of the first sets, adopted from receivers made before the pool (the Helm chart's receivers.replicaSets): set i below its length is replica set setNames[i] (its pods' streamcube.io/replica-set label, what CubeAssignments list) and its StatefulSet, Service and PodDisruptionBudget are <pool>-<setNames[i]>, the names the chart gave them, so its pods and data claims keep their names and the receivers restart on their own data. Sets past the list are <pool>-<index>. <pool>-<name> must fit 52 characters. Renaming or removing an entry while its set exists leaves that set unmanaged: lower spec.sets first.",
      ),
    podLabels: stringMap('labels')
      .optional()
      .describe(
        "More labels of the receiver pods; the pool's own (streamcube.io/pool, streamcube.io/replica-set) win.",
      ),
    podAnnotations: stringMap('annotations')
      .optional()
      .describe('More annotations of the receiver pods.'),
    podDisruptionBudget: poolDisruptionBudget.optional(),
    scheduling: poolScheduling.optional(),
    autoscale: poolAutoscale.optional(),
  })
  .superRefine((spec, ctx) => {
    const minAvailable = spec.podDisruptionBudget?.minAvailable;
    if (minAvailable !== undefined && minAvailable >= spec.replicas)
      ctx.addIssue({
        code: 'custom',
        message:
          'spec.podDisruptionBudget.minAvailable must be below spec.replicas: otherwise no receiver could ever be evicted and a node drain would wait forever',
        path: ['podDisruptionBudget', 'minAvailable'],
      });
    if (spec.receiver.leaderLease !== undefined && spec.receiver.serviceAccountName === undefined)
      ctx.addIssue({
        code: 'custom',
        message:
          'spec.receiver.leaderLease needs spec.receiver.serviceAccountName: the receivers read the Lease with that account',
        path: ['receiver', 'leaderLease'],
      });
  })
  .describe(
    'The replica sets of receivers the operator runs: how many, how large, and how each receiver runs. Written by the user (or kubectl scale); the operator applies each set and heals any edit of them.',
  )
  .meta(
    kubernetes({
      validations: [
        {
          rule: '!has(self.podDisruptionBudget) || !has(self.podDisruptionBudget.minAvailable) || self.podDisruptionBudget.minAvailable < self.replicas',
          message:
            'spec.podDisruptionBudget.minAvailable must be below spec.replicas: otherwise no receiver could ever be evicted and a node drain would wait forever',
          fieldPath: '.podDisruptionBudget.minAvailable',
        },
        {
          rule: '!has(self.receiver.leaderLease) || has(self.receiver.serviceAccountName)',
          message:
            'spec.receiver.leaderLease needs spec.receiver.serviceAccountName: the receivers read the Lease with that account',
          fieldPath: '.receiver.leaderLease',
          reason: 'FieldValueRequired',
        },
      ],
    }),
  );
export type ReceiverPoolSpec = z.infer<typeof receiverPoolSpec>;
export type ReceiverPoolSpecInput = z.input<typeof receiverPoolSpec>;

export const setStates = ['Active', 'Draining'] as const;
export type SetState = (typeof setStates)[number];

export const poolSetStatus = z
  .object({
    name: z.string().max(63).describe('The set: its StatefulSet, Service and replica-set label.'),
    index: z.int().min(0).describe('Its index: the name is <pool>-<index>.'),
    state: z
      .enum(setStates)
      .describe(
        'Active (index below spec.sets) or Draining (above: removed once no CubeAssignment uses it).',
      ),
    replicas: z.int().min(0).describe('Receiver pods its StatefulSet has (status.replicas).'),
    readyReplicas: z.int().min(0).describe('Those that are Ready.'),
  })
  .describe('One replica set of the pool.');
export type PoolSetStatus = z.infer<typeof poolSetStatus>;

export const receiverPoolStatus = z
  .object({
    observedGeneration: z
      .int()
      .min(0)
      .optional()
      .describe('The metadata.generation of the spec the operator last applied.'),
    replicas: z
      .int()
      .min(0)
      .optional()
      .describe(
        'Sets that exist, Active and Draining (the scale subresource reads it as status.replicas).',
      ),
    readySets: z.int().min(0).optional().describe('Active sets whose every receiver is Ready.'),
    selector: z
      .string()
      .max(317)
      .optional()
      .describe("The label selector of the pool's receiver pods (the scale subresource's)."),
    sets: z
      .array(poolSetStatus)
      .max(maxSets * 2)
      .meta(kubernetes({ listType: 'map', listMapKeys: ['name'] }))
      .optional()
      .describe('Every set, by index.'),
    conditions: z
      .array(condition)
      .meta(kubernetes({ listType: 'map', listMapKeys: ['type'] }))
      .optional()
      .describe(
        'Ready (every Active set applied with every receiver Ready) and Degraded (True with the first problem: SetsInUse, a Draining set a cube still uses; ApplyFailed, the API server refused a set), in metav1.Condition shape.',
      ),
    autoscale: poolAutoscaleStatus.optional(),
  })
  .describe(
    'What the operator applied and observed; written by the operator only (status subresource).',
  );
export type ReceiverPoolStatus = z.infer<typeof receiverPoolStatus>;

export const receiverPool = z.object({
  apiVersion: z.literal(apiVersion),
  kind: z.literal(kind),
  metadata: z.custom<V1ObjectMeta>((m) => typeof m === 'object' && m !== null),
  spec: receiverPoolSpec,
  status: receiverPoolStatus.optional(),
});
/** A ReceiverPool as read from the API server (defaults applied). */
export type ReceiverPool = z.infer<typeof receiverPool>;
