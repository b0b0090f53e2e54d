// A real one-node cluster beside the environment's etcd + kube-apiserver: containerd + runc + CNI
// and the kubelet and kube-proxy in the node's network namespace, kube-controller-manager and
// kube-scheduler on the host. Every process runs in the node's cgroup, so that stopping the node
// finds all of them (shims and containers included) even after a crash of whoever started it.
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { nodeNetwork, settings } from '../settings.ts';
import { step, say } from '../progress.ts';
import { runCommand, startService, stopService, tailOf, waitForService } from '../processes.ts';
import { type ControlPlane, apiGet, binDir } from '../controlplane.ts';
import { type NodeBinaries, ensureNodeBinaries } from './binaries.ts';
import { ensureNodeImages } from './images.ts';
import { createNodeNetwork, inNodeNetwork, removeNodeNetwork } from './network.ts';
import {
  type HostChanges,
  leftoverCgroups,
  recordHostState,
  undoHostChanges,
} from './host-changes.ts';
import {
  type NodePaths,
  cniConfig,
  containerdConfig,
  kubeProxyConfig,
  kubeletConfig,
} from './configs.ts';
import { createLocalStorage } from './storage.ts';

const cgroupRoot = '/streamcube-node';

interface NodeService {
  pid: number;
  logFile: string;
}

export interface LocalNode {
  name: string;
  dir: string;
  /** Address of the host's end of the veth: API server and broker listen there. */
  hostAddress: string;
  nodeAddress: string;
  podCidr: string;
  containerdSocket: string;
  ctr: string;
  runc: string;
  runcRoot: string;
  host: HostChanges;
  services: {
    containerd: NodeService;
    kubelet?: NodeService;
    kubeProxy?: NodeService;
    controllerManager?: NodeService;
    scheduler?: NodeService;
  };
}

function nodePaths(dir: string): NodePaths {
  return {
    dir,
    containerdRoot: join(dir, 'containerd', 'root'),
    containerdState: join(dir, 'containerd', 'state'),
    containerdSocket: join(dir, 'containerd', 'containerd.sock'),
    runcRoot: join(dir, 'runc'),
    cniConfDir: join(dir, 'cni', 'net.d'),
    cniIpamDir: join(dir, 'cni', 'ipam'),
    kubeletRoot: join(dir, 'kubelet'),
    podLogs: join(dir, 'pod-logs'),
    staticPods: join(dir, 'manifests'),
    resolvConf: join(dir, 'resolv.conf'),
  };
}

/** Everything the node needs that is built or downloaded: done before the host is touched. */
export async function prepareNode(): Promise<{ bins: NodeBinaries; images: string[] }> {
  const bins = await ensureNodeBinaries();
  const images = await ensureNodeImages();
  return { bins, images };
}

/** Creates the node's network and cgroup: done before the control plane binds to it. */
export async function createNodeHost(): Promise<HostChanges> {
  const host = recordHostState(cgroupRoot);
  for (const hierarchy of ['/sys/fs/cgroup/pids', '/sys/fs/cgroup/memory']) {
    if (existsSync(hierarchy))
      mkdirSync(join(hierarchy, cgroupRoot, 'system'), { recursive: true });
  }
  try {
    await createNodeNetwork();
  } catch (error) {
    // createNodeNetwork removed what it made; the cgroups and /run/netns remain to undo.
    await undoHostChanges(host, '/nonexistent');
    throw error;
  }
  return host;
}

/**
 * Starts `command` as a service in the node's `system` cgroup (of every hierarchy that has it),
 * optionally inside the node's network namespace.
 */
function startNodeService(
  command: string,
  args: string[],
  logFile: string,
  inNetwork: boolean,
  env: NodeJS.ProcessEnv = process.env,
): NodeService {
  const [cmd, cmdArgs] = inNetwork ? inNodeNetwork(command, args) : [command, args];
  const enterCgroup = [
    'for h in /sys/fs/cgroup/*/; do',
    // \${h}: "$h" followed by the name would read as one longer, unset variable.
    `  d="\${h}${cgroupRoot.slice(1)}/system"; [ -d "$d" ] && echo $$ > "$d/cgroup.procs";`,
    'done; exec "$@"',
  ].join('\n');
  const pid = startService('sh', ['-c', enterCgroup, 'sh', cmd, ...cmdArgs], logFile, env);
  return { pid, logFile };
}

function kubeconfigFor(plane: ControlPlane, dir: string): string {
  // The admin's kubeconfig names the CA by path, which every component here can read.
  const file = join(dir, 'kubeconfig');
  writeFileSync(file, readFileSync(plane.kubeconfig, 'utf8'), { mode: 0o600 });
  return file;
}

async function nodeReady(plane: ControlPlane): Promise<boolean> {
  const ca = readFileSync(plane.caFile);
  const res = await apiGet({ ...plane, ca }, `/api/v1/nodes/${nodeNetwork.nodeName}`);
  if (res.status !== 200) return false;
  const node = JSON.parse(res.body) as {
    status?: { conditions?: { type: string; status: string }[] };
  };
  return node.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
}

async function defaultServiceAccount(plane: ControlPlane): Promise<boolean> {
  const ca = readFileSync(plane.caFile);
  const res = await apiGet({ ...plane, ca }, '/api/v1/namespaces/default/serviceaccounts/default');
  return res.status === 200;
}

/**
 * Starts the node against `plane` (whose API server listens on the node network's host address)
 * and resolves once the node is Ready and storage is in place. On failure it stops what it started.
 */
export async function startNode(
  dir: string,
  plane: ControlPlane,
  host: HostChanges,
  prepared: { bins: NodeBinaries; images: string[] },
): Promise<LocalNode> {
  const { bins, images } = prepared;
  const paths = nodePaths(dir);
  for (const d of [paths.containerdRoot, paths.containerdState, paths.runcRoot]) {
    mkdirSync(d, { recursive: true });
  }
  for (const d of [paths.cniConfDir, paths.cniIpamDir, paths.kubeletRoot, paths.podLogs]) {
    mkdirSync(d, { recursive: true });
  }
  mkdirSync(paths.staticPods, { recursive: true });
  // No DNS server in this cluster: lookups in pods fail fast on their own loopback.
  writeFileSync(paths.resolvConf, 'nameserver 127.0.0.1\n');
  writeFileSync(join(dir, 'containerd.toml'), containerdConfig(paths, bins.cniBinDir, bins.runc));
  writeFileSync(join(paths.cniConfDir, '10-streamcube.conflist'), cniConfig(paths));
  writeFileSync(join(dir, 'kubelet.yaml'), kubeletConfig(paths, plane.caFile));
  const kubeconfig = kubeconfigFor(plane, dir);
  writeFileSync(join(dir, 'kube-proxy.yaml'), kubeProxyConfig(kubeconfig));
  const certs = join(plane.caFile, '..');

  const node: LocalNode = {
    name: nodeNetwork.nodeName,
    dir,
    hostAddress: nodeNetwork.hostAddress,
    nodeAddress: nodeNetwork.nodeAddress,
    podCidr: nodeNetwork.podCidr,
    containerdSocket: paths.containerdSocket,
    ctr: bins.ctr,
    runc: bins.runc,
    runcRoot: paths.runcRoot,
    host,
    services: {
      containerd: startNodeService(
        bins.containerd,
        ['--config', join(dir, 'containerd.toml'), '--log-level', 'warn'],
        join(dir, 'containerd.log'),
        true,
        // containerd finds containerd-shim-runc-v2 on PATH.
        { ...process.env, PATH: `${bins.containerdBinDir}:${process.env.PATH ?? ''}` },
      ),
    },
  };
  try {
    await step(`starting containerd ${settings.containerdVersion}`, () =>
      waitForService(
        'containerd',
        () => Promise.resolve(existsSync(paths.containerdSocket)),
        node.services.containerd,
        30_000,
      ),
    );
    await importImages(node, images);

    say('starting kube-controller-manager, kube-scheduler, kubelet and kube-proxy');
    node.services.controllerManager = startNodeService(
      bins.kubeControllerManager,
      [
        `--kubeconfig=${kubeconfig}`,
        `--service-account-private-key-file=${join(certs, 'sa.key')}`,
        `--root-ca-file=${plane.caFile}`,
        '--use-service-account-credentials=false',
        '--leader-elect=false',
        '--secure-port=0',
        `--cluster-cidr=${nodeNetwork.podCidr}`,
        '--allocate-node-cidrs=false',
        '--v=1',
      ],
      join(dir, 'kube-controller-manager.log'),
      false,
    );
    node.services.scheduler = startNodeService(
      bins.kubeScheduler,
      [`--kubeconfig=${kubeconfig}`, '--leader-elect=false', '--secure-port=0', '--v=1'],
      join(dir, 'kube-scheduler.log'),
      false,
    );
    node.services.kubelet = startNodeService(
      bins.kubelet,
      [
        `--config=${join(dir, 'kubelet.yaml')}`,
        `--kubeconfig=${kubeconfig}`,
        `--root-dir=${paths.kubeletRoot}`,
        `--cert-dir=${join(paths.kubeletRoot, 'pki')}`,
        `--hostname-override=${nodeNetwork.nodeName}`,
        `--node-ip=${nodeNetwork.nodeAddress}`,
        '--v=1',
      ],
      join(dir, 'kubelet.log'),
      true,
    );
    node.services.kubeProxy = startNodeService(
      bins.kubeProxy,
      [`--config=${join(dir, 'kube-proxy.yaml')}`, '--v=1'],
      join(dir, 'kube-proxy.log'),
      true,
    );
    await step(`waiting for node ${nodeNetwork.nodeName} to be Ready`, () =>
      waitForService(
        `kubelet ${nodeNetwork.nodeName}`,
        () => nodeReady(plane),
        node.services.kubelet!,
        120_000,
      ),
    );
    await step('waiting for kube-controller-manager (default service account)', () =>
      waitForService(
        'kube-controller-manager',
        () => defaultServiceAccount(plane),
        node.services.controllerManager!,
        60_000,
      ),
    );
    // Still running: these two have no readiness of their own to wait for.
    for (const s of [node.services.scheduler, node.services.kubeProxy]) {
      await waitForService(s.logFile, () => Promise.resolve(true), s, 1000);
    }
    await createLocalStorage(plane.kubeconfig, join(binDir(), 'kubectl'), join(dir, 'volumes'));
    return node;
  } catch (error) {
    await stopNode(node);
    throw error;
  }
}

/** Imports image archives (docker-archive) into the node's containerd, for the kubelet to use. */
export async function importImages(node: LocalNode, archives: string[]): Promise<void> {
  await step('importing images into the node', async () => {
    for (const archive of archives) {
      await runCommand(node.ctr, [
        '--address',
        node.containerdSocket,
        '-n',
        'k8s.io',
        'images',
        'import',
        archive,
      ]);
    }
  });
}

/** Process ids in the node's cgroup tree (the pids hierarchy sees every process). */
function processesInNodeCgroup(): number[] {
  const pids: number[] = [];
  const walk = (path: string): void => {
    if (!existsSync(path)) return;
    const procs = join(path, 'cgroup.procs');
    if (existsSync(procs)) {
      for (const line of readFileSync(procs, 'utf8').split('\n')) {
        if (line.trim() !== '') pids.push(Number(line));
      }
    }
    for (const entry of subdirectories(path)) walk(join(path, entry));
  };
  walk(join('/sys/fs/cgroup/pids', cgroupRoot));
  return pids;
}

function subdirectories(path: string): string[] {
  try {
    return readdirSync(path, { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => e.name);
  } catch {
    return []; // removed meanwhile
  }
}

/**
 * Stops the node: its Kubernetes components, then every container (runc), containerd, and any
 * process left in the node's cgroup (shims); then undoes the host changes and removes the network.
 */
export async function stopNode(node: LocalNode): Promise<void> {
  await step(`stopping node ${node.name} and undoing its host changes`, () => stopNodeSteps(node));
}

async function stopNodeSteps(node: LocalNode): Promise<void> {
  const { kubelet, kubeProxy, controllerManager, scheduler, containerd } = node.services;
  // Nothing of the cluster needs to shut down gracefully any more: a short grace.
  await Promise.all(
    [kubelet, kubeProxy, controllerManager, scheduler]
      .filter((s): s is NodeService => s !== undefined)
      .map((s) => stopService(s.pid, 5_000)),
  );
  const runcRoot = join(node.runcRoot, 'k8s.io');
  if (existsSync(runcRoot)) {
    const ids = (await runCommand(node.runc, ['--root', runcRoot, 'list', '-q']).catch(() => ''))
      .split('\n')
      .filter((id) => id.trim() !== '');
    for (const id of ids) {
      await runCommand(node.runc, ['--root', runcRoot, 'delete', '--force', id]).catch(
        () => undefined,
      );
    }
  }
  await stopService(containerd.pid, 5_000);
  for (let attempt = 0; attempt < 50; attempt += 1) {
    const left = processesInNodeCgroup();
    if (left.length === 0) break;
    for (const pid of left) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone already
      }
    }
    await sleep(100);
  }
  await removeNodeNetwork();
  await undoHostChanges(node.host, node.dir);
  const left = leftoverCgroups(node.host);
  if (left.length > 0) say(`node stopped, but these cgroups are still in use: ${left.join(', ')}`);
  rmSync(join(node.dir, 'containerd', 'containerd.sock'), { force: true });
}

export function nodeLogTail(node: LocalNode): string {
  return ['kubelet', 'containerd']
    .map((name) => `${name}:\n${tailOf(join(node.dir, `${name}.log`), 15)}`)
    .join('\n');
}
