// How the operator's process runs, wherever it runs: the chart's defaults (`operator.nodeOptions`
// as NODE_OPTIONS, `operator.mallocArenaMax`), `streamcube local` and the test and bench fixtures.
//
// The operator's live heap is small (bench:scale: 85–95 MiB in use at 1,000 cubes of 16 partitions
// once managedFields are dropped), but it allocates fast (a status read, a merge
// and a patch per cube per resync), and V8 sizes its heap for the host, not for what is live:
// - young generation: 8 MiB semi-spaces (16 MiB in all; V8 lets it grow to 2 × 64 MiB on a host
//   with much memory, a third of the operator's RSS at 100 cubes). A scavenge of a space that
//   small takes well under a millisecond; this workload does not notice there are more.
// - old generation: 256 MiB, room for 5,000 cubes of 16 partitions (bench:scale, 2026-12-05:
//   all Ready in 114–119 s, peak RSS 402–429 MiB, within the chart's 512Mi limit; at 1,000 cubes
//   74 MiB in use and a 233 MiB peak, against 221 MiB with the 160 MiB bound of before, which ran
//   out at 4,500 cubes, and at 3,602 before the partition series were made at scrape time). 384
//   MiB let RSS reach 469–516 MiB at 5,000. Without a bound V8 let the old generation grow to 185
//   MiB, mostly garbage, at 1,000 cubes. More cubes need a higher bound (about 64 MiB per 1,000
//   more) and memory limit: past it the operator stops with "JavaScript heap out of memory" in
//   its log and is restarted.
export const operatorNodeOptions: readonly string[] = [
  '--max-semi-space-size=8',
  '--max-old-space-size=256',
];

/**
 * glibc gives each thread that allocates its own malloc arena, and memory freed in one is not
 * returned to the others. bench:scale at 1,000 cubes (2026-12-01): with two arenas and a 160 MiB old
 * generation the operator ended at 280 MiB RSS (peak 298), with the default arenas and 192 MiB at
 * 330 (peak 341).
 */
export const operatorEnvironment: Readonly<Record<string, string>> = { MALLOC_ARENA_MAX: '2' };
