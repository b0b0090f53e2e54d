// The chart's monitoring as a Prometheus in the cluster sees it: the ServiceMonitors the chart
// renders (metrics.serviceMonitor.enabled) turned into scrape configs the way the Prometheus
// Operator turns them (endpoint slices of the selected Services, the named port, target labels,
// metric relabelings), run by a real Prometheus pod in the release's namespace, which must scrape
// every operator, receiver and query server pod through the chart's NetworkPolicy.
// Runs where STREAMCUBE_E2E_PROMETHEUS_IMAGE names an image with /bin/prometheus and node.
import { dump } from 'js-yaml';
import { prometheusOperatorCrds } from '../support/prometheus-operator-crds.ts';
import { config, kubectl, pods, waitUntil } from './cluster.ts';

interface ServiceMonitor {
  metadata: { name: string };
  spec: {
    selector: { matchLabels?: Record<string, string> };
    targetLabels?: string[];
    endpoints: {
      port: string;
      path?: string;
      honorLabels?: boolean;
      metricRelabelings?: {
        sourceLabels?: string[];
        regex?: string;
        targetLabel?: string;
        replacement?: string;
        action?: string;
      }[];
    }[];
  };
}

/** Prometheus's name of a Kubernetes label in discovery metadata. */
const labelName = (label: string): string => label.replace(/[^a-zA-Z0-9_]/g, '_');

/**
 * A ServiceMonitor as the Prometheus Operator writes it into prometheus.yml (the parts the chart
 * uses): one job per endpoint, Services kept by the selector's labels, the endpoint's port by
 * name, `targetLabels` copied from the Service, relabelings of the samples as they are.
 * `interval` replaces the monitor's, so that a test sees a scrape within seconds.
 */
export function scrapeConfigsOf(
  monitor: ServiceMonitor,
  namespace: string,
  interval: string,
): object[] {
  const { selector, targetLabels = [], endpoints } = monitor.spec;
  return endpoints.map((endpoint, i) => ({
    job_name: `serviceMonitor/${namespace}/${monitor.metadata.name}/${i}`,
    honor_labels: endpoint.honorLabels ?? false,
    scrape_interval: interval,
    metrics_path: endpoint.path ?? '/metrics',
    kubernetes_sd_configs: [{ role: 'endpointslice', namespaces: { names: [namespace] } }],
    relabel_configs: [
      ...Object.entries(selector.matchLabels ?? {}).map(([label, value]) => ({
        action: 'keep',
        source_labels: [
          `__meta_kubernetes_service_label_${labelName(label)}`,
          `__meta_kubernetes_service_labelpresent_${labelName(label)}`,
        ],
        regex: `(${value});true`,
      })),
      {
        action: 'keep',
        source_labels: ['__meta_kubernetes_endpointslice_port_name'],
        regex: endpoint.port,
      },
      { source_labels: ['__meta_kubernetes_namespace'], target_label: 'namespace' },
      { source_labels: ['__meta_kubernetes_pod_name'], target_label: 'pod' },
      { source_labels: ['__meta_kubernetes_service_name'], target_label: 'service' },
      ...targetLabels.map((label) => ({
        source_labels: [`__meta_kubernetes_service_label_${labelName(label)}`],
        target_label: labelName(label),
        regex: '(.+)',
        replacement: '${1}',
      })),
    ],
    metric_relabel_configs: (endpoint.metricRelabelings ?? []).map((r) => ({
      ...(r.sourceLabels ? { source_labels: r.sourceLabels } : {}),
      ...(r.regex !== undefined ? { regex: r.regex } : {}),
      ...(r.targetLabel ? { target_label: r.targetLabel } : {}),
      ...(r.replacement !== undefined ? { replacement: r.replacement } : {}),
      ...(r.action ? { action: r.action } : {}),
    })),
  }));
}

/** The Prometheus Operator's CRDs, as the integration suites create them (their stand-ins). */
export async function applyMonitoringCrds(): Promise<void> {
  for (const crd of prometheusOperatorCrds)
    await kubectl(['apply', '--server-side', '--force-conflicts', '-f', '-'], JSON.stringify(crd));
  await kubectl([
    'wait',
    '--for=condition=Established',
    '--timeout=60s',
    ...prometheusOperatorCrds.map((c) => `crd/${c.metadata.name}`),
  ]);
}

const prometheusName = 'e2e-prometheus';

/** A Prometheus pod scraping what the release's ServiceMonitors select, with read access to it. */
function prometheusObjects(scrapeConfigs: object[], image: string): object[] {
  const labels = { app: prometheusName };
  const prometheusYml = dump({ global: { scrape_interval: '5s' }, scrape_configs: scrapeConfigs });
  return [
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: prometheusName } },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { name: prometheusName },
      rules: [
        {
          apiGroups: [''],
          resources: ['pods', 'services', 'endpoints'],
          verbs: ['get', 'list', 'watch'],
        },
        {
          apiGroups: ['discovery.k8s.io'],
          resources: ['endpointslices'],
          verbs: ['get', 'list', 'watch'],
        },
      ],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: prometheusName },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: prometheusName },
      subjects: [{ kind: 'ServiceAccount', name: prometheusName, namespace: config.namespace }],
    },
    {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: prometheusName },
      data: { 'prometheus.yml': prometheusYml },
    },
    {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: prometheusName, labels },
      spec: {
        serviceAccountName: prometheusName,
        securityContext: {
          runAsNonRoot: true,
          runAsUser: 65534,
          seccompProfile: { type: 'RuntimeDefault' },
        },
        containers: [
          {
            name: 'prometheus',
            image,
            imagePullPolicy: 'IfNotPresent',
            command: [
              '/bin/prometheus',
              '--config.file=/etc/prometheus/prometheus.yml',
              '--storage.tsdb.path=/tmp/prometheus',
              '--web.listen-address=127.0.0.1:9090',
            ],
            securityContext: {
              allowPrivilegeEscalation: false,
              capabilities: { drop: ['ALL'] },
            },
            volumeMounts: [
              { name: 'config', mountPath: '/etc/prometheus' },
              { name: 'data', mountPath: '/tmp' },
            ],
          },
        ],
        volumes: [
          { name: 'config', configMap: { name: prometheusName } },
          { name: 'data', emptyDir: {} },
        ],
      },
    },
  ];
}

interface Target {
  labels: Record<string, string>;
  health: string;
  lastError: string;
}

/** Prometheus's HTTP API, from inside its pod (the image has node). */
async function prometheusApi<T>(path: string): Promise<T> {
  const script = `fetch('http://127.0.0.1:9090' + process.argv[1]).then((r) => r.text()).then((t) => process.stdout.write(t), (e) => { console.error(e); process.exit(1); })`;
  const out = await kubectl(['exec', prometheusName, '--', 'node', '-e', script, path]);
  const body = JSON.parse(out) as { status: string; data: T; error?: string };
  if (body.status !== 'success') throw new Error(`prometheus ${path}: ${body.error ?? out}`);
  return body.data;
}

/**
 * Runs a Prometheus on the release's ServiceMonitors until every pod of the release is a target
 * that is up, and checks that streamcube's own series came through each; returns what it saw.
 */
export async function scrapeEveryPod(image: string): Promise<string> {
  const monitors = (
    JSON.parse(
      await kubectl([
        'get',
        'servicemonitors.monitoring.coreos.com',
        '-l',
        `app.kubernetes.io/instance=${config.release}`,
        '-o',
        'json',
      ]),
    ) as { items: ServiceMonitor[] }
  ).items;
  if (monitors.length === 0) throw new Error('the chart rendered no ServiceMonitor');
  const scrapeConfigs = monitors.flatMap((m) => scrapeConfigsOf(m, config.namespace, '5s'));
  const objects = prometheusObjects(scrapeConfigs, image);
  await kubectl(
    ['apply', '-f', '-'],
    JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objects }),
  );
  try {
    const release = await pods(`app.kubernetes.io/instance=${config.release}`);
    const expected = new Set(release.map((p) => p.name));
    await waitUntil('the Prometheus pod Ready', async () =>
      (await pods(`app=${prometheusName}`)).some((p) => p.ready) ? true : undefined,
    );
    const up = await waitUntil(
      `every pod of the release (${[...expected].sort().join(', ')}) a target that is up`,
      async () => {
        const { activeTargets } = await prometheusApi<{ activeTargets: Target[] }>(
          '/api/v1/targets?state=active',
        );
        const healthy = new Set(
          activeTargets.filter((t) => t.health === 'up').map((t) => t.labels.pod ?? ''),
        );
        return [...expected].every((p) => healthy.has(p)) ? activeTargets : undefined;
      },
      120_000,
    ).catch(async (error: Error) => {
      const { activeTargets } = await prometheusApi<{ activeTargets: Target[] }>(
        '/api/v1/targets?state=active',
      ).catch(() => ({ activeTargets: [] as Target[] }));
      throw new Error(
        `${error.message}; targets: ${activeTargets.map((t) => `${t.labels.pod ?? '?'} ${t.health} ${t.lastError}`).join('; ')}`,
      );
    });
    // Each pod's own series, not only `up`: the scrape read streamcube's registry.
    const built = await prometheusApi<{ result: { metric: Record<string, string> }[] }>(
      `/api/v1/query?query=${encodeURIComponent('count by (pod) (streamcube_build_info)')}`,
    );
    const withSeries = new Set(built.result.map((r) => r.metric.pod));
    const missing = [...expected].filter((p) => !withSeries.has(p));
    if (missing.length > 0)
      throw new Error(`no streamcube_build_info scraped from ${missing.join(', ')}`);
    return `${up.length} targets up over ${monitors.length} ServiceMonitors`;
  } finally {
    await kubectl(
      ['delete', '--ignore-not-found', '--wait=false', '-f', '-'],
      JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objects }),
    ).catch(() => '');
  }
}
