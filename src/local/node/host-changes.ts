// What running a node changes on the host outside its own directory and network namespace, found
// on this machine: host-wide sysctls the kubelet sets, paths that the kubelet, containerd and the
// CNI plugins hard-code, cgroup directories, and mounts. Recorded before the node starts (in the
// environment's state file, so that `env:down` in another process can use it) and undone on stop.
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, rmdirSync } from 'node:fs';
import { statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { runCommand } from '../processes.ts';

export interface HostChanges {
  /** Host-wide sysctls (not per network namespace) and their values before the node started. */
  sysctls: Record<string, string>;
  /** Fixed paths that did not exist before the node started: removed on stop. */
  createdPaths: string[];
  /** The cgroup every node process runs under, in every hierarchy. */
  cgroupRoot: string;
}

// kubelet's setupKernelTunables (protectKernelDefaults: false) sets these host-wide.
const kubeletSysctls = [
  'vm/overcommit_memory',
  'vm/panic_on_oom',
  'kernel/panic',
  'kernel/panic_on_oops',
  'kernel/keys/root_maxkeys',
  'kernel/keys/root_maxbytes',
];

// Paths the components use whatever their configuration says.
const fixedPaths = [
  '/var/lib/kubelet', // device-plugins, plugins_registry
  '/var/log/containers', // the kubelet's symlinks to container logs
  '/var/log/pods',
  '/var/lib/cni', // libcni's result cache
  '/run/containerd', // shim sockets
  '/run/netns',
  '/etc/cni',
  '/opt/cni',
];

const cgroupMount = '/sys/fs/cgroup';

function cgroupHierarchies(): string[] {
  if (!existsSync(cgroupMount)) return [];
  return readdirSync(cgroupMount)
    .map((name) => join(cgroupMount, name))
    .filter((path) => existsSync(join(path, 'cgroup.procs')));
}

/** Records the host's state and creates the node's cgroup root in every hierarchy. */
export function recordHostState(cgroupRoot: string): HostChanges {
  const sysctls: Record<string, string> = {};
  for (const key of kubeletSysctls) {
    const file = join('/proc/sys', key);
    if (existsSync(file)) sysctls[key] = readFileSync(file, 'utf8').trim();
  }
  for (const hierarchy of cgroupHierarchies()) {
    mkdirSync(join(hierarchy, cgroupRoot), { recursive: true });
  }
  return { sysctls, createdPaths: fixedPaths.filter((p) => !existsSync(p)), cgroupRoot };
}

/** Mount points at or below any of `prefixes`, deepest first. */
function mountsUnder(prefixes: string[]): string[] {
  const points = readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((line) => line.split(' ')[4])
    .filter((p): p is string => p !== undefined && p !== '')
    .map((p) => p.replace(/\\040/g, ' '))
    .filter((p) => prefixes.some((prefix) => p === prefix || p.startsWith(`${prefix}/`)));
  return [...new Set(points)].sort((a, b) => b.length - a.length);
}

/** Unmounts everything mounted under `prefixes` (a lazy unmount when a plain one is refused). */
export async function unmountUnder(prefixes: string[]): Promise<void> {
  for (const point of mountsUnder(prefixes)) {
    await runCommand('umount', [point]).catch(() => runCommand('umount', ['-l', point]));
  }
}

function rmdirQuietly(path: string): void {
  try {
    rmdirSync(path);
  } catch {
    // not empty, or gone already
  }
}

/** Removes a cgroup tree bottom-up: a cgroup directory goes with rmdir once it has no children. */
function removeCgroupTree(path: string): void {
  if (!existsSync(path)) return;
  for (const entry of readdirSync(path)) {
    const child = join(path, entry);
    if (statSync(child).isDirectory()) removeCgroupTree(child);
  }
  // A process still in it keeps it: leftoverCgroups() reports that.
  rmdirQuietly(path);
}

/** The cgroups of the node that are still there (a process of the node is still running). */
export function leftoverCgroups(changes: HostChanges): string[] {
  return cgroupHierarchies()
    .map((h) => join(h, changes.cgroupRoot))
    .filter((p) => existsSync(p));
}

/**
 * Undoes everything recorded, once every process of the node has stopped: unmounts what is
 * mounted under `nodeDir` and the fixed paths, restores the sysctls, removes the created paths
 * and the cgroup trees.
 */
export async function undoHostChanges(changes: HostChanges, nodeDir: string): Promise<void> {
  // Only under paths the node created: a mount that was there before (say /run/netns) is not ours.
  await unmountUnder([nodeDir, ...changes.createdPaths]);
  for (const [key, value] of Object.entries(changes.sysctls)) {
    try {
      writeFileSync(join('/proc/sys', key), value);
    } catch {
      // read-only here: then nobody could have changed it either
    }
  }
  for (const path of changes.createdPaths) {
    // Network namespaces of others may appear there meanwhile: only an empty one goes.
    if (path === '/run/netns') rmdirQuietly(path);
    else rmSync(path, { recursive: true, force: true });
  }
  for (const hierarchy of cgroupHierarchies()) {
    removeCgroupTree(join(hierarchy, changes.cgroupRoot));
  }
}
