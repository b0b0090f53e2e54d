// The process's Prometheus registry, and get-or-create for metric families that several
// instances (work queues, controllers, informers) share on one registry.
import {
  Counter,
  Gauge,
  Histogram,
  Registry,
  collectDefaultMetrics,
  type CounterConfiguration,
  type GaugeConfiguration,
  type HistogramConfiguration,
} from 'prom-client';
import { version } from '../version.ts';

/** A registry for one process: everything it exposes on `/metrics`, plus Node's process metrics. */
export function createProcessRegistry(options: { processMetrics?: boolean } = {}): Registry {
  const registry = new Registry();
  if (options.processMetrics ?? true) collectDefaultMetrics({ register: registry });
  return registry;
}

/**
 * `streamcube_build_info` = 1 with the release and the Node.js version as labels, the convention
 * of Prometheus' own `prometheus_build_info` (join on it to label any series with the version).
 */
export function registerBuildInfo(
  registry: Registry,
  component: 'operator' | 'receiver' | 'query-server',
): void {
  new Gauge({
    name: 'streamcube_build_info',
    help: 'A metric with a constant 1 value labelled by the version streamcube was built from',
    labelNames: ['version', 'nodejs_version', 'component'],
    registers: [registry],
  }).set({ version, nodejs_version: process.versions.node, component }, 1);
}

type MetricClass = typeof Counter | typeof Gauge | typeof Histogram;

// prom-client refuses a second metric with the same name on a registry, and two work queues
// must land in one `workqueue_depth` family, told apart by their labels.
function sharedMetric<M>(registry: Registry, name: string, kind: MetricClass, create: () => M): M {
  const existing = registry.getSingleMetric(name);
  if (existing === undefined) return create();
  if (!(existing instanceof kind)) {
    throw new Error(`metric ${name} is already registered with another type than ${kind.name}`);
  }
  return existing as M;
}

export function sharedCounter<L extends string>(
  registry: Registry,
  config: Omit<CounterConfiguration<L>, 'registers'>,
): Counter<L> {
  return sharedMetric(
    registry,
    config.name,
    Counter,
    () => new Counter<L>({ ...config, registers: [registry] }),
  );
}

export function sharedGauge<L extends string>(
  registry: Registry,
  config: Omit<GaugeConfiguration<L>, 'registers'>,
): Gauge<L> {
  return sharedMetric(
    registry,
    config.name,
    Gauge,
    () => new Gauge<L>({ ...config, registers: [registry] }),
  );
}

export function sharedHistogram<L extends string>(
  registry: Registry,
  config: Omit<HistogramConfiguration<L>, 'registers'>,
): Histogram<L> {
  return sharedMetric(
    registry,
    config.name,
    Histogram,
    () => new Histogram<L>({ ...config, registers: [registry] }),
  );
}
