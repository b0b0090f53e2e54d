// The pool controller's metrics: each pool's sets by state and its Ready sets, as its status says
// (set at each reconcile, removed with the pool), and the sets it removed; with spec.autoscale,
// the autoscaler's target, the lag per set it saw, the sets it wants and its decisions; whether
// the chart's pool (--pool-configmap) is applied.
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
  const autoscaleLabels = ['namespace', 'pool'];
  const target = sharedGauge(registry, {
    name: 'streamcube_pool_autoscale_target_lag_per_set',
    help: "A ReceiverPool's spec.autoscale.targetLagPerSet (events behind per set)",
    labelNames: autoscaleLabels,
  });
  const lagPerSet = sharedGauge(registry, {
    name: 'streamcube_pool_autoscale_lag_per_set',
    help: 'Events behind per set of a ReceiverPool with spec.autoscale, at the last look (every --resync); unknown figures not counted',
    labelNames: autoscaleLabels,
  });
  const desiredSets = sharedGauge(registry, {
    name: 'streamcube_pool_autoscale_desired_sets',
    help: 'The sets the autoscaler of a ReceiverPool wants',
    labelNames: autoscaleLabels,
  });
  const bounds = sharedGauge(registry, {
    name: 'streamcube_pool_autoscale_bound_sets',
    help: "A ReceiverPool's spec.autoscale.minSets and maxSets (bound: min, max)",
    labelNames: [...autoscaleLabels, 'bound'],
  });
  const decisions = sharedCounter(registry, {
    name: 'streamcube_pool_autoscale_decisions_total',
    help: 'Changes of spec.sets the autoscaler of a ReceiverPool wrote, by direction (out, in, clamp)',
    labelNames: [...autoscaleLabels, 'direction'],
  });
  const chartPool = sharedGauge(registry, {
    name: 'streamcube_pool_chart_applied',
    help: "1 when the leader's last look found the ReceiverPool of the chart's ConfigMap (--pool-configmap) applied or applied it, 0 when it could not (Event PoolNotApplied on the ConfigMap)",
    labelNames: ['namespace', 'configmap'],
  });
  const directions = ['out', 'in', 'clamp'] as const;
  const forgetAutoscale = (namespace: string, pool: string): void => {
    for (const g of [target, lagPerSet, desiredSets]) g.remove({ namespace, pool });
    for (const bound of ['min', 'max']) bounds.remove({ namespace, pool, bound });
    for (const direction of directions) decisions.remove({ namespace, pool, direction });
  };
  return {
    publishAutoscale(
      namespace: string,
      pool: string,
      figures: {
        target: number;
        lagPerSet: number;
        desiredSets: number;
        minSets: number;
        maxSets: number;
      },
    ): void {
      target.set({ namespace, pool }, figures.target);
      lagPerSet.set({ namespace, pool }, figures.lagPerSet);
      desiredSets.set({ namespace, pool }, figures.desiredSets);
      bounds.set({ namespace, pool, bound: 'min' }, figures.minSets);
      bounds.set({ namespace, pool, bound: 'max' }, figures.maxSets);
      // Every direction has a series from the first look, at 0 until it happens.
      for (const direction of directions) decisions.inc({ namespace, pool, direction }, 0);
    },
    decided(namespace: string, pool: string, direction: (typeof directions)[number]): void {
      decisions.inc({ namespace, pool, direction });
    },
    forgetAutoscale,
    publish(namespace: string, pool: string, status: ReceiverPoolStatus): void {
      for (const state of setStates)
        sets.set(
          { namespace, pool, state },
          (status.sets ?? []).filter((s) => s.state === state).length,
        );
      readySets.set({ namespace, pool }, status.readySets ?? 0);
    },
    chartPoolApplied(namespace: string, configmap: string, applied: boolean): void {
      chartPool.set({ namespace, configmap }, applied ? 1 : 0);
    },
    removed(namespace: string, pool: string): void {
      setsRemoved.inc({ namespace, pool });
    },
    forget(namespace: string, pool: string): void {
      for (const state of setStates) sets.remove({ namespace, pool, state });
      readySets.remove({ namespace, pool });
      setsRemoved.remove({ namespace, pool });
      forgetAutoscale(namespace, pool);
    },
  };
}

export type PoolMetrics = ReturnType<typeof createPoolMetrics>;
