// The node's binaries, built once per version from the Go module proxy into the cache: kubelet,
// kube-proxy, kube-controller-manager and kube-scheduler from the same wrapper module as the API
// server; containerd, ctr and the runc shim; the CNI plugins. runc and iptables come from Debian.
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { settings } from '../settings.ts';
import { binDir, buildFromWrapperModule, goBuild } from '../controlplane.ts';

export interface NodeBinaries {
  kubelet: string;
  kubeProxy: string;
  kubeControllerManager: string;
  kubeScheduler: string;
  containerd: string;
  ctr: string;
  /** Directory of containerd-shim-runc-v2: containerd finds its shim on PATH. */
  containerdBinDir: string;
  /** Directory holding bridge, host-local, loopback and portmap. */
  cniBinDir: string;
  runc: string;
  iptables: string;
}

const containerdBuildTags = 'no_btrfs no_devmapper';

/** A Debian command the node needs, with the package to install when it is missing. */
function debianTool(path: string, pkg: string): string {
  if (!existsSync(path)) {
    throw new Error(`${path} is missing: install it with apt-get install ${pkg}`);
  }
  return path;
}

export async function ensureNodeBinaries(): Promise<NodeBinaries> {
  const k8s = binDir();
  const kubernetes: [string, string][] = [
    ['kubelet', 'k8s.io/kubernetes/cmd/kubelet'],
    ['kube-proxy', 'k8s.io/kubernetes/cmd/kube-proxy'],
    ['kube-controller-manager', 'k8s.io/kubernetes/cmd/kube-controller-manager'],
    ['kube-scheduler', 'k8s.io/kubernetes/cmd/kube-scheduler'],
  ];
  for (const [name, pkg] of kubernetes) {
    if (!existsSync(join(k8s, name)))
      await buildFromWrapperModule(k8s, name, pkg, settings.kubernetesVersion);
  }

  const containerdDir = join(settings.cacheDir, 'bin', `containerd-${settings.containerdVersion}`);
  const containerd = ['containerd', 'ctr', 'containerd-shim-runc-v2'];
  if (!containerd.every((name) => existsSync(join(containerdDir, name)))) {
    mkdirSync(containerdDir, { recursive: true });
    const module = 'github.com/containerd/containerd/v2';
    const version = settings.containerdVersion;
    await goBuild(
      `building containerd ${version} (containerd, ctr, containerd-shim-runc-v2) with Go`,
      [
        'install',
        '-trimpath',
        '-tags',
        containerdBuildTags,
        '-ldflags',
        `-s -w -X ${module}/version.Version=${version}`,
        ...containerd.map((name) => `${module}/cmd/${name}@${version}`),
      ],
      { env: { GOBIN: containerdDir } },
    );
  }

  const cniDir = join(settings.cacheDir, 'bin', `cni-plugins-${settings.cniPluginsVersion}`);
  const plugins = ['main/bridge', 'ipam/host-local', 'main/loopback', 'meta/portmap'];
  if (!plugins.every((p) => existsSync(join(cniDir, p.split('/')[1]!)))) {
    mkdirSync(cniDir, { recursive: true });
    const module = 'github.com/containernetworking/plugins';
    await goBuild(
      `building CNI plugins ${settings.cniPluginsVersion} (bridge, host-local, loopback, portmap) with Go`,
      [
        'install',
        '-trimpath',
        '-ldflags',
        '-s -w',
        ...plugins.map((p) => `${module}/plugins/${p}@${settings.cniPluginsVersion}`),
      ],
      { env: { GOBIN: cniDir } },
    );
  }

  return {
    kubelet: join(k8s, 'kubelet'),
    kubeProxy: join(k8s, 'kube-proxy'),
    kubeControllerManager: join(k8s, 'kube-controller-manager'),
    kubeScheduler: join(k8s, 'kube-scheduler'),
    containerd: join(containerdDir, 'containerd'),
    ctr: join(containerdDir, 'ctr'),
    containerdBinDir: containerdDir,
    cniBinDir: cniDir,
    runc: debianTool('/usr/sbin/runc', 'runc'),
    iptables: debianTool('/usr/sbin/iptables', 'iptables'),
  };
}
