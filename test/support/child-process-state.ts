// What the test harness asks of the processes it spawns (receivers, operators): running, stopped
// by a signal, exited.
import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';

/** Neither exited nor killed (a process stopped by SIGSTOP is running). */
export function processRunning(child: ChildProcess | undefined): child is ChildProcess {
  return child !== undefined && child.exitCode === null && child.signalCode === null;
}

/** Resolves when the process has exited (by itself, say at a fault point, or killed). */
export function processExited(child: ChildProcess | undefined): Promise<void> {
  if (!processRunning(child)) return Promise.resolve();
  return new Promise((r) => child.once('exit', () => r()));
}

/** True while the process is stopped by a signal (SIGSTOP): its /proc/<pid>/stat state is T. */
export function processStopped(child: ChildProcess | undefined): boolean {
  if (!processRunning(child) || child.pid === undefined) return false;
  // "pid (comm) state ...": the state follows the last parenthesis.
  const stat = readFileSync(`/proc/${child.pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).startsWith('T');
}
