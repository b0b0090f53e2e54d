// The node's own network namespace, joined to the host by a veth pair. Everything the node sets
// up in the network (the CNI bridge, kube-proxy's iptables rules, net.* sysctls such as
// ip_forward) stays inside it and goes away with it, and with no default route there nothing a
// pod sends can leave this machine.
import { existsSync } from 'node:fs';
import { nodeNetwork } from '../settings.ts';
import { runCommand } from '../processes.ts';
import { say } from '../progress.ts';

const netnsPath = `/var/run/netns/${nodeNetwork.netns}`;

/** Arguments that run `command` inside the node's network namespace, and only that namespace. */
export function inNodeNetwork(command: string, args: string[]): [string, string[]] {
  // Not `ip netns exec`: it also unshares the mount namespace, and the kubelet's volume mounts
  // must be seen by containerd and runc.
  return ['nsenter', [`--net=${netnsPath}`, '--', command, ...args]];
}

async function ip(args: string[]): Promise<void> {
  await runCommand('ip', args);
}

/**
 * Makes sure no namespace `name` is in the way. One whose processes are all gone is what a node
 * killed with its runner (kill -9, the end of a session) leaves: it is removed, with what it held.
 * One with a process in it belongs to a node that runs: refused, naming the processes.
 */
export async function claimNetworkNamespace(name: string): Promise<'free' | 'reclaimed'> {
  if (!existsSync(`/var/run/netns/${name}`)) return 'free';
  const pids = (await runCommand('ip', ['netns', 'pids', name])).split(/\s+/).filter(Boolean);
  if (pids.length > 0) {
    throw new Error(
      `network namespace ${name} exists and processes ${pids.join(', ')} run in it: another node of the test environment runs on this machine (stop it with npm run env:down)`,
    );
  }
  say(`network namespace ${name} was left by a node whose processes are gone: removing it`);
  await ip(['netns', 'del', name]);
  return 'reclaimed';
}

/** Creates the namespace and the veth pair; refuses to run beside another node on this machine. */
export async function createNodeNetwork(): Promise<void> {
  // A leftover's veth went with it; removeNodeNetwork also catches a half-made pair.
  if ((await claimNetworkNamespace(nodeNetwork.netns)) === 'reclaimed') await removeNodeNetwork();
  const { hostInterface, nodeInterface, hostAddress, nodeAddress, vethPrefix, podCidr } =
    nodeNetwork;
  try {
    await ip(['netns', 'add', nodeNetwork.netns]);
    await ip([
      'link',
      'add',
      hostInterface,
      'type',
      'veth',
      'peer',
      'name',
      nodeInterface,
      'netns',
      nodeNetwork.netns,
    ]);
    await ip(['addr', 'add', `${hostAddress}/${vethPrefix}`, 'dev', hostInterface]);
    await ip(['link', 'set', hostInterface, 'up']);
    const inNode = (args: string[]): Promise<void> =>
      ip(['-n', nodeNetwork.netns, ...args]).then(() => undefined);
    await inNode(['addr', 'add', `${nodeAddress}/${vethPrefix}`, 'dev', nodeInterface]);
    await inNode(['link', 'set', nodeInterface, 'up']);
    await inNode(['link', 'set', 'lo', 'up']);
    // The host answers pods directly (no NAT): its way back to them is through the node.
    await ip(['route', 'add', podCidr, 'via', nodeAddress, 'dev', hostInterface]);
  } catch (error) {
    await removeNodeNetwork();
    throw error;
  }
}

/** Deletes the namespace; the veth pair, the bridge, the route and every rule in it go with it. */
export async function removeNodeNetwork(): Promise<void> {
  if (existsSync(netnsPath)) await ip(['netns', 'del', nodeNetwork.netns]).catch(() => undefined);
  // A veth whose peer namespace is gone disappears with it; this only catches a half-made pair.
  await ip(['link', 'del', nodeNetwork.hostInterface]).catch(() => undefined);
}
