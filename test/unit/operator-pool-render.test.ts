// A pool's desired objects per set: names, labels, owner, and the receiver pod the chart renders.
import {
  receiverPoolSpec,
  type ReceiverPool,
  type ReceiverPoolSpecInput,
} from '../../src/api/receiver-pool.ts';
import { receiverArgs, renderSet } from '../../src/operator/pool/render.ts';
import { setIndexOf } from '../../src/operator/pool/set-names.ts';

const baseSpec: ReceiverPoolSpecInput = {
  sets: 2,
  image: 'streamcube:test',
  storage: { size: '1Gi' },
  deepStorage: { claimName: 'deep' },
  receiver: { adminToken: { name: 'admin' }, readToken: { name: 'read', key: 'rt' } },
};

function pool(spec: Partial<ReceiverPoolSpecInput> = {}): ReceiverPool {
  return {
    apiVersion: 'streamcube.io/v1alpha1',
    kind: 'ReceiverPool',
    metadata: { name: 'p', namespace: 'ns', uid: 'u-1', generation: 1 },
    spec: receiverPoolSpec.parse({ ...baseSpec, ...spec }),
  };
}

test('set i is <pool>-i: StatefulSet, headless Service and PDB, labelled and owned by the pool', () => {
  const { statefulSet, service, podDisruptionBudget } = renderSet(pool(), 1);
  const selector = { 'streamcube.io/pool': 'p', 'streamcube.io/replica-set': 'p-1' };
  for (const o of [statefulSet, service, podDisruptionBudget]) {
    expect(o.metadata).toMatchObject({ name: 'p-1', namespace: 'ns', labels: selector });
    expect(o.metadata?.ownerReferences).toEqual([
      {
        apiVersion: 'streamcube.io/v1alpha1',
        kind: 'ReceiverPool',
        name: 'p',
        uid: 'u-1',
        controller: true,
      },
    ]);
  }
  expect(statefulSet.spec).toMatchObject({
    serviceName: 'p-1',
    replicas: 2,
    selector: { matchLabels: selector },
    persistentVolumeClaimRetentionPolicy: { whenDeleted: 'Retain', whenScaled: 'Retain' },
  });
  expect(statefulSet.spec?.template.metadata?.labels).toMatchObject(selector);
  expect(statefulSet.spec?.volumeClaimTemplates?.[0]).toMatchObject({
    metadata: { name: 'data', labels: selector },
    spec: { resources: { requests: { storage: '1Gi' } } },
  });
  expect(service.spec).toMatchObject({ clusterIP: 'None', selector });
  expect(podDisruptionBudget.spec).toEqual({
    maxUnavailable: 1,
    selector: { matchLabels: selector },
  });
});

test.each<[string, Partial<ReceiverPoolSpecInput>, string[], string[]]>([
  [
    'a shared claim, plain HTTP, no Lease',
    {},
    ['--replica-set=p-0', '--deep-storage-dir=/var/lib/streamcube/deep-storage'],
    ['--tls-cert-file', '--leader-lease', '--deep-storage=s3'],
  ],
  [
    'S3 with an endpoint, TLS, the Lease, extra flags last',
    {
      deepStorage: {
        s3: { bucket: 'bkt', prefix: 'x', endpoint: 'http://s3:9000', forcePathStyle: true },
      },
      receiver: {
        adminToken: { name: 'admin' },
        readToken: { name: 'read' },
        tlsSecret: 'tls',
        serviceAccountName: 'sa',
        leaderLease: 'streamcube-operator',
        extraArgs: ['--flush-interval=2s'],
      },
    },
    [
      '--deep-storage=s3://bkt/x',
      '--s3-endpoint=http://s3:9000',
      '--s3-force-path-style',
      '--tls-cert-file=/var/run/streamcube-tls/tls.crt',
      '--leader-lease=ns/streamcube-operator',
      '--flush-interval=2s',
    ],
    ['--deep-storage-dir'],
  ],
])('receiver flags: %s', (_, spec, present, absent) => {
  const args = receiverArgs(pool(spec), 'p-0');
  expect(args[0]).toBe('receiver');
  for (const flag of present) expect(args).toContain(flag);
  for (const flag of absent) expect(args.some((a) => a.startsWith(flag))).toBe(false);
  if (spec.receiver?.extraArgs) expect(args.at(-1)).toBe(spec.receiver.extraArgs.at(-1));
});

test('the pod mounts the token keys as files, the claim or none, and the TLS Secret when set', () => {
  const plain = renderSet(pool(), 0).statefulSet.spec!.template.spec!;
  expect(plain.volumes?.find((v) => v.name === 'read-token')?.secret).toEqual({
    secretName: 'read',
    items: [{ key: 'rt', path: 'token' }],
  });
  expect(plain.volumes?.find((v) => v.name === 'deep-storage')?.persistentVolumeClaim).toEqual({
    claimName: 'deep',
  });
  expect(plain.volumes?.some((v) => v.name === 'tls')).toBe(false);
  expect(plain.automountServiceAccountToken).toBe(false);
  expect(plain.containers[0]?.env?.[0]).toEqual({
    name: 'STREAMCUBE_RECEIVER_ID',
    valueFrom: { fieldRef: { fieldPath: 'metadata.name' } },
  });
  const s3 = renderSet(
    pool({ deepStorage: { s3: { bucket: 'bkt', credentialsSecret: 'aws' } } }),
    0,
  ).statefulSet.spec!.template.spec!;
  expect(s3.volumes?.some((v) => v.name === 'deep-storage')).toBe(false);
  expect(s3.containers[0]?.env?.map((e) => e.name)).toEqual([
    'STREAMCUBE_RECEIVER_ID',
    'AWS_ACCESS_KEY_ID',
    'AWS_SECRET_ACCESS_KEY',
  ]);
});

test("scheduling: a spread constraint selects its own set's pods; the pool's labels win over podLabels", () => {
  const { statefulSet } = renderSet(
    pool({
      podLabels: { 'streamcube.io/pool': 'other', team: 'a' },
      scheduling: {
        nodeSelector: { disk: 'ssd' },
        tolerations: [{ key: 'dedicated', operator: 'Exists', effect: 'NoSchedule' }],
        topologySpreadConstraints: [{ maxSkew: 1, topologyKey: 'topology.kubernetes.io/zone' }],
      },
    }),
    0,
  );
  const template = statefulSet.spec!.template;
  expect(template.metadata?.labels).toMatchObject({ 'streamcube.io/pool': 'p', team: 'a' });
  expect(template.spec?.nodeSelector).toEqual({ disk: 'ssd' });
  expect(template.spec?.topologySpreadConstraints).toEqual([
    {
      maxSkew: 1,
      topologyKey: 'topology.kubernetes.io/zone',
      whenUnsatisfiable: 'ScheduleAnyway',
      labelSelector: {
        matchLabels: { 'streamcube.io/pool': 'p', 'streamcube.io/replica-set': 'p-0' },
      },
    },
  ]);
});

test.each<[Partial<ReceiverPoolSpecInput>, object]>([
  [{}, { maxUnavailable: 1 }],
  [{ podDisruptionBudget: { maxUnavailable: 2 } }, { maxUnavailable: 2 }],
  [{ replicas: 3, podDisruptionBudget: { minAvailable: 2 } }, { minAvailable: 2 }],
])('PDB of %j', (spec, budget) => {
  expect(renderSet(pool(spec), 0).podDisruptionBudget.spec).toMatchObject(budget);
});

test('setNames: set i is replica set setNames[i] with objects <pool>-<setNames[i]>, as the chart named them; later sets <pool>-<index>', () => {
  const adopted = pool({ sets: 3, setNames: ['rs-a', 'rs-b'] });
  const { statefulSet, service, podDisruptionBudget } = renderSet(adopted, 1);
  const selector = { 'streamcube.io/pool': 'p', 'streamcube.io/replica-set': 'rs-b' };
  for (const o of [statefulSet, service, podDisruptionBudget])
    expect(o.metadata).toMatchObject({ name: 'p-rs-b', labels: selector });
  expect(statefulSet.spec).toMatchObject({
    serviceName: 'p-rs-b',
    selector: { matchLabels: selector },
  });
  // The claim template keeps the chart's name: pods p-rs-b-<n> reuse claims data-p-rs-b-<n>.
  expect(statefulSet.spec?.volumeClaimTemplates?.[0]?.metadata?.name).toBe('data');
  expect(receiverArgs(adopted, 'rs-b')[1]).toBe('--replica-set=rs-b');
  expect(statefulSet.spec?.template.spec?.containers[0]?.args).toContain('--replica-set=rs-b');
  const third = renderSet(adopted, 2).statefulSet;
  expect(third.metadata?.name).toBe('p-2');
  expect(third.spec?.selector.matchLabels).toMatchObject({ 'streamcube.io/replica-set': 'p-2' });
});

test.each<[string[], string, number | undefined]>([
  [['rs-a', 'rs-b'], 'p-rs-a', 0],
  [['rs-a', 'rs-b'], 'p-rs-b', 1],
  [['rs-a', 'rs-b'], 'p-2', 2],
  // Index 0 and 1 are known by their adopted names only.
  [['rs-a', 'rs-b'], 'p-1', undefined],
  [['rs-a'], 'p-rs-b', undefined],
  [['rs-a'], 'q-rs-a', undefined],
])('setIndexOf(p, %s, %s) is %s', (setNames, name, index) => {
  expect(setIndexOf('p', name, setNames)).toBe(index);
});

test('setNames must be unique DNS-1035 labels', () => {
  expect(receiverPoolSpec.safeParse({ ...baseSpec, setNames: ['rs-a', 'rs-a'] }).success).toBe(
    false,
  );
  expect(receiverPoolSpec.safeParse({ ...baseSpec, setNames: ['Rs_a'] }).success).toBe(false);
  expect(receiverPoolSpec.safeParse({ ...baseSpec, setNames: ['rs-a'] }).success).toBe(true);
});

test.each<[string, number | undefined]>([
  ['p-0', 0],
  ['p-12', 12],
  ['p-01', undefined],
  ['p-x', undefined],
  ['pp-1', undefined],
  ['p-', undefined],
])('setIndexOf(p, %s) is %s', (name, index) => {
  expect(setIndexOf('p', name)).toBe(index);
});
