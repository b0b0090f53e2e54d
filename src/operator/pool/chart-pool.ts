// The chart's ReceiverPool, applied by the operator (--pool-configmap). Helm does not own the pool:
// it cannot create a custom resource in the release that creates its kind, and it applies no
// change to a custom resource it adopted (helm/helm#11638). So the chart renders the pool into a
// ConfigMap (`pool.json`), and the leader applies it server-side under its own field manager,
// owned by that ConfigMap (helm uninstall deletes the ConfigMap, the garbage collector the pool and
// its sets). It applies when the ConfigMap's pool differs from the one it last applied (a digest
// on the pool), as Helm would patch: an edit of the pool by hand stays until the chart changes.
// spec.sets is the chart's only when the pool is made or when the chart's value changed since the
// last apply; otherwise the pool keeps the count it was scaled to (kubectl scale, the autoscaler).
import { createHash } from 'node:crypto';
import {
  ApiException,
  type CoreV1Api,
  type CustomObjectsApi,
  type V1ConfigMap,
  type V1OwnerReference,
} from '@kubernetes/client-node';
import {
  apiVersion,
  group,
  kind,
  plural,
  version,
  type ReceiverPool,
} from '../../api/receiver-pool.ts';
import type { Logger } from '../../observability/logger.ts';
import type { EventRecorder } from '../events.ts';
import { apiErrorMessage, serverSideApply } from './workloads.ts';

/** The ConfigMap key holding the pool's manifest, as JSON. */
export const poolManifestKey = 'pool.json';
/** The field manager of the chart's pool (managedFields name it, apart from the operator's own writes). */
export const chartFieldManager = 'streamcube-chart';
/** On the pool: the digest of the manifest last applied. */
export const chartDigestAnnotation = 'streamcube.io/chart-pool-digest';
/** On the pool: the chart's spec.sets when last applied, to tell a changed value from a scaled pool. */
export const chartSetsAnnotation = 'streamcube.io/chart-sets';

/** The pool a ConfigMap holds, or why it holds none. */
export function poolOfConfigMap(
  configMap: Pick<V1ConfigMap, 'data'>,
): { manifest: ReceiverPool; digest: string } | { error: string } {
  const text = configMap.data?.[poolManifestKey];
  if (text === undefined) return { error: `it has no key ${poolManifestKey}` };
  let manifest: unknown;
  try {
    manifest = JSON.parse(text);
  } catch (error) {
    return { error: `${poolManifestKey} is not JSON: ${(error as Error).message}` };
  }
  const m = manifest as Partial<ReceiverPool> | null;
  if (typeof m !== 'object' || m === null || Array.isArray(m))
    return { error: `${poolManifestKey} is not an object` };
  if (m.apiVersion !== apiVersion || m.kind !== kind)
    return {
      error: `${poolManifestKey} is a ${String(m.apiVersion)} ${String(m.kind)}, not a ${apiVersion} ${kind}`,
    };
  if (typeof m.metadata?.name !== 'string' || m.metadata.name === '')
    return { error: `${poolManifestKey} has no metadata.name` };
  if (typeof m.spec !== 'object' || m.spec === null || !Number.isInteger(m.spec.sets))
    return { error: `${poolManifestKey} has no integer spec.sets` };
  return {
    manifest: m as ReceiverPool,
    digest: createHash('sha256').update(text).digest('hex').slice(0, 16),
  };
}

/** What to apply, or undefined when the live pool already is the ConfigMap's. */
export function chartPoolApplication(o: {
  manifest: ReceiverPool;
  digest: string;
  live: ReceiverPool | undefined;
  owner: V1OwnerReference;
}): { body: ReceiverPool; sets: 'chart' | 'kept' } | undefined {
  const { manifest, digest, live, owner } = o;
  const annotations = live?.metadata.annotations ?? {};
  const chartSets = manifest.spec.sets;
  // Applied as it stands, and owned by this ConfigMap (not by one of that name deleted since).
  if (
    live &&
    annotations[chartDigestAnnotation] === digest &&
    (live.metadata.ownerReferences ?? []).some((r) => r.uid === owner.uid)
  )
    return undefined;
  // Made now, or receivers.sets changed since the last apply: the chart's count. Otherwise the
  // pool's own (scaled since, or a pool the chart had not applied).
  const lastChartSets = annotations[chartSetsAnnotation];
  const takeChartSets =
    !live || (lastChartSets !== undefined && lastChartSets !== String(chartSets));
  const sets = live && !takeChartSets ? live.spec.sets : chartSets;
  return {
    sets: takeChartSets ? 'chart' : 'kept',
    body: {
      ...manifest,
      metadata: {
        ...manifest.metadata,
        ...(live?.metadata.resourceVersion
          ? { resourceVersion: live.metadata.resourceVersion }
          : {}),
        annotations: {
          ...manifest.metadata.annotations,
          [chartDigestAnnotation]: digest,
          [chartSetsAnnotation]: String(chartSets),
        },
        ownerReferences: [owner],
      },
      spec: { ...manifest.spec, sets },
    },
  };
}

export interface ChartPoolDeps {
  namespace: string;
  configMap: string;
  core: Pick<CoreV1Api, 'readNamespacedConfigMap'>;
  custom: Pick<CustomObjectsApi, 'getNamespacedCustomObject' | 'patchNamespacedCustomObject'>;
  events: EventRecorder;
  logger: Logger;
}

export type ChartPoolOutcome =
  | { outcome: 'applied'; pool: string; sets: number; setsFrom: 'chart' | 'kept' }
  | { outcome: 'unchanged'; pool: string }
  | { outcome: 'failed'; reason: string };

/**
 * Reads the ConfigMap and the pool it names, and applies the pool when the ConfigMap's differs from
 * the one last applied. A failure is logged and, where there is an object to show it on, an Event;
 * never thrown.
 */
export async function applyChartPool(deps: ChartPoolDeps): Promise<ChartPoolOutcome> {
  const { namespace, configMap: name, logger } = deps;
  const where = `ConfigMap ${namespace}/${name}`;
  let configMap: V1ConfigMap;
  try {
    configMap = await deps.core.readNamespacedConfigMap({ name, namespace });
  } catch (error) {
    const reason = `cannot read ${where}: ${apiErrorMessage(error)}`;
    logger.warn('the chart pool is not applied', { error: reason });
    return { outcome: 'failed', reason };
  }
  const subject = {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: configMap.metadata ?? { name, namespace },
  };
  const fail = (reason: string): ChartPoolOutcome => {
    logger.warn('the chart pool is not applied', {
      configMap: `${namespace}/${name}`,
      error: reason,
    });
    deps.events.record(subject, 'Warning', 'PoolNotApplied', reason);
    return { outcome: 'failed', reason };
  };
  const parsed = poolOfConfigMap(configMap);
  if ('error' in parsed)
    return fail(`the ReceiverPool of ${where} is not applied: ${parsed.error}`);
  const pool = parsed.manifest.metadata.name!;
  let live: ReceiverPool | undefined;
  try {
    live = (await deps.custom.getNamespacedCustomObject({
      group,
      version,
      namespace,
      plural,
      name: pool,
    })) as ReceiverPool;
  } catch (error) {
    if (!(error instanceof ApiException && error.code === 404))
      return fail(`cannot read ReceiverPool ${pool}: ${apiErrorMessage(error)}`);
  }
  const application = chartPoolApplication({
    ...parsed,
    live,
    owner: {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      name,
      uid: configMap.metadata?.uid ?? '',
    },
  });
  if (!application) return { outcome: 'unchanged', pool };
  let stored: ReceiverPool;
  try {
    stored = (await deps.custom.patchNamespacedCustomObject(
      {
        group,
        version,
        namespace,
        plural,
        name: pool,
        body: application.body,
        fieldManager: chartFieldManager,
        force: true,
      },
      serverSideApply,
    )) as ReceiverPool;
  } catch (error) {
    // A conflict: the pool changed since it was read; the next pass reads it again.
    if (error instanceof ApiException && error.code === 409)
      return { outcome: 'failed', reason: `ReceiverPool ${pool} changed while applied` };
    return fail(
      `the API server refused ReceiverPool ${pool} of ${where}: ${apiErrorMessage(error)}`,
    );
  }
  const sets = application.body.spec.sets;
  const how =
    application.sets === 'chart'
      ? `spec.sets ${sets}, the chart's`
      : `spec.sets ${sets} kept (the chart's is ${parsed.manifest.spec.sets}, unchanged since the last apply)`;
  deps.events.record(
    stored,
    'Normal',
    live ? 'ChartApplied' : 'ChartCreated',
    `${live ? 'applied' : 'created'} from ${where} (the chart's values): ${how}`,
  );
  logger.info(`receiver pool ${live ? 'applied' : 'created'} from the chart`, {
    pool: `${namespace}/${pool}`,
    sets,
    setsFrom: application.sets,
  });
  return { outcome: 'applied', pool, sets, setsFrom: application.sets };
}

/**
 * The leader's loop of one term: applyChartPool now and every `resyncMs` (one at a time) until
 * `signal` aborts, each outcome reported to `applied` (false when it failed).
 */
export function keepChartPoolApplied(
  deps: ChartPoolDeps & {
    signal: AbortSignal;
    resyncMs: number;
    applied: (applied: boolean) => void;
  },
): void {
  let applying: Promise<unknown> | undefined;
  const apply = (): void => {
    applying ??= applyChartPool(deps)
      .then(({ outcome }) => deps.applied(outcome !== 'failed'))
      .finally(() => (applying = undefined));
  };
  apply();
  const timer = setInterval(apply, deps.resyncMs);
  deps.signal.addEventListener('abort', () => clearInterval(timer), { once: true });
}
