// Crash points for crash tests of the receiver and the operator, and faults that tests switch on
// and off; inert unless their variable is set, and unless STREAMCUBE_TEST_HOOKS=1 too (the test
// suites' global set-up sets it): a variable slipped into a pod's environment cannot make a
// production receiver kill itself or fail its hand-offs.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

const hooksOn = (): boolean => process.env.STREAMCUBE_TEST_HOOKS === '1';

/**
 * Test hook for crash tests: with STREAMCUBE_FAULT=<point>[:<n>] the process kills itself with
 * SIGKILL the n-th time (default first) it reaches `point`. With STREAMCUBE_FAULT_SIGNAL=SIGSTOP
 * it stops itself there instead, and goes on from that very point when sent SIGCONT (a process
 * frozen mid-step, as a paused VM or a long GC pause leaves it). Inert when the variable is unset.
 */
const faultCounts = new Map<string, number>();
export function faultPoint(point: string): void {
  const spec = process.env.STREAMCUBE_FAULT;
  if (!spec || !hooksOn()) return;
  const [name, nth] = spec.split(':');
  if (name !== point) return;
  const count = (faultCounts.get(point) ?? 0) + 1;
  faultCounts.set(point, count);
  if (count !== Number(nth ?? '1')) return;
  const stop = process.env.STREAMCUBE_FAULT_SIGNAL === 'SIGSTOP';
  process.kill(process.pid, stop ? 'SIGSTOP' : 'SIGKILL');
}

/**
 * Test hook for failure tests: with STREAMCUBE_FAULT_DIR=<dir>, `injectedFault(point)` returns an
 * error (the file's first line as its message) while a file named `point` exists in that
 * directory, so a test turns a failure on and off while the process runs. Undefined otherwise,
 * and inert (no file system access) when the variable is unset.
 */
export function injectedFault(point: string): Error | undefined {
  const dir = process.env.STREAMCUBE_FAULT_DIR;
  if (!dir || !hooksOn()) return undefined;
  let text: string;
  try {
    text = readFileSync(join(dir, point), 'utf8');
  } catch {
    return undefined;
  }
  return new Error(text.split('\n')[0]?.trim() || `fault injected at ${point}`);
}
