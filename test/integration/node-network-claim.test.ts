// The node's network namespace outlives a node killed with whoever ran it (kill -9 of the e2e, the
// end of a session). The next node on the machine must take over such a leftover, and must still
// refuse to start beside a node that runs. Real namespaces, under a name of this test's own.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { claimNetworkNamespace } from '../../src/local/node/network.ts';
import { runCommand } from '../../src/local/processes.ts';

const name = `sc-claim-${process.pid}`;
const path = `/var/run/netns/${name}`;

afterEach(async () => {
  if (existsSync(path)) await runCommand('ip', ['netns', 'del', name]).catch(() => undefined);
});

test('a namespace nobody is left in is removed, and one that is not there is free', async () => {
  expect(await claimNetworkNamespace(name)).toBe('free');
  await runCommand('ip', ['netns', 'add', name]);
  await runCommand('ip', ['-n', name, 'link', 'set', 'lo', 'up']);
  expect(await claimNetworkNamespace(name)).toBe('reclaimed');
  expect(existsSync(path)).toBe(false);
});

test('a namespace a process runs in is refused, naming the process, and left as it is', async () => {
  await runCommand('ip', ['netns', 'add', name]);
  const child = spawn('nsenter', [`--net=${path}`, '--', 'sleep', '60'], { stdio: 'ignore' });
  try {
    // nsenter joins, then execs sleep under the same pid.
    for (let i = 0; i < 50; i++) {
      if ((await runCommand('ip', ['netns', 'pids', name])).trim() !== '') break;
      await sleep(50);
    }
    await expect(claimNetworkNamespace(name)).rejects.toThrow(
      new RegExp(`network namespace ${name} exists and processes ${child.pid} run in it`),
    );
    expect(existsSync(path)).toBe(true);
  } finally {
    child.kill('SIGKILL');
  }
});
