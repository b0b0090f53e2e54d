// Where the local environment (of `streamcube local`, `npm run env:up` and the tests) keeps its
// cache and state, and which versions it runs. Every value can be overridden by an environment
// variable so that another Kafka or Kubernetes can be tried.
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = fileURLToPath(new URL('.', import.meta.url));

export const settings = {
  /** Built binaries and resolved classpaths live here, outside the repository. */
  cacheDir: process.env.STREAMCUBE_CACHE_DIR || join(homedir(), '.cache', 'streamcube'),
  /** Data directories, logs and the state file of a running environment. */
  stateDir: process.env.STREAMCUBE_ENV_DIR || join(homedir(), '.cache', 'streamcube', 'env'),
  /** Apache Kafka broker from Maven Central (org.apache.kafka:kafka_2.13); `test:kafka-compat` runs 3.9.2. */
  kafkaVersion: process.env.STREAMCUBE_KAFKA_VERSION || '4.4.0',
  /** Must match the k8s.io/kubernetes version in src/local/controlplane/go.mod. */
  kubernetesVersion: 'v1.35.4',
  /** Must match go.etcd.io/etcd/server/v3 in src/local/controlplane/go.mod. */
  etcdVersion: 'v3.6.5',
  helmVersion: process.env.STREAMCUBE_HELM_VERSION || 'v3.20.2',
  /** The Go wrapper module that builds etcd, kube-apiserver and kubectl. */
  controlPlaneModule: resolve(here, 'controlplane'),
};
