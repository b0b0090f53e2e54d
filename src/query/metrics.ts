// The query server's metrics: `streamcube_query_*`, bounded labels (status, source, outcome,
// reason), on the process registry.
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { IncompleteReason } from './service.ts';

/** Every reason an answer can be incomplete for: each series exists from the start, at 0. */
const incompleteReasons = [
  'receiver_unavailable',
  'deep_storage',
  'conflict',
  'gap',
] as const satisfies readonly IncompleteReason[];

export interface QueryMetrics {
  requests: Counter<'status'>;
  seconds: Histogram<'kind'>;
  unexpectedErrors: Counter;
  pieces: Counter<'source'>;
  receiverCalls: Counter<'outcome'>;
  incomplete: Counter<'reason'>;
  cacheLookups: Counter<'kind' | 'result'>;
  cacheBytes: Gauge;
  listings: Counter<'kind'>;
}

export function createQueryMetrics(registry: Registry): QueryMetrics {
  const registers = [registry];
  const metrics: QueryMetrics = {
    requests: new Counter({
      name: 'streamcube_query_requests_total',
      help: 'Query requests answered, by HTTP status',
      labelNames: ['status'],
      registers,
    }),
    seconds: new Histogram({
      name: 'streamcube_query_duration_seconds',
      help: 'Time to answer a query, by kind',
      labelNames: ['kind'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    }),
    unexpectedErrors: new Counter({
      name: 'streamcube_query_http_unexpected_errors_total',
      help: 'HTTP requests that failed unexpectedly and were answered 500 (a bug: the log has each one under its request id)',
      registers,
    }),
    pieces: new Counter({
      name: 'streamcube_query_pieces_total',
      help: 'Pieces counted in answers: committed hand-offs from deep storage, live segments from receivers',
      labelNames: ['source'],
      registers,
    }),
    receiverCalls: new Counter({
      name: 'streamcube_query_receiver_calls_total',
      help: 'Calls to receivers for their live segments, by outcome',
      labelNames: ['outcome'],
      registers,
    }),
    incomplete: new Counter({
      name: 'streamcube_query_incomplete_total',
      help: 'Answers that could not prove every offset counted once, by reason',
      labelNames: ['reason'],
      registers,
    }),
    cacheLookups: new Counter({
      name: 'streamcube_query_cache_lookups_total',
      help: 'Look-ups in the committed view cache: a cube listing, a commit record, a hand-off rows; result hit or miss',
      labelNames: ['kind', 'result'],
      registers,
    }),
    cacheBytes: new Gauge({
      name: 'streamcube_query_cache_bytes',
      help: 'Bytes held by the committed view cache (estimated size of decoded rows and records)',
      registers,
    }),
    listings: new Counter({
      name: 'streamcube_query_listings_total',
      help: "Listings of a cube's commit records: kind full (every key) or resumed (the newest windows, and any after)",
      labelNames: ['kind'],
      registers,
    }),
  };
  // Series of bounded labels exist at 0 before their first event, so that a rate or an alert
  // over them has a value from the first scrape (the dashboard's query row, say), not no data.
  for (const source of ['committed', 'live']) metrics.pieces.inc({ source }, 0);
  for (const outcome of ['ok', 'error']) metrics.receiverCalls.inc({ outcome }, 0);
  for (const reason of incompleteReasons) metrics.incomplete.inc({ reason }, 0);
  return metrics;
}
