// The operator's API calls share their connections to the real API server: client-node 2.0.1
// alone opens a new TLS connection for every call (src/kubernetes/kube-config.ts). Connections
// are counted from undici's own diagnostics channel, which every copy of undici publishes to.
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { copyFileSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { dump, load } from 'js-yaml';
import { loadKubeConfig, reuseConnections } from '../../src/kubernetes/kube-config.ts';
import { testEnvironment } from '../env/connection.ts';
import { tempDir } from '../support/scratch-dirs.ts';

const env = testEnvironment();
const connected = 'undici:client:connected';

/** TLS connections opened while `work` runs. */
async function connectionsOpenedBy(work: () => Promise<void>): Promise<number> {
  let opened = 0;
  const count = (): void => {
    opened += 1;
  };
  subscribe(connected, count);
  try {
    await work();
  } finally {
    unsubscribe(connected, count);
  }
  return opened;
}

const twentyReads = (kc: KubeConfig) => async (): Promise<void> => {
  const core = kc.makeApiClient(CoreV1Api);
  for (let i = 0; i < 20; i++) await core.readNamespace({ name: 'default' });
};

test('twenty API calls through a KubeConfig that reuses connections open one connection (client-node alone: one a call)', async () => {
  const plain = new KubeConfig();
  plain.loadFromFile(env.kube.kubeconfig);
  const alone = await connectionsOpenedBy(twentyReads(plain));
  const reused = await connectionsOpenedBy(twentyReads(loadKubeConfig(env.kube.kubeconfig)));
  console.log(
    `20 reads of a namespace: ${alone} connections with client-node alone, ${reused} reused`,
  );
  expect(reused).toBe(1);
});

test('a rotated client certificate or CA is read at the next call: the calls after it go through a new connection', async () => {
  const dir = tempDir('kube-connections');
  const file = join(dir, 'kubeconfig');
  copyFileSync(env.kube.kubeconfig, file);
  const kc = reuseConnections(new KubeConfig());
  kc.loadFromFile(file);
  // The environment's kubeconfig names its CA by file (certificate-authority) or inline: written
  // to a file of our own here, so that the test can rotate it.
  const config = load(readFileSync(file, 'utf8')) as {
    clusters: { cluster: Record<string, string> }[];
  };
  const cluster = config.clusters[0]!.cluster;
  const ca =
    cluster['certificate-authority-data'] !== undefined
      ? Buffer.from(cluster['certificate-authority-data'], 'base64').toString()
      : readFileSync(cluster['certificate-authority']!, 'utf8');
  const caFile = join(dir, 'ca.crt');
  writeFileSync(caFile, ca);
  delete cluster['certificate-authority-data'];
  cluster['certificate-authority'] = caFile;
  writeFileSync(file, dump(config));
  kc.loadFromFile(file);

  const first = await connectionsOpenedBy(twentyReads(kc));
  // The same CA again, as a rotation that keeps the CA but rewrites the file with a comment:
  // other bytes, so another dispatcher; and the calls after it share that one.
  writeFileSync(caFile, `${ca}\n`);
  const afterRotation = await connectionsOpenedBy(twentyReads(kc));
  expect(first).toBe(1);
  expect(afterRotation).toBe(1);
});
