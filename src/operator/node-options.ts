// The V8 flags the operator runs with, wherever it runs: the chart's default `operator.nodeOptions`
// (NODE_OPTIONS), `streamcube local` and the test and bench fixtures.
//
// The operator's live heap is small and flat (about 85–90 MiB from 100 to 500 cubes, bench:scale),
// but it allocates fast (a status read, a merge and a patch per cube per resync), and on a host
// with much memory V8 lets the young generation grow to 2 × 64 MiB of semi-spaces — a third of the
// operator's RSS. 16 MiB semi-spaces bound it to 32 MiB; a scavenge of a space that small takes
// well under a millisecond, and there are more of them, which this workload does not notice.
export const operatorNodeOptions: readonly string[] = ['--max-semi-space-size=16'];
