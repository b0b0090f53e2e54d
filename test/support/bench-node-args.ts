// Extra Node flags for the processes a benchmark starts, from an environment variable (space
// separated): `BENCH_RECEIVER_NODE_ARGS='--cpu-prof --cpu-prof-dir=/tmp/prof' npm run bench:scale`.
// Flags such as --cpu-prof are refused in NODE_OPTIONS, so they go on the command line.
export function benchNodeArgs(variable: string): string[] {
  return (process.env[variable] ?? '').split(' ').filter((a) => a !== '');
}
