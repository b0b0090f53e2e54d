// The chart's ReceiverPool, applied by the operator (--pool-configmap) with the chart's rights,
// against the real API server and a real `helm`: helm install makes the ConfigMap, the operator the
// pool (owned by the ConfigMap) and its sets; a receiver value changed by `helm upgrade` reaches the
// pool and its StatefulSets (Helm applied no change to a pool it adopted: helm/helm#11638); a pool
// scaled since keeps its count until receivers.sets changes; a pool the API server refuses leaves
// the pool as it was, with a Warning Event naming the field. No kubelet runs: no pod starts.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { CoreV1Api, type CoreV1Event } from '@kubernetes/client-node';
import type { ReceiverPool } from '../../src/api/receiver-pool.ts';
import {
  chartDigestAnnotation,
  chartFieldManager,
  chartSetsAnnotation,
} from '../../src/operator/pool/chart-pool.ts';
import { testEnvironment } from '../env/connection.ts';
import { kubectl, type OperatorProcess } from '../support/cluster.ts';
import { useOperatorStack } from '../support/operator-stack.ts';
import { operatorCubeRules, operatorPoolRules } from '../support/operator-rules.ts';
import { serviceAccountKubeconfig } from '../support/receiver-kubeconfig.ts';
import { getPool, orUndefined, scalePool, statefulSet } from '../support/receiver-pools.ts';
import { waitFor } from '../support/wait.ts';

const chart = 'deploy/helm/streamcube';
const release = 'cp';
const configMap = `${release}-receiver-pool`;
const resyncMs = 1_000;

const stack = useOperatorStack({ name: 'chart-pool', replicaSets: [], operator: false });
let operator: OperatorProcess | undefined;

/** The operator's streamcube_pool_chart_applied series, one line each, without the namespace. */
async function appliedSeries(): Promise<string[]> {
  const text = await (await fetch(`http://127.0.0.1:${operator!.port}/metrics`)).text();
  return text
    .split('\n')
    .filter((l) => l.startsWith('streamcube_pool_chart_applied{'))
    .map((l) => l.replace(`namespace="${stack.namespace}",`, ''));
}

async function helm(...args: string[]): Promise<string> {
  const binary = process.env.STREAMCUBE_HELM;
  if (!binary) throw new Error('STREAMCUBE_HELM is not set: the jest global set-up builds helm');
  const { stdout } = await promisify(execFile)(binary, args, {
    env: { ...process.env, KUBECONFIG: testEnvironment().kube.kubeconfig },
  });
  return stdout;
}

/** `helm <verb>` of the release in the stack's namespace: the environment's CRDs, no cluster roles added to the defaults. */
const release$ = (verb: 'install' | 'upgrade', ...more: string[]): Promise<string> =>
  helm(
    verb,
    release,
    chart,
    '--namespace',
    stack.namespace,
    ...(verb === 'upgrade' ? ['--reuse-values'] : []),
    '--set',
    'crds.enabled=false',
    '--set',
    'rbac.aggregateToDefaultRoles=false',
    ...more.flatMap((set) => ['--set', set]),
  );

const pool = (): Promise<ReceiverPool | undefined> => orUndefined(getPool(stack, release));

/** The receiver container's flags of StatefulSet `name`, once it exists. */
async function receiverArgs(name: string): Promise<string[] | undefined> {
  const sts = await statefulSet(stack, name);
  return sts?.spec?.template.spec?.containers[0]?.args;
}

async function eventsOf(kind: string, name: string): Promise<CoreV1Event[]> {
  const list = await stack.kc
    .makeApiClient(CoreV1Api)
    .listNamespacedEvent({ namespace: stack.namespace });
  return list.items.filter((e) => e.involvedObject.kind === kind && e.involvedObject.name === name);
}

beforeAll(async () => {
  const kubeconfig = await serviceAccountKubeconfig(stack.kc, stack.namespace, 'operator', [
    ...operatorCubeRules,
    ...operatorPoolRules(configMap),
  ]);
  await release$('install');
  operator = await stack.startOperator(
    {},
    undefined,
    [
      `--resync=${resyncMs}ms`,
      `--receiver-namespace=${stack.namespace}`,
      `--pool-configmap=${configMap}`,
    ],
    kubeconfig,
  );
});

afterAll(async () => {
  await helm('uninstall', release, '--namespace', stack.namespace).catch(() => undefined);
});

test('helm install: the operator makes the pool from the ConfigMap, owned by it, under its own field manager, and its sets; nothing is written again while nothing changes', async () => {
  const created = await waitFor('the pool made from the ConfigMap', pool);
  const owner = await stack.kc
    .makeApiClient(CoreV1Api)
    .readNamespacedConfigMap({ name: configMap, namespace: stack.namespace });
  expect(created.metadata.ownerReferences).toEqual([
    { apiVersion: 'v1', kind: 'ConfigMap', name: configMap, uid: owner.metadata?.uid },
  ]);
  expect(created.metadata.managedFields?.map((f) => [f.manager, f.operation])).toContainEqual([
    chartFieldManager,
    'Apply',
  ]);
  expect(created.metadata.annotations).toMatchObject({ [chartSetsAnnotation]: '2' });
  expect(created.spec).toMatchObject({ sets: 2, replicas: 2 });
  await waitFor('streamcube_pool_chart_applied 1', async () =>
    (await appliedSeries()).join() === `streamcube_pool_chart_applied{configmap="${configMap}"} 1`
      ? true
      : undefined,
  );
  // Not a resource of the release: Helm neither adopts nor deletes it.
  // (A document of that kind; the CRD, when the release has it, names the kind indented.)
  expect(await helm('get', 'manifest', release, '--namespace', stack.namespace)).not.toMatch(
    /^kind: ReceiverPool$/m,
  );
  for (const set of [`${release}-0`, `${release}-1`])
    expect(await waitFor(`StatefulSet ${set}`, () => receiverArgs(set))).toContain(
      '--flush-interval=1s',
    );
  expect(
    (await eventsOf('ReceiverPool', release)).map((e) => [e.reason, e.message]),
  ).toContainEqual([
    'ChartCreated',
    `created from ConfigMap ${stack.namespace}/${configMap} (the chart's values): spec.sets 2, the chart's`,
  ]);
  // Stable: the pool's spec is not applied again over three resyncs.
  const { generation } = (await pool())!.metadata;
  await new Promise((resolve) => setTimeout(resolve, 3 * resyncMs + 500));
  expect((await pool())?.metadata.generation).toBe(generation);
  expect(
    (await eventsOf('ReceiverPool', release)).filter((e) => e.reason?.startsWith('Chart')),
  ).toHaveLength(1);
});

test('helm upgrade with a changed receiver value: the pool and its StatefulSets take it (helm/helm#11638: Helm itself applied none to the pool it adopted)', async () => {
  await waitFor('the pool', pool);
  await release$('upgrade', 'receivers.flushInterval=3s');
  for (const set of [`${release}-0`, `${release}-1`])
    await waitFor(`StatefulSet ${set} with --flush-interval=3s`, async () =>
      (await receiverArgs(set))?.includes('--flush-interval=3s') ? true : undefined,
    );
  const applied = await pool();
  expect(applied?.spec.receiver.extraArgs).toContain('--flush-interval=3s');
  expect(applied?.spec.sets).toBe(2);
  expect((await eventsOf('ReceiverPool', release)).map((e) => e.reason)).toContain('ChartApplied');
});

test('a pool scaled since (kubectl scale) keeps its count through an upgrade that leaves receivers.sets alone; one that changes it sets it', async () => {
  await waitFor('the pool', pool);
  await scalePool(stack, release, 3);
  await waitFor(`StatefulSet ${release}-2`, () => statefulSet(stack, `${release}-2`));
  await release$('upgrade', 'receivers.idleTimeout=45s');
  const kept = await waitFor('the pool applied with --idle-timeout=45s', async () => {
    const p = await pool();
    return p?.spec.receiver.extraArgs?.includes('--idle-timeout=45s') ? p : undefined;
  });
  expect(kept.spec.sets).toBe(3);
  expect(kept.metadata.annotations).toMatchObject({ [chartSetsAnnotation]: '2' });
  // The Event of the series ChartApplied, its message the last apply's.
  await waitFor('the ChartApplied Event of the kept count', async () =>
    (await eventsOf('ReceiverPool', release)).find(
      (e) =>
        e.reason === 'ChartApplied' &&
        e.message?.endsWith("spec.sets 3 kept (the chart's is 2, unchanged since the last apply)"),
    ),
  );
  expect(await statefulSet(stack, `${release}-2`)).toBeDefined();

  await release$('upgrade', 'receivers.sets=1');
  const scaled = await waitFor('spec.sets 1 from the chart', async () => {
    const p = await pool();
    return p?.spec.sets === 1 ? p : undefined;
  });
  expect(scaled.metadata.annotations).toMatchObject({ [chartSetsAnnotation]: '1' });
  // No cube uses the sets past it: they go.
  await waitFor(`StatefulSets ${release}-1 and ${release}-2 removed`, async () =>
    (await statefulSet(stack, `${release}-1`)) === undefined &&
    (await statefulSet(stack, `${release}-2`)) === undefined
      ? true
      : undefined,
  );
});

test('a ConfigMap whose pool the API server refuses: the pool stays as it was, a Warning Event on the ConfigMap names the field; mended, it applies', async () => {
  const before = await waitFor('the pool', pool);
  const text = JSON.parse(
    await kubectl(
      'get',
      'configmap',
      configMap,
      '--namespace',
      stack.namespace,
      '-o',
      'jsonpath={.data.pool\\.json}',
    ),
  ) as ReceiverPool;
  const edit = (replicas: number): Promise<string> =>
    kubectl(
      'patch',
      'configmap',
      configMap,
      '--namespace',
      stack.namespace,
      '--type=merge',
      '-p',
      JSON.stringify({
        data: { 'pool.json': JSON.stringify({ ...text, spec: { ...text.spec, replicas } }) },
      }),
    );
  await edit(0);
  const warning = await waitFor('a PoolNotApplied Event on the ConfigMap', async () =>
    (await eventsOf('ConfigMap', configMap)).find((e) => e.reason === 'PoolNotApplied'),
  );
  expect(warning.type).toBe('Warning');
  expect(warning.message).toContain(`the API server refused ReceiverPool ${release}`);
  expect(warning.message).toContain('spec.replicas');
  expect((await pool())?.spec.replicas).toBe(before.spec.replicas);
  await waitFor('streamcube_pool_chart_applied 0', async () =>
    (await appliedSeries()).join() === `streamcube_pool_chart_applied{configmap="${configMap}"} 0`
      ? true
      : undefined,
  );
  expect((await pool())?.metadata.annotations?.[chartDigestAnnotation]).toBe(
    before.metadata.annotations?.[chartDigestAnnotation],
  );
  await edit(1);
  await waitFor('the mended pool applied', async () =>
    (await pool())?.spec.replicas === 1 ? true : undefined,
  );
  await waitFor('streamcube_pool_chart_applied 1 again', async () =>
    (await appliedSeries()).join() === `streamcube_pool_chart_applied{configmap="${configMap}"} 1`
      ? true
      : undefined,
  );
});

test('a pool deleted by hand is made again from the ConfigMap within a resync', async () => {
  const before = await waitFor('the pool', pool);
  await kubectl('delete', 'receiverpool', release, '--namespace', stack.namespace, '--wait=false');
  const again = await waitFor('the pool made again', async () => {
    const p = await pool();
    return p && p.metadata.uid !== before.metadata.uid && !p.metadata.deletionTimestamp
      ? p
      : undefined;
  });
  expect(again.spec.replicas).toBe(before.spec.replicas);
  expect(again.metadata.ownerReferences?.map((r) => r.name)).toEqual([configMap]);
});
