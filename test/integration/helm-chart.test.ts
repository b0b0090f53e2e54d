// The Helm chart: lints, refuses unknown values, carries the generated CRD, and installs against
// the real API server (objects created and valid; no kubelet runs, so pods stay Pending).
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { AppsV1Api, CoreV1Api, PolicyV1Api, RbacAuthorizationV1Api } from '@kubernetes/client-node';
import { crdFile, helmCrdFile } from '../../src/api/crd.ts';
import { adminKubeConfig, testEnvironment } from '../env/connection.ts';
import { applyCrd, createNamespace } from '../support/cluster.ts';

const chart = 'deploy/helm/streamcube';
const kc = adminKubeConfig();

async function helm(...args: string[]): Promise<{ stdout: string; stderr: string }> {
  const binary = process.env.STREAMCUBE_HELM;
  if (!binary) throw new Error('STREAMCUBE_HELM is not set: the jest global set-up builds helm');
  return promisify(execFile)(binary, args, {
    env: { ...process.env, KUBECONFIG: testEnvironment().kube.kubeconfig },
  });
}

test('the chart carries the CRD generated from src/api', () => {
  expect(readFileSync(helmCrdFile, 'utf8')).toBe(readFileSync(crdFile, 'utf8'));
});

test('helm lint passes and a misspelt value is refused by values.schema.json', async () => {
  await helm('lint', chart);
  await expect(
    helm('template', 't', chart, '--set', 'receivers.replicaSet[0].name=x'),
  ).rejects.toThrow(/additional properties 'replicaSet' not allowed/);
  await expect(
    helm('template', 't', chart, '--set', 'receivers.replicaSets[0].name=Bad_Name'),
  ).rejects.toThrow(/name/);
});

test('the operator can run under a ServiceAccount made elsewhere', async () => {
  const { stdout } = await helm(
    'template',
    't',
    chart,
    '--set',
    'operator.serviceAccount.create=false',
    '--set',
    'operator.serviceAccount.name=made-elsewhere',
  );
  expect(stdout).not.toMatch(/^kind: ServiceAccount$/m);
  expect(stdout).toContain('serviceAccountName: made-elsewhere');
  expect(stdout).toMatch(/subjects:\n\s+- kind: ServiceAccount\n\s+name: made-elsewhere/);
});

test('helm install creates the operator, RBAC, token and one StatefulSet per replica set', async () => {
  await applyCrd();
  const namespace = await createNamespace(kc, 'helm');
  await helm(
    'install',
    'sc',
    chart,
    '--namespace',
    namespace,
    '--set',
    'receivers.replicaSets[0].name=rs-x',
    '--set',
    'receivers.replicaSets[0].replicas=3',
  );
  const apps = kc.makeApiClient(AppsV1Api);
  const sets = await apps.listNamespacedStatefulSet({ namespace });
  expect(
    sets.items.map((s) => [
      s.metadata?.name,
      s.spec?.replicas,
      s.spec?.template.metadata?.labels?.['streamcube.io/replica-set'],
    ]),
  ).toEqual([['sc-rs-x', 3, 'rs-x']]);
  // One budget per replica set, and one for the operators (two replicas by default).
  const budgets = await kc
    .makeApiClient(PolicyV1Api)
    .listNamespacedPodDisruptionBudget({ namespace });
  expect(
    budgets.items.map((b) => [b.metadata?.name, b.spec?.maxUnavailable, b.spec?.minAvailable]),
  ).toEqual([
    ['sc-operator', undefined, 1],
    ['sc-rs-x', 1, undefined],
  ]);
  const operator = await apps.readNamespacedDeployment({ name: 'sc-operator', namespace });
  expect(operator.spec?.template.spec?.containers[0]?.args).toContain(`--namespace=${namespace}`);
  const secret = await kc
    .makeApiClient(CoreV1Api)
    .readNamespacedSecret({ name: 'sc-admin-token', namespace });
  const token = Buffer.from(secret.data?.token ?? '', 'base64').toString();
  expect(token).toHaveLength(40);
  const role = await kc
    .makeApiClient(RbacAuthorizationV1Api)
    .readNamespacedRole({ name: 'sc-operator', namespace });
  expect(role.rules?.some((r) => r.resources?.includes('cubeassignments/status'))).toBe(true);

  // An upgrade keeps the token (lookup), so running receivers keep theirs.
  await helm(
    'upgrade',
    'sc',
    chart,
    '--namespace',
    namespace,
    '--set',
    'receivers.replicaSets[0].name=rs-x',
  );
  const after = await kc
    .makeApiClient(CoreV1Api)
    .readNamespacedSecret({ name: 'sc-admin-token', namespace });
  expect(Buffer.from(after.data?.token ?? '', 'base64').toString()).toBe(token);
  await helm('uninstall', 'sc', '--namespace', namespace);
});
