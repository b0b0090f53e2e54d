// A pool's desired objects for one set: the StatefulSet of its receivers, their headless Service
// and PodDisruptionBudget, owned by the pool. Pure: the same pool gives the same objects, which
// the operator applies server-side (workloads.ts). The pod is the chart's receiver pod.
import type {
  V1Container,
  V1EnvVar,
  V1OwnerReference,
  V1PodDisruptionBudget,
  V1PodSpec,
  V1Service,
  V1StatefulSet,
  V1Volume,
  V1VolumeMount,
} from '@kubernetes/client-node';
import type { ReceiverPool } from '../../api/receiver-pool.ts';
import { setName, setObjectName, setSelector } from './set-names.ts';

export interface SetObjects {
  statefulSet: V1StatefulSet;
  service: V1Service;
  podDisruptionBudget: V1PodDisruptionBudget;
}

const dataDir = '/var/lib/streamcube/data';
const deepStorageDir = '/var/lib/streamcube/deep-storage';
const tokenDir = '/var/run/streamcube';
const readTokenDir = '/var/run/streamcube-read';
const tlsDir = '/var/run/streamcube-tls';
/** SIGTERM flushes and checkpoints; the chart gives it the same time. */
const terminationGracePeriodSeconds = 60;

/** The owner reference every object of the pool carries: GC deletes them with the pool. */
export function poolOwnerReference(pool: ReceiverPool): V1OwnerReference {
  return {
    apiVersion: pool.apiVersion,
    kind: pool.kind,
    name: pool.metadata.name ?? '',
    uid: pool.metadata.uid ?? '',
    controller: true,
  };
}

/** The labels of every object of set `set`: the selector's and the component's. */
function objectLabels(pool: string, set: string): Record<string, string> {
  return {
    'app.kubernetes.io/name': 'streamcube',
    'app.kubernetes.io/component': 'receiver',
    'app.kubernetes.io/managed-by': 'streamcube-operator',
    ...setSelector(pool, set),
  };
}

export function renderSet(pool: ReceiverPool, index: number): SetObjects {
  const poolName = pool.metadata.name ?? '';
  const namespace = pool.metadata.namespace ?? 'default';
  // The replica set (label, --replica-set) and its objects' name: the same unless spec.setNames
  // adopts the chart's older names (set rs-a, objects <pool>-rs-a).
  const set = setName(poolName, index, pool.spec.setNames);
  const objectName = setObjectName(poolName, index, pool.spec.setNames);
  const selector = setSelector(poolName, set);
  const metadata = {
    name: objectName,
    namespace,
    labels: objectLabels(poolName, set),
    ownerReferences: [poolOwnerReference(pool)],
  };
  const { spec } = pool;
  const { port, metricsPort } = spec.receiver;
  const service: V1Service = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata,
    spec: {
      clusterIP: 'None',
      selector,
      ports: [
        { name: 'admin', port, targetPort: port },
        { name: 'metrics', port: metricsPort, targetPort: metricsPort },
      ],
    },
  };
  const budget = spec.podDisruptionBudget;
  const podDisruptionBudget: V1PodDisruptionBudget = {
    apiVersion: 'policy/v1',
    kind: 'PodDisruptionBudget',
    metadata,
    spec: {
      ...(budget?.minAvailable !== undefined
        ? { minAvailable: budget.minAvailable }
        : { maxUnavailable: budget?.maxUnavailable ?? 1 }),
      selector: { matchLabels: selector },
    },
  };
  const statefulSet: V1StatefulSet = {
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    metadata,
    spec: {
      serviceName: objectName,
      replicas: spec.replicas,
      podManagementPolicy: 'Parallel',
      selector: { matchLabels: selector },
      // The claims of a set removed go as the pool says; a replica scaled away keeps its own.
      persistentVolumeClaimRetentionPolicy: {
        whenDeleted: spec.storage.retainOnScaleIn,
        whenScaled: 'Retain',
      },
      template: {
        metadata: {
          labels: { ...spec.podLabels, ...objectLabels(poolName, set) },
          annotations: {
            'prometheus.io/scrape': 'true',
            'prometheus.io/port': String(metricsPort),
            ...spec.podAnnotations,
          },
        },
        spec: podSpec(pool, set, selector),
      },
      volumeClaimTemplates: [
        {
          metadata: { name: 'data', labels: selector },
          spec: {
            accessModes: ['ReadWriteOnce'],
            ...(spec.storage.storageClassName === undefined
              ? {}
              : { storageClassName: spec.storage.storageClassName }),
            resources: { requests: { storage: spec.storage.size } },
          },
        },
      ],
    },
  };
  return { statefulSet, service, podDisruptionBudget };
}

function podSpec(pool: ReceiverPool, set: string, selector: Record<string, string>): V1PodSpec {
  const { spec } = pool;
  const scheduling = spec.scheduling ?? {};
  const { receiver } = spec;
  return {
    // Pod Security "restricted", as the chart's pods.
    securityContext: {
      runAsNonRoot: true,
      runAsUser: 1000,
      runAsGroup: 1000,
      fsGroup: 1000,
      seccompProfile: { type: 'RuntimeDefault' },
    },
    ...(spec.imagePullSecrets?.length
      ? { imagePullSecrets: spec.imagePullSecrets.map((name) => ({ name })) }
      : {}),
    ...(scheduling.priorityClassName ? { priorityClassName: scheduling.priorityClassName } : {}),
    ...(scheduling.nodeSelector ? { nodeSelector: scheduling.nodeSelector } : {}),
    ...(scheduling.tolerations?.length ? { tolerations: scheduling.tolerations } : {}),
    ...(scheduling.affinity ? { affinity: scheduling.affinity } : {}),
    ...(scheduling.topologySpreadConstraints?.length
      ? {
          topologySpreadConstraints: scheduling.topologySpreadConstraints.map((c) => ({
            ...c,
            labelSelector: { matchLabels: selector },
          })),
        }
      : {}),
    ...(receiver.serviceAccountName ? { serviceAccountName: receiver.serviceAccountName } : {}),
    // The API server is needed only to read the leader Lease: no token in the pod otherwise.
    automountServiceAccountToken: receiver.leaderLease !== undefined,
    terminationGracePeriodSeconds,
    containers: [receiverContainer(pool, set)],
    volumes: volumes(pool),
  };
}

/** The flags of `streamcube receiver` in set `set`, then the pool's extraArgs (a later flag wins). */
export function receiverArgs(pool: ReceiverPool, set: string): string[] {
  const { receiver, deepStorage } = pool.spec;
  const s3 = deepStorage.s3;
  return [
    'receiver',
    `--replica-set=${set}`,
    `--port=${receiver.port}`,
    `--data-dir=${dataDir}`,
    ...(s3
      ? [
          `--deep-storage=s3://${s3.bucket}${s3.prefix ? `/${s3.prefix}` : ''}`,
          ...(s3.endpoint ? [`--s3-endpoint=${s3.endpoint}`] : []),
          ...(s3.region ? [`--s3-region=${s3.region}`] : []),
          ...(s3.forcePathStyle ? ['--s3-force-path-style'] : []),
        ]
      : [`--deep-storage-dir=${deepStorageDir}`]),
    `--admin-token-file=${tokenDir}/token`,
    `--read-token-file=${readTokenDir}/token`,
    `--metrics-port=${receiver.metricsPort}`,
    ...(receiver.tlsSecret
      ? [`--tls-cert-file=${tlsDir}/tls.crt`, `--tls-key-file=${tlsDir}/tls.key`]
      : []),
    ...(receiver.leaderLease
      ? [`--leader-lease=${pool.metadata.namespace ?? 'default'}/${receiver.leaderLease}`]
      : []),
    ...(receiver.extraArgs ?? []),
  ];
}

function receiverContainer(pool: ReceiverPool, set: string): V1Container {
  const { spec } = pool;
  const { receiver } = spec;
  const credentials = spec.deepStorage.s3?.credentialsSecret;
  const env: V1EnvVar[] = [
    { name: 'STREAMCUBE_RECEIVER_ID', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
    ...(credentials
      ? ['AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY'].map((key) => ({
          name: key,
          valueFrom: { secretKeyRef: { name: credentials, key } },
        }))
      : []),
    ...((receiver.extraEnv ?? []) as V1EnvVar[]),
  ];
  const mounts: V1VolumeMount[] = [
    { name: 'data', mountPath: dataDir },
    ...(spec.deepStorage.claimName ? [{ name: 'deep-storage', mountPath: deepStorageDir }] : []),
    { name: 'token', mountPath: tokenDir, readOnly: true },
    { name: 'read-token', mountPath: readTokenDir, readOnly: true },
    ...(receiver.tlsSecret ? [{ name: 'tls', mountPath: tlsDir, readOnly: true }] : []),
    { name: 'tmp', mountPath: '/tmp' },
  ];
  return {
    name: 'receiver',
    image: spec.image,
    imagePullPolicy: spec.imagePullPolicy,
    securityContext: {
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
    },
    args: receiverArgs(pool, set),
    env,
    ports: [
      { name: 'admin', containerPort: receiver.port },
      { name: 'metrics', containerPort: receiver.metricsPort },
    ],
    // On the metrics port: plain HTTP, whatever the admin port serves.
    readinessProbe: { httpGet: { path: '/readyz', port: 'metrics' } },
    livenessProbe: { httpGet: { path: '/healthz', port: 'metrics' }, periodSeconds: 20 },
    ...(spec.resources ? { resources: spec.resources } : {}),
    volumeMounts: mounts,
  };
}

function volumes(pool: ReceiverPool): V1Volume[] {
  const { receiver, deepStorage } = pool.spec;
  const tokenVolume = (name: string, ref: { name: string; key: string }): V1Volume => ({
    name,
    secret: { secretName: ref.name, items: [{ key: ref.key, path: 'token' }] },
  });
  return [
    { name: 'tmp', emptyDir: { sizeLimit: '256Mi' } },
    ...(deepStorage.claimName
      ? [{ name: 'deep-storage', persistentVolumeClaim: { claimName: deepStorage.claimName } }]
      : []),
    tokenVolume('token', receiver.adminToken),
    tokenVolume('read-token', receiver.readToken),
    ...(receiver.tlsSecret
      ? [
          {
            name: 'tls',
            secret: {
              secretName: receiver.tlsSecret,
              items: ['tls.crt', 'tls.key', 'ca.crt'].map((key) => ({ key, path: key })),
            },
          },
        ]
      : []),
  ];
}
