// The supervised informer against the real API server: it delivers add/update/delete and is
// synced after its first list; when its connection is reset (client-node's own informer stops for
// good then) or goes silent, it restarts and catches up with what changed while it was away.
// Connections are broken for real, by a TCP proxy between the informer and the API server.
import { randomUUID } from 'node:crypto';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { CoreV1Api, KubeConfig, makeInformer, type V1ConfigMap } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { SupervisedInformer } from '../../src/operator/runtime/informer.ts';
import type { RuntimeLogger } from '../../src/operator/runtime/logger.ts';
import { adminKubeConfig } from '../env/connection.ts';

const admin = adminKubeConfig();
const core = admin.makeApiClient(CoreV1Api);
const namespace = `rt-informer-${randomUUID().slice(0, 8)}`;
const label = 'streamcube.io/test';

/** A TCP proxy that can reset its connections, refuse new ones, or swallow all traffic. */
class BreakableProxy {
  private readonly server: Server;
  private readonly target: { host: string; port: number };
  private mode: 'forward' | 'refuse' | 'blackhole' = 'forward';
  private readonly links = new Set<{ client: Socket; upstream?: Socket }>();

  private constructor(target: { host: string; port: number }) {
    this.target = target;
    this.server = createServer((client) => this.accept(client));
  }

  static async start(target: { host: string; port: number }): Promise<BreakableProxy> {
    const proxy = new BreakableProxy(target);
    await new Promise<void>((resolve) => proxy.server.listen(0, '127.0.0.1', resolve));
    return proxy;
  }

  get port(): number {
    const address = this.server.address();
    if (address === null || typeof address === 'string') throw new Error('proxy is not listening');
    return address.port;
  }

  /** Resets every open connection and refuses new ones, as a dead API server would. */
  cut(): void {
    this.mode = 'refuse';
    this.resetAll();
  }

  /** Keeps connections open but lets nothing through, as a broken network path would. */
  blackhole(): void {
    this.mode = 'blackhole';
    for (const { client, upstream } of this.links) {
      if (upstream === undefined) continue;
      client.unpipe(upstream);
      upstream.unpipe(client);
      client.pause();
      upstream.pause();
    }
  }

  restore(): void {
    this.resetAll();
    this.mode = 'forward';
  }

  async close(): Promise<void> {
    this.resetAll();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: Socket): void {
    if (this.mode === 'refuse') {
      client.resetAndDestroy();
      return;
    }
    const link: { client: Socket; upstream?: Socket } = { client };
    this.links.add(link);
    client.on('error', () => link.upstream?.destroy());
    client.on('close', () => {
      link.upstream?.destroy();
      this.links.delete(link);
    });
    if (this.mode === 'blackhole') return;
    const upstream = connect(this.target.port, this.target.host);
    link.upstream = upstream;
    upstream.on('error', () => client.destroy());
    upstream.on('close', () => client.destroy());
    client.pipe(upstream);
    upstream.pipe(client);
  }

  private resetAll(): void {
    for (const { client, upstream } of this.links) {
      client.resetAndDestroy();
      upstream?.destroy();
    }
    this.links.clear();
  }
}

/** The admin's kubeconfig, pointed at the proxy (TLS passes through it untouched). */
function throughProxy(proxy: BreakableProxy): KubeConfig {
  const cluster = admin.getCurrentCluster();
  if (!cluster) throw new Error('admin kubeconfig has no cluster');
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ ...cluster, server: `https://127.0.0.1:${proxy.port}` }],
    users: admin.getUsers(),
    contexts: admin.getContexts(),
    currentContext: admin.getCurrentContext(),
  });
  return kc;
}

function apiServerAddress(): { host: string; port: number } {
  const server = new URL(admin.getCurrentCluster()?.server ?? '');
  return { host: server.hostname, port: Number(server.port) };
}

async function waitFor(
  what: string,
  predicate: () => boolean | Promise<boolean>,
  timeoutMs = 30_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

async function restarts(registry: Registry, informer: string, reason: string): Promise<number> {
  const values = (await registry.getSingleMetric('informer_restarts_total')!.get()).values;
  return (
    values.find((v) => v.labels.informer === informer && v.labels.reason === reason)?.value ?? 0
  );
}

function memoryLogger(lines: string[]): RuntimeLogger {
  const write = (level: string) => (message: string, meta?: Record<string, unknown>) => {
    lines.push(`${level} ${message} ${JSON.stringify(meta ?? {})}`);
  };
  return { debug: write('debug'), info: write('info'), warn: write('warn'), error: write('error') };
}

async function createConfigMap(name: string, value: string, labelled = true): Promise<void> {
  await core.createNamespacedConfigMap({
    namespace,
    body: {
      metadata: { name, namespace, labels: labelled ? { [label]: 'yes' } : {} },
      data: { v: value },
    },
  });
}

async function setValue(name: string, value: string): Promise<void> {
  const current = await core.readNamespacedConfigMap({ name, namespace });
  await core.replaceNamespacedConfigMap({
    name,
    namespace,
    body: { ...current, data: { v: value } },
  });
}

/** A SupervisedInformer over the labelled ConfigMaps of the test namespace, recording its events. */
function configMapInformer(
  kc: KubeConfig,
  options: { registry: Registry; name: string; silenceTimeoutMs?: number; log: string[] },
): { informer: SupervisedInformer<V1ConfigMap>; events: string[] } {
  const api = kc.makeApiClient(CoreV1Api);
  const informer = new SupervisedInformer<V1ConfigMap>({
    name: options.name,
    kubeConfig: kc,
    path: `/api/v1/namespaces/${namespace}/configmaps`,
    labelSelector: `${label}=yes`,
    list: () => api.listNamespacedConfigMap({ namespace, labelSelector: `${label}=yes` }),
    registry: options.registry,
    restartBackoff: { initialMs: 200, maxMs: 1_000 },
    silenceTimeoutMs: options.silenceTimeoutMs ?? 60_000,
    logger: memoryLogger(options.log),
  });
  const events: string[] = [];
  const describe = (cm: V1ConfigMap): string => `${cm.metadata?.name}=${cm.data?.v}`;
  informer.addEventHandler({
    add: (cm) => events.push(`add ${describe(cm)}`),
    update: (cm, old) => events.push(`update ${describe(old)} -> ${cm.data?.v}`),
    delete: (cm) => events.push(`delete ${describe(cm)}`),
  });
  return { informer, events };
}

/** What the running test started; undone after it even when it failed or timed out. */
const cleanups: (() => Promise<void> | void)[] = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A kubeconfig whose connections go through a proxy the test can break; closed after the test. */
async function breakableConnection(): Promise<{ proxy: BreakableProxy; kc: KubeConfig }> {
  const proxy = await BreakableProxy.start(apiServerAddress());
  cleanups.push(() => proxy.close());
  return { proxy, kc: throughProxy(proxy) };
}

beforeAll(async () => {
  await core.createNamespace({ body: { metadata: { name: namespace } } });
});

afterAll(async () => {
  // Without a namespace controller the namespace stays Terminating; its objects go with it in name.
  await core.deleteNamespace({ name: namespace }).catch(() => undefined);
});

test('delivers add, update and delete; is synced once the first list is in the cache', async () => {
  await createConfigMap('pre', '1');
  await createConfigMap('unlabelled', '1', false);
  const log: string[] = [];
  const registry = new Registry();
  const { informer, events } = configMapInformer(admin, { registry, name: 'plain', log });
  expect(informer.hasSynced()).toBe(false);
  informer.start();
  cleanups.push(() => informer.stop());
  await informer.waitForSync(AbortSignal.timeout(30_000));
  expect(informer.hasSynced()).toBe(true);
  expect(informer.list().map((cm) => cm.metadata?.name)).toEqual(['pre']);
  expect(events).toEqual(['add pre=1']);

  await createConfigMap('fresh', 'a');
  await waitFor('add of fresh', () => events.includes('add fresh=a'));
  await setValue('fresh', 'b');
  await waitFor('update of fresh', () => events.includes('update fresh=a -> b'));
  expect(informer.get('fresh', namespace)?.data?.v).toBe('b');
  await core.deleteNamespacedConfigMap({ name: 'pre', namespace });
  await waitFor('delete of pre', () => events.includes('delete pre=1'));
  expect(informer.get('pre', namespace)).toBeUndefined();
  await setValue('unlabelled', '2'); // outside the selector: never seen
  await createConfigMap('last', 'z');
  await waitFor('add of last', () => events.includes('add last=z'));
  expect(events).toEqual([
    'add pre=1',
    'add fresh=a',
    'update fresh=a -> b',
    'delete pre=1',
    'add last=z',
  ]);

  // A handler added after the sync first receives what is already cached.
  const late: string[] = [];
  const removeLate = informer.addEventHandler({
    add: (cm) => late.push(cm.metadata?.name ?? ''),
  });
  expect(late.sort()).toEqual(['fresh', 'last']);
  removeLate();
  await createConfigMap('after', '1');
  await waitFor('add of after', () => events.includes('add after=1'));
  expect(late).toHaveLength(2);
  expect(await restarts(registry, 'plain', 'error')).toBe(0);
  for (const name of ['fresh', 'last', 'after', 'unlabelled'])
    await core.deleteNamespacedConfigMap({ name, namespace });
}, 60_000);

test('after its connection is reset and refused, it restarts and sees what changed meanwhile; a bare client-node informer does not', async () => {
  const { proxy, kc } = await breakableConnection();
  const log: string[] = [];
  const registry = new Registry();
  const { informer, events } = configMapInformer(kc, { registry, name: 'reset', log });
  cleanups.push(() => informer.stop());

  // client-node's own informer over the same connection path, for comparison.
  const bareApi = kc.makeApiClient(CoreV1Api);
  const bare = makeInformer<V1ConfigMap>(
    kc,
    `/api/v1/namespaces/${namespace}/configmaps`,
    () => bareApi.listNamespacedConfigMap({ namespace, labelSelector: `${label}=yes` }),
    `${label}=yes`,
  );
  const bareErrors: unknown[] = [];
  bare.on('error', (error) => bareErrors.push(error));
  cleanups.push(() => bare.stop());

  await createConfigMap('kept', '1');
  await createConfigMap('doomed', '1');
  informer.start();
  await bare.start();
  try {
    await informer.waitForSync(AbortSignal.timeout(30_000));
    await createConfigMap('seen', '1');
    await waitFor(
      'add of seen',
      () => events.includes('add seen=1') && bare.get('seen', namespace) !== undefined,
    );

    proxy.cut();
    await waitFor(
      'a restart after the error',
      async () => (await restarts(registry, 'reset', 'error')) >= 1,
    );
    await waitFor('the bare informer to report the error', () => bareErrors.length > 0);

    // Changes made while the informer cannot reach the API server.
    await createConfigMap('while-down', '1');
    await setValue('kept', '2');
    await core.deleteNamespacedConfigMap({ name: 'doomed', namespace });
    await sleep(1_000);
    expect(events.filter((e) => /while-down|kept=1 ->|delete doomed/.test(e))).toEqual([]);

    proxy.restore();
    await waitFor('the changes made while down', () =>
      ['add while-down=1', 'update kept=1 -> 2', 'delete doomed=1'].every((e) =>
        events.includes(e),
      ),
    );
    const names = (cms: readonly V1ConfigMap[]): string[] =>
      cms.map((cm) => cm.metadata?.name ?? '').sort();
    const actual = await core.listNamespacedConfigMap({ namespace, labelSelector: `${label}=yes` });
    expect(names(informer.list())).toEqual(names(actual.items));
    expect(informer.get('kept', namespace)?.data?.v).toBe('2');

    // client-node 2.0.1's ListWatch stopped for good on the error: it never hears of while-down.
    expect(bare.get('while-down', namespace)).toBeUndefined();
    expect(bare.get('doomed', namespace)).toBeDefined();
  } catch (error) {
    console.log(log.join('\n'));
    throw error;
  }
  for (const name of ['kept', 'seen', 'while-down'])
    await core.deleteNamespacedConfigMap({ name, namespace });
}, 90_000);

test('the watchdog restarts an informer that hears nothing from the server, and it catches up', async () => {
  const { proxy, kc } = await breakableConnection();
  const log: string[] = [];
  const registry = new Registry();
  const { informer, events } = configMapInformer(kc, {
    registry,
    name: 'silent',
    silenceTimeoutMs: 3_000,
    log,
  });

  // A ConfigMap changed twice a second keeps a healthy informer hearing from the server.
  await createConfigMap('ticker', '0');
  let ticking = true;
  const ticker = (async () => {
    for (let tick = 1; ticking; tick++) {
      await setValue('ticker', String(tick)).catch(() => undefined);
      await sleep(500);
    }
  })();
  cleanups.push(async () => {
    ticking = false;
    await ticker;
  });
  informer.start();
  cleanups.push(() => informer.stop());
  try {
    await informer.waitForSync(AbortSignal.timeout(30_000));
    await sleep(4_000); // longer than the silence timeout
    expect(await restarts(registry, 'silent', 'silence')).toBe(0);
    expect(events.filter((e) => e.startsWith('update ticker')).length).toBeGreaterThan(3);

    proxy.blackhole();
    await createConfigMap('while-silent', '1');
    await waitFor(
      'a restart for silence',
      async () => (await restarts(registry, 'silent', 'silence')) >= 1,
    );
    expect(events).not.toContain('add while-silent=1');

    proxy.restore();
    await waitFor('the change made while silent', () => events.includes('add while-silent=1'));
    expect(informer.get('while-silent', namespace)?.data?.v).toBe('1');
  } catch (error) {
    console.log(log.join('\n'));
    throw error;
  }
  for (const name of ['ticker', 'while-silent'])
    await core.deleteNamespacedConfigMap({ name, namespace });
}, 90_000);
