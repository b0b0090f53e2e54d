// The node's own network namespace, joined to the host by a veth pair. Everything the node sets
// up in the network (the CNI bridge, kube-proxy's iptables rules, net.* sysctls such as
// ip_forward) stays inside it and goes away with it, and with no default route there nothing a
// pod sends can leave this machine.
import { existsSync } from 'node:fs';
import { nodeNetwork } from '../settings.ts';
import { runCommand } from '../processes.ts';

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

/** Creates the namespace and the veth pair; refuses to run beside another node on this machine. */
export async function createNodeNetwork(): Promise<void> {
  if (existsSync(netnsPath)) {
    throw new Error(
      `network namespace ${nodeNetwork.netns} exists: another node of the test environment runs on this machine (stop it with npm run env:down, or remove it with: ip netns del ${nodeNetwork.netns})`,
    );
  }
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
