// The order of the partitions in one fetch request. A broker fills a fetch's byte budget in the
// request's order, so partitions always listed first take it all while they have a backlog, and
// the last ones wait: 512 partitions on one receiver left partitions listed late without data for
// tens of seconds after a move (their new owner started behind). As Kafka's Java consumer does
// (KIP-74), partitions that were just served go to the end: those served longest ago come first.

/** One topic's partitions of a fetch. */
export interface FetchTopicOrder<P> {
  topic: string;
  partitions: P[];
}

/**
 * `topics` reordered: within a topic, partitions by when they were last served (never first,
 * then oldest, ties in the given order); topics by their longest-waiting partition.
 * `lastServed(topic, partition)` is a sequence number of the fetch that last returned records for
 * it, undefined if none did.
 */
export function fetchOrder<P extends { partition: number }>(
  topics: FetchTopicOrder<P>[],
  lastServed: (topic: string, partition: number) => number | undefined,
): FetchTopicOrder<P>[] {
  const rank = (topic: string, p: P): number => lastServed(topic, p.partition) ?? -1;
  const ordered = topics.map(({ topic, partitions }) => {
    const ranked = partitions.map((p, i) => ({ p, r: rank(topic, p), i }));
    ranked.sort((a, b) => a.r - b.r || a.i - b.i);
    return { topic, partitions: ranked.map((x) => x.p), first: ranked[0]?.r ?? Infinity };
  });
  return ordered
    .map((t, i) => ({ t, i }))
    .sort((a, b) => a.t.first - b.t.first || a.i - b.i)
    .map(({ t }) => ({ topic: t.topic, partitions: t.partitions }));
}
