// The environment's API server is real: a CRD with a status subresource is served, an informer
// sees add/update/delete, the status subresource takes a merge patch, RBAC refuses a service
// account that was granted nothing.
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  ApiException,
  ApiextensionsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  PatchStrategy,
  VersionApi,
  makeInformer,
  setHeaderOptions,
  type KubernetesObject,
  type KubernetesListObject,
} from '@kubernetes/client-node';
import { adminKubeConfig, testEnvironment } from '../env/connection.ts';

const group = 'smoke.streamcube.io';
const plural = 'widgets';
const namespace = 'default';

interface Widget extends KubernetesObject {
  spec?: { size?: number };
  status?: { phase?: string };
}

const kc = adminKubeConfig();

beforeAll(async () => {
  const crds = kc.makeApiClient(ApiextensionsV1Api);
  await crds
    .createCustomResourceDefinition({
      body: {
        apiVersion: 'apiextensions.k8s.io/v1',
        kind: 'CustomResourceDefinition',
        metadata: { name: `${plural}.${group}` },
        spec: {
          group,
          scope: 'Namespaced',
          names: { plural, singular: 'widget', kind: 'Widget', listKind: 'WidgetList' },
          versions: [
            {
              name: 'v1',
              served: true,
              storage: true,
              subresources: { status: {} },
              schema: {
                openAPIV3Schema: {
                  type: 'object',
                  properties: {
                    spec: { type: 'object', properties: { size: { type: 'integer', minimum: 1 } } },
                    status: { type: 'object', properties: { phase: { type: 'string' } } },
                  },
                },
              },
            },
          ],
        },
      },
    })
    .catch((e: unknown) => {
      if (!(e instanceof ApiException && e.code === 409)) throw e;
    });
  // Wait until the new resource is served.
  const custom = kc.makeApiClient(CustomObjectsApi);
  for (let i = 0; ; i++) {
    try {
      await custom.listNamespacedCustomObject({ group, version: 'v1', namespace, plural });
      return;
    } catch (e) {
      if (i > 100) throw e;
      await sleep(100);
    }
  }
});

test('the API server reports its version', async () => {
  const version = await kc.makeApiClient(VersionApi).getCode();
  console.log(
    `kube-apiserver ${version.gitVersion} (${version.goVersion}) at ${testEnvironment().kube.server}`,
  );
  expect(version.gitVersion).toBe(testEnvironment().kube.version);
});

test('an informer sees add, update and delete; the status subresource takes a merge patch', async () => {
  const custom = kc.makeApiClient(CustomObjectsApi);
  const name = `w-${randomUUID().slice(0, 8)}`;
  const informer = makeInformer<Widget>(
    kc,
    `/apis/${group}/v1/namespaces/${namespace}/${plural}`,
    () =>
      custom.listNamespacedCustomObject({ group, version: 'v1', namespace, plural }) as Promise<
        KubernetesListObject<Widget>
      >,
  );
  const events: string[] = [];
  const waitFor = async (predicate: () => boolean): Promise<void> => {
    for (let i = 0; i < 200 && !predicate(); i++) await sleep(50);
    expect(predicate()).toBe(true);
  };
  const record =
    (kind: string) =>
    (obj: Widget): void => {
      if (obj.metadata?.name === name)
        events.push(`${kind}:${obj.spec?.size ?? '-'}:${obj.status?.phase ?? '-'}`);
    };
  informer.on('add', record('add'));
  informer.on('update', record('update'));
  informer.on('delete', record('delete'));
  await informer.start();
  try {
    await custom.createNamespacedCustomObject({
      group,
      version: 'v1',
      namespace,
      plural,
      body: { apiVersion: `${group}/v1`, kind: 'Widget', metadata: { name }, spec: { size: 1 } },
    });
    await waitFor(() => events.includes('add:1:-'));

    const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
    await custom.patchNamespacedCustomObject(
      { group, version: 'v1', namespace, plural, name, body: { spec: { size: 2 } } },
      merge,
    );
    await waitFor(() => events.includes('update:2:-'));

    // A status written through the main resource is ignored; through /status it lands.
    const patched = (await custom.patchNamespacedCustomObjectStatus(
      { group, version: 'v1', namespace, plural, name, body: { status: { phase: 'Ready' } } },
      merge,
    )) as Widget;
    expect(patched.status?.phase).toBe('Ready');
    await waitFor(() => events.includes('update:2:Ready'));
    expect(informer.get(name, namespace)?.status?.phase).toBe('Ready');

    await custom.deleteNamespacedCustomObject({ group, version: 'v1', namespace, plural, name });
    await waitFor(() => events.includes('delete:2:Ready'));
  } finally {
    await informer.stop();
  }
});

test('the API server validates against the CRD schema', async () => {
  const custom = kc.makeApiClient(CustomObjectsApi);
  const error: unknown = await custom
    .createNamespacedCustomObject({
      group,
      version: 'v1',
      namespace,
      plural,
      body: {
        apiVersion: `${group}/v1`,
        kind: 'Widget',
        metadata: { name: 'bad' },
        spec: { size: 0 },
      },
    })
    .catch((e: unknown) => e);
  expect(error).toBeInstanceOf(ApiException);
  expect((error as ApiException<string>).code).toBe(422);
  expect(String((error as ApiException<string>).body)).toContain('spec.size');
});

test('RBAC: a service account with no role gets 403', async () => {
  const core = kc.makeApiClient(CoreV1Api);
  const sa = `nobody-${randomUUID().slice(0, 8)}`;
  await core.createNamespacedServiceAccount({ namespace, body: { metadata: { name: sa } } });
  const tokenRequest = await core.createNamespacedServiceAccountToken({
    name: sa,
    namespace,
    body: { spec: { audiences: [], expirationSeconds: 600 } },
  });
  const token = tokenRequest.status?.token;
  expect(token).toBeTruthy();

  const asNobody = new KubeConfig();
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error('admin kubeconfig has no cluster');
  asNobody.loadFromOptions({
    clusters: [cluster],
    users: [{ name: sa, token }],
    contexts: [{ name: 'nobody', cluster: cluster.name, user: sa }],
    currentContext: 'nobody',
  });
  const error: unknown = await asNobody
    .makeApiClient(CustomObjectsApi)
    .listNamespacedCustomObject({ group, version: 'v1', namespace, plural })
    .catch((e: unknown) => e);
  expect(error).toBeInstanceOf(ApiException);
  expect((error as ApiException<string>).code).toBe(403);
  expect(String((error as ApiException<string>).body)).toContain(
    `system:serviceaccount:${namespace}:${sa}`,
  );

  // The same token is accepted (authenticated), so the 403 is authorization, not a bad token.
  const review = await asNobody
    .makeApiClient(CoreV1Api)
    .listNamespacedPod({ namespace })
    .catch((e: unknown) => e);
  expect((review as ApiException<string>).code).toBe(403);
});
