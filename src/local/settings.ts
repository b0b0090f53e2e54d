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
  /**
   * Prometheus and promtool (github.com/prometheus/prometheus, Go module v0.3xx.y = Prometheus
   * 3.xx.y) for the `dashboards` suite: the chart's alerts and dashboard queries checked for real.
   */
  prometheusVersion: process.env.STREAMCUBE_PROMETHEUS_VERSION || 'v0.316.0',
  /** The Go wrapper module that builds etcd, kube-apiserver, kubectl and the node's binaries. */
  controlPlaneModule: resolve(here, 'controlplane'),
  /** containerd (github.com/containerd/containerd/v2) built for the node. */
  containerdVersion: 'v2.4.2',
  /** CNI plugins (github.com/containernetworking/plugins) built for the node. */
  cniPluginsVersion: 'v1.10.0',
  /** npm release put into the base image beside Node.js (the one Node 24 ships with). */
  baseImageNpmVersion: '11.19.1',
};

/**
 * Addresses of the one-node cluster (`env:up -- --node`). The node lives in its own network
 * namespace joined to the host by a veth pair: the API server and the broker listen on the host
 * end, which pods reach through the node; the node has no default route, so nothing a pod sends
 * can leave this machine.
 */
export const nodeNetwork = {
  netns: 'streamcube-node',
  hostInterface: 'sc-node-h',
  nodeInterface: 'sc-node-n',
  /** Host end of the veth: API server and broker bind here in node mode. */
  hostAddress: '10.251.0.1',
  /** Node end of the veth: the node's InternalIP, where the kubelet serves. */
  nodeAddress: '10.251.0.2',
  vethPrefix: 30,
  bridge: 'sc-cni0',
  podCidr: '10.251.1.0/24',
  serviceCidr: '10.251.2.0/24',
  /** ClusterIP of the `kubernetes` Service: the first address of serviceCidr. */
  kubernetesServiceAddress: '10.251.2.1',
  nodeName: 'streamcube-node',
};
