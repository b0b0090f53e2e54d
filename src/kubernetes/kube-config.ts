// KubeConfigs whose API calls share their connections to the API server.
//
// @kubernetes/client-node 2.0.1 builds a new undici Agent for every call of its generated APIs
// (KubeConfig.applySecurityAuthentication → createDispatcher; only the watch's https.Agent is
// cached), so every call opens a TCP connection and does a full TLS handshake, and the connection
// it leaves idles until undici's keep-alive timeout. A CPU profile of the API server while the
// operator placed 1,000 cubes (bench:scale) had a fifth of its time in TLS handshakes, most of
// it the RSA signature of its certificate.
import { createHash } from 'node:crypto';
import { KubeConfig } from '@kubernetes/client-node';

/** The private factory this file wraps (client-node 2.0.1's `KubeConfig.createDispatcher`). */
interface DispatcherFactory {
  createDispatcher(cluster: unknown, agentOptions: Record<string, unknown>): unknown;
}

interface Closable {
  close?: () => Promise<void>;
}

/** Dispatchers kept per KubeConfig: a rotated client certificate makes a new one. */
const keptDispatchers = 4;

/**
 * What makes two calls' connections interchangeable: the cluster (server, proxy, TLS checks)
 * and the TLS material, which client-node reads from its files again at every call, so a
 * rotated certificate or CA gives another key. Credentials sent as headers (a token) are not
 * part of it.
 */
function dispatcherKey(cluster: unknown, agentOptions: Record<string, unknown>): string {
  const hash = createHash('sha256');
  const c = (cluster ?? {}) as Record<string, unknown>;
  for (const field of ['server', 'proxyUrl', 'skipTLSVerify', 'tlsServerName'])
    hash.update(`${field}=${JSON.stringify(c[field] ?? null)}\n`);
  for (const [field, value] of Object.entries(agentOptions).sort(([a], [b]) =>
    a.localeCompare(b),
  )) {
    if (value === undefined) continue;
    hash.update(`${field}=`);
    hash.update(Buffer.isBuffer(value) ? value : JSON.stringify(value));
    hash.update('\n');
  }
  return hash.digest('hex');
}

/**
 * Makes `kc`'s API calls reuse one dispatcher (undici Agent: a keep-alive pool per origin) for
 * as long as the cluster and TLS material stay the same. Returns `kc`.
 */
export function reuseConnections(kc: KubeConfig): KubeConfig {
  const factory = kc as unknown as DispatcherFactory;
  if (typeof factory.createDispatcher !== 'function') {
    throw new Error(
      '@kubernetes/client-node has no KubeConfig.createDispatcher: src/kubernetes/kube-config.ts was written against 2.0.1',
    );
  }
  const create = factory.createDispatcher.bind(kc);
  const dispatchers = new Map<string, unknown>();
  factory.createDispatcher = (cluster, agentOptions) => {
    const key = dispatcherKey(cluster, agentOptions);
    if (dispatchers.has(key)) return dispatchers.get(key);
    const dispatcher = create(cluster, agentOptions);
    dispatchers.set(key, dispatcher);
    // The oldest goes once it finishes what it carries.
    for (const [old, stale] of dispatchers) {
      if (dispatchers.size <= keptDispatchers) break;
      dispatchers.delete(old);
      void (stale as Closable | undefined)?.close?.().catch(() => undefined);
    }
    return dispatcher;
  };
  return kc;
}

/** A KubeConfig from `file`, or the pod's ServiceAccount without one, reusing its connections. */
export function loadKubeConfig(file?: string): KubeConfig {
  const kc = new KubeConfig();
  if (file) kc.loadFromFile(file);
  else kc.loadFromCluster();
  return reuseConnections(kc);
}
