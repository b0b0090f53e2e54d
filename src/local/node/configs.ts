// Configuration files of the node's components, as text: containerd, the CNI network, the kubelet
// and kube-proxy. The settings that this sandbox needs (and why) are in the comments; everything
// the components write goes under the node's own directory wherever a setting allows it.
import { nodeNetwork } from '../settings.ts';
import { pauseImage } from './images.ts';

export interface NodePaths {
  dir: string;
  containerdRoot: string;
  containerdState: string;
  containerdSocket: string;
  runcRoot: string;
  cniConfDir: string;
  cniIpamDir: string;
  kubeletRoot: string;
  podLogs: string;
  staticPods: string;
  resolvConf: string;
}

export function containerdConfig(paths: NodePaths, cniBinDir: string, runc: string): string {
  return `version = 3
root = '${paths.containerdRoot}'
state = '${paths.containerdState}'

[grpc]
  address = '${paths.containerdSocket}'

[ttrpc]
  address = '${paths.containerdSocket}.ttrpc'

[plugins]
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = 'overlayfs'
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = '${pauseImage}'

  [plugins.'io.containerd.cri.v1.runtime']
    # This sandbox lacks CAP_SYS_RESOURCE: without it every pod sandbox fails in runc with
    # "can't get final child's PID from pipe: EOF" (oom_score_adj: permission denied).
    restrict_oom_score_adj = true
    netns_mounts_under_state_dir = true
    enable_selinux = false
    disable_apparmor = true
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = 'runc'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = 'io.containerd.runc.v2'
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = '${runc}'
          Root = '${paths.runcRoot}'
          SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ['${cniBinDir}']
      conf_dir = '${paths.cniConfDir}'

  [plugins.'io.containerd.nri.v1.nri']
    disable = true
`;
}

/** One bridge inside the node's namespace; pods route everything through it to the node. */
export function cniConfig(paths: NodePaths): string {
  return JSON.stringify(
    {
      cniVersion: '1.0.0',
      name: 'streamcube',
      plugins: [
        {
          type: 'bridge',
          bridge: nodeNetwork.bridge,
          isGateway: true,
          ipMasq: false,
          hairpinMode: true,
          ipam: {
            type: 'host-local',
            ranges: [[{ subnet: nodeNetwork.podCidr }]],
            routes: [{ dst: '0.0.0.0/0' }],
            dataDir: paths.cniIpamDir,
          },
        },
        { type: 'portmap', capabilities: { portMappings: true } },
      ],
    },
    null,
    2,
  );
}

export function kubeletConfig(paths: NodePaths, clientCaFile: string): string {
  return `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# Kubernetes 1.35 refuses cgroup v1 hosts unless told otherwise (KEP-5573); this machine is one.
failCgroupV1: false
cgroupDriver: cgroupfs
# Everything the node starts lives in this cgroup of every hierarchy: removed on stop.
cgroupRoot: /streamcube-node
failSwapOn: false
containerRuntimeEndpoint: unix://${paths.containerdSocket}
resolvConf: ${paths.resolvConf}
staticPodPath: ${paths.staticPods}
podLogsDir: ${paths.podLogs}
address: ${nodeNetwork.nodeAddress}
port: 10250
healthzBindAddress: 127.0.0.1
readOnlyPort: 0
# Only the API server, with a client certificate of the environment's CA, talks to the kubelet.
authentication:
  anonymous: { enabled: false }
  webhook: { enabled: false }
  x509: { clientCAFile: ${clientCaFile} }
authorization:
  mode: AlwaysAllow
makeIPTablesUtilChains: false
serializeImagePulls: false
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  nodefs.inodesFree: 1%
  imagefs.available: 1%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
`;
}

export function kubeProxyConfig(kubeconfig: string): string {
  return `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: ${kubeconfig}
hostnameOverride: ${nodeNetwork.nodeName}
mode: iptables
clusterCIDR: ${nodeNetwork.podCidr}
bindAddress: ${nodeNetwork.nodeAddress}
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
# Zero leaves the host-wide conntrack settings alone.
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
iptables:
  localhostNodePorts: false
`;
}
