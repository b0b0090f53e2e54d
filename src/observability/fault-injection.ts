// Crash points for crash tests of the receiver and the operator; inert unless the variable is set.

/**
 * Test hook for crash tests: with STREAMCUBE_FAULT=<point>[:<n>] the process kills itself with
 * SIGKILL the n-th time (default first) it reaches `point`. Inert when the variable is unset.
 */
const faultCounts = new Map<string, number>();
export function faultPoint(point: string): void {
  const spec = process.env.STREAMCUBE_FAULT;
  if (!spec) return;
  const [name, nth] = spec.split(':');
  if (name !== point) return;
  const count = (faultCounts.get(point) ?? 0) + 1;
  faultCounts.set(point, count);
  if (count >= Number(nth ?? '1')) process.kill(process.pid, 'SIGKILL');
}
