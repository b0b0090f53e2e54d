// The pool controller's metrics: each pool's sets by state and its Ready sets, as its status says
// (set at each reconcile, removed with the pool), and the sets it removed.
import type { Registry } from 'prom-client';
import { sharedCounter, sharedGauge } from '../../observability/metrics.ts';
import { setStates, type ReceiverPoolStatus } from '../../api/receiver-pool.ts';

export function createPoolMetrics(registry: Registry) {
  const sets = sharedGauge(registry, {
    name: 'streamcube_pool_sets',
    help: 'Sets of a ReceiverPool by state (Active, Draining)',
    labelNames: ['namespace', 'pool', 'state'],
  });
  const readySets = sharedGauge(registry, {
    name: 'streamcube_pool_ready_sets',
    help: 'Active sets of a ReceiverPool whose every receiver is Ready',
    labelNames: ['namespace', 'pool'],
  });
  const setsRemoved = sharedCounter(registry, {
    name: 'streamcube_pool_sets_removed_total',
    help: 'Draining sets a ReceiverPool removed once no cube used them',
    labelNames: ['namespace', 'pool'],
  });
  return {
    publish(namespace: string, pool: string, status: ReceiverPoolStatus): void {
      for (const state of setStates)
        sets.set(
          { namespace, pool, state },
          (status.sets ?? []).filter((s) => s.state === state).length,
        );
      readySets.set({ namespace, pool }, status.readySets ?? 0);
    },
    removed(namespace: string, pool: string): void {
      setsRemoved.inc({ namespace, pool });
    },
    forget(namespace: string, pool: string): void {
      for (const state of setStates) sets.remove({ namespace, pool, state });
      readySets.remove({ namespace, pool });
      setsRemoved.remove({ namespace, pool });
    },
  };
}

export type PoolMetrics = ReturnType<typeof createPoolMetrics>;
