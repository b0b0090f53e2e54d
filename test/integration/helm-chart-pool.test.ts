// The chart's ReceiverPool: the values it is made of, the old values (receivers.replicaSets) as
// its first sets, and the upgrade from the chart before the pool against the real API server: the
// previous release's StatefulSets leave the release and their names stay the pool's setNames, so
// the operator makes StatefulSets of the same names whose pods reuse the same claims.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { AppsV1Api, type KubernetesObject, type V1ConfigMap } from '@kubernetes/client-node';
import { loadAll } from 'js-yaml';
import { receiverPoolSpec, type ReceiverPool } from '../../src/api/receiver-pool.ts';
import { poolOfConfigMap } from '../../src/operator/pool/chart-pool.ts';
import { applyChartPoolAsLeader } from '../support/receiver-pools.ts';
import { renderSet } from '../../src/operator/pool/render.ts';
import { adminKubeConfig, testEnvironment } from '../env/connection.ts';
import { applyCrd, createNamespace, kubectl } from '../support/cluster.ts';
import { waitFor } from '../support/wait.ts';
import { previousSources } from '../e2e/previous-release.ts';

const chart = 'deploy/helm/streamcube';
const kc = adminKubeConfig();

async function helm(...args: string[]): Promise<{ stdout: string; stderr: string }> {
  const binary = process.env.STREAMCUBE_HELM;
  if (!binary) throw new Error('STREAMCUBE_HELM is not set: the jest global set-up builds helm');
  return promisify(execFile)(binary, args, {
    env: { ...process.env, KUBECONFIG: testEnvironment().kube.kubeconfig },
  });
}

type Rendered = KubernetesObject & { spec?: Record<string, unknown> };

/** `helm template` (release t) with `--set` pairs: the chart's ReceiverPool, parsed as the API does. */
async function renderPool(...sets: string[]): Promise<ReceiverPool> {
  const args = sets.flatMap((set) => ['--set', set]);
  const { stdout } = await helm(
    'template',
    't',
    chart,
    '--namespace',
    'chart-ns',
    '--show-only',
    'templates/receivers.yaml',
    ...args,
  );
  const configMap: V1ConfigMap | undefined = (loadAll(stdout) as Rendered[]).find(
    (o) => o?.kind === 'ConfigMap' && o.metadata?.name === 't-receiver-pool',
  );
  if (!configMap) throw new Error('no ConfigMap t-receiver-pool rendered');
  const parsed = poolOfConfigMap(configMap);
  if ('error' in parsed) throw new Error(parsed.error);
  const pool = parsed.manifest;
  return {
    apiVersion: 'streamcube.io/v1alpha1',
    kind: 'ReceiverPool',
    metadata: { ...pool.metadata, namespace: 'chart-ns', uid: 'pool-uid' },
    spec: receiverPoolSpec.parse(pool.spec),
  };
}

/**
 * `--namespace` and the values of a release in the shared API server: the CRDs are the
 * environment's (the release leaves them alone), and it adds nothing to the cluster's view and edit
 * roles (the aggregated-roles test reads them).
 */
const inEnvironment = (namespace: string): string[] => [
  '--namespace',
  namespace,
  '--set',
  'crds.enabled=false',
  '--set',
  'rbac.aggregateToDefaultRoles=false',
];

/** The name, replicas and replica-set label of every StatefulSet the operator makes of `pool`. */
const statefulSetsOf = (pool: ReceiverPool): [string, number, string][] =>
  Array.from({ length: pool.spec.sets }, (_, index) => {
    const { statefulSet } = renderSet(pool, index);
    return [
      statefulSet.metadata?.name ?? '',
      statefulSet.spec?.replicas ?? 0,
      statefulSet.spec?.template.metadata?.labels?.['streamcube.io/replica-set'] ?? '',
    ];
  });

test('by default a pool named after the release: sets <release>-0 and <release>-1 of two receivers, no adopted names', async () => {
  const pool = await renderPool();
  expect(pool.metadata.name).toBe('t');
  expect(pool.spec.setNames).toBeUndefined();
  expect(statefulSetsOf(pool)).toEqual([
    ['t-0', 2, 't-0'],
    ['t-1', 2, 't-1'],
  ]);
  expect(statefulSetsOf(await renderPool('receivers.sets=3', 'receivers.replicas=1'))).toEqual([
    ['t-0', 1, 't-0'],
    ['t-1', 1, 't-1'],
    ['t-2', 1, 't-2'],
  ]);
  const released = await renderPool('receivers.dataVolume.retainOnScaleIn=Delete');
  expect(released.spec.storage.retainOnScaleIn).toBe('Delete');
  await expect(renderPool('receivers.dataVolume.retainOnScaleIn=Never')).rejects.toThrow(
    /retainOnScaleIn/,
  );
});

test('the pool is no resource or hook of the release, whatever the API server serves: a ConfigMap holds it, which the operator applies', async () => {
  for (const more of [[], ['--api-versions', 'streamcube.io/v1alpha1/ReceiverPool']]) {
    const { stdout } = await helm('template', 't', chart, '--namespace', 'chart-ns', ...more);
    const objects = (loadAll(stdout) as Rendered[]).filter((o) => o);
    expect(objects.filter((o) => o.kind === 'ReceiverPool')).toEqual([]);
    const configMap = objects.find((o) => o.metadata?.name === 't-receiver-pool');
    expect(configMap).toMatchObject({
      kind: 'ConfigMap',
      metadata: { labels: { 'app.kubernetes.io/component': 'receiver' } },
    });
    expect(configMap?.metadata?.annotations).toBeUndefined();
  }
});

test("older values: receivers.replicaSets install as the pool's first sets under the older chart's names (claims data-<release>-<name>-<n>); different replicas are refused, naming the value", async () => {
  const pool = await renderPool(
    'receivers.replicaSets[0].name=rs-a',
    'receivers.replicaSets[0].replicas=3',
    'receivers.replicaSets[1].name=rs-b',
    'receivers.replicaSets[1].replicas=3',
    // replicaSets replace sets and replicas.
    'receivers.sets=5',
  );
  expect(pool.spec).toMatchObject({ sets: 2, replicas: 3, setNames: ['rs-a', 'rs-b'] });
  expect(statefulSetsOf(pool)).toEqual([
    ['t-rs-a', 3, 'rs-a'],
    ['t-rs-b', 3, 'rs-b'],
  ]);
  const { statefulSet } = renderSet(pool, 0);
  expect(statefulSet.spec?.volumeClaimTemplates?.map((t) => t.metadata?.name)).toEqual(['data']);
  expect(statefulSet.spec?.template.spec?.containers[0]?.args).toContain('--replica-set=rs-a');
  // A scale-out past them adds <release>-<index>.
  expect(statefulSetsOf({ ...pool, spec: { ...pool.spec, sets: 3 } })[2]).toEqual([
    't-2',
    3,
    't-2',
  ]);
  // The default replicas of an entry is 2, as the older chart's.
  await expect(
    renderPool(
      'receivers.replicaSets[0].name=rs-a',
      'receivers.replicaSets[1].name=rs-b',
      'receivers.replicaSets[1].replicas=3',
    ),
  ).rejects.toThrow(/receivers\.replicaSets: .* rs-a has 2, rs-b has 3/);
});

test("helm upgrade from the chart before the pool: its StatefulSets leave the release, their names stay the pool's setNames (looked up), on the next upgrade too", async () => {
  await applyCrd();
  const namespace = await createNamespace(kc, 'helm-pool');
  const previous = previousSources(['deploy/helm/streamcube']);
  try {
    await helm(
      'install',
      'up',
      join(previous.dir, 'deploy', 'helm', 'streamcube'),
      '--namespace',
      namespace,
      '--skip-crds',
    );
  } finally {
    previous.remove();
  }
  const apps = kc.makeApiClient(AppsV1Api);
  const statefulSets = async (): Promise<(string | undefined)[]> =>
    (await apps.listNamespacedStatefulSet({ namespace })).items
      .filter((s) => !s.metadata?.deletionTimestamp)
      .map((s) => s.metadata?.name);
  expect(await statefulSets()).toEqual(['up-rs-a', 'up-rs-b']);
  const pool = async (): Promise<ReceiverPool> =>
    JSON.parse(
      await kubectl('get', 'receiverpool', 'up', '--namespace', namespace, '-o', 'json'),
    ) as ReceiverPool;
  const upgrade = (...more: string[]) =>
    helm('upgrade', 'up', chart, ...inEnvironment(namespace), ...more);
  const apply = () => applyChartPoolAsLeader(kc, namespace, 'up-receiver-pool');
  try {
    await upgrade();
    expect(await apply()).toMatchObject({ outcome: 'applied', sets: 2, setsFrom: 'chart' });
    expect((await pool()).spec).toMatchObject({ sets: 2, replicas: 2, setNames: ['rs-a', 'rs-b'] });
    // Helm removed the older chart's StatefulSets (and their Services and PDBs); the operator
    // makes them again under the pool, by the same names.
    await waitFor(
      "the older chart's StatefulSets removed",
      async () => ((await statefulSets()).length === 0 ? true : undefined),
      30_000,
      200,
    );
    expect(statefulSetsOf(await pool())).toEqual([
      ['up-rs-a', 2, 'rs-a'],
      ['up-rs-b', 2, 'rs-b'],
    ]);
    // No StatefulSet of the older chart is left to look up: the pool's own setNames are kept.
    await upgrade('--set', 'receivers.sets=3');
    expect(await apply()).toMatchObject({ outcome: 'applied', sets: 3, setsFrom: 'chart' });
    expect((await pool()).spec).toMatchObject({ sets: 3, setNames: ['rs-a', 'rs-b'] });
  } finally {
    await helm('uninstall', 'up', '--namespace', namespace);
  }
});

test('a development install whose release holds the pool (main before the ConfigMap, never released): annotated helm.sh/resource-policy=keep as the chart README says, the upgrade leaves it, and the operator takes it over with its scaled count', async () => {
  await applyCrd();
  const namespace = await createNamespace(kc, 'helm-pool-dev');
  const flags = inEnvironment(namespace);
  // ecc264b: the last commit whose release held the pool (the kind is known here: no hook).
  const before = previousSources(
    ['deploy/helm/streamcube'],
    'ecc264b5df8722788d2815c30980d741e2659e57',
  );
  try {
    await helm('install', 'dev', join(before.dir, 'deploy', 'helm', 'streamcube'), ...flags);
  } finally {
    before.remove();
  }
  const pool = async (): Promise<ReceiverPool> =>
    JSON.parse(
      await kubectl('get', 'receiverpool', 'dev', '--namespace', namespace, '-o', 'json'),
    ) as ReceiverPool;
  const made = await pool();
  await kubectl('scale', 'receiverpool/dev', '--replicas=3', '--namespace', namespace);
  await kubectl(
    'annotate',
    'receiverpool',
    'dev',
    'helm.sh/resource-policy=keep',
    '--namespace',
    namespace,
  );
  try {
    await helm('upgrade', 'dev', chart, ...flags, '--set', 'receivers.flushInterval=2s');
    const kept = await pool();
    expect(kept.metadata.uid).toBe(made.metadata.uid);
    expect(await applyChartPoolAsLeader(kc, namespace, 'dev-receiver-pool')).toMatchObject({
      outcome: 'applied',
      sets: 3,
      setsFrom: 'kept',
    });
    const applied = await pool();
    expect(applied.metadata.uid).toBe(made.metadata.uid);
    expect(applied.metadata.ownerReferences?.map((r) => `${r.kind}/${r.name}`)).toEqual([
      'ConfigMap/dev-receiver-pool',
    ]);
    expect(applied.spec.sets).toBe(3);
    expect(applied.spec.receiver.extraArgs).toContain('--flush-interval=2s');
  } finally {
    await helm('uninstall', 'dev', '--namespace', namespace);
  }
});
