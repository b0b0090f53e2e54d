// Stand-ins for the Prometheus Operator's ServiceMonitor, PodMonitor and PrometheusRule CRDs
// (monitoring.coreos.com/v1), so the chart's monitors and rules can be created in the test API server. Only the fields the chart writes
// (and their neighbours) are in the schema, with the upstream names and types; creating with
// strict field validation refuses anything else, as the real CRDs would.

const labelSelector = {
  type: 'object',
  properties: {
    matchLabels: { type: 'object', additionalProperties: { type: 'string' } },
    matchExpressions: {
      type: 'array',
      items: {
        type: 'object',
        required: ['key', 'operator'],
        properties: {
          key: { type: 'string' },
          operator: { type: 'string' },
          values: { type: 'array', items: { type: 'string' } },
        },
      },
    },
  },
};

/** Prometheus durations as the upstream CRDs check them. */
const duration = {
  type: 'string',
  pattern:
    '^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$',
};

const endpoint = {
  type: 'object',
  properties: {
    port: { type: 'string' },
    path: { type: 'string' },
    interval: duration,
    scrapeTimeout: duration,
    scheme: { type: 'string', enum: ['http', 'https'] },
    honorLabels: { type: 'boolean' },
    metricRelabelings: {
      type: 'array',
      items: {
        type: 'object',
        properties: {
          sourceLabels: { type: 'array', items: { type: 'string' } },
          separator: { type: 'string' },
          targetLabel: { type: 'string' },
          regex: { type: 'string' },
          replacement: { type: 'string' },
          action: { type: 'string' },
        },
      },
    },
  },
};

const namespaceSelector = {
  type: 'object',
  properties: {
    any: { type: 'boolean' },
    matchNames: { type: 'array', items: { type: 'string' } },
  },
};

function monitorCrd(kind: string, plural: string, spec: Record<string, unknown>) {
  return monitoringCrd(kind, plural, {
    type: 'object',
    required: ['selector'],
    properties: {
      selector: labelSelector,
      namespaceSelector,
      jobLabel: { type: 'string' },
      ...spec,
    },
  });
}

const stringMap = { type: 'object', additionalProperties: { type: 'string' } };

/** PrometheusRule's spec as upstream defines it: groups of alerting and recording rules. */
const prometheusRuleSpec = {
  type: 'object',
  properties: {
    groups: {
      type: 'array',
      items: {
        type: 'object',
        required: ['name'],
        properties: {
          name: { type: 'string', minLength: 1 },
          interval: duration,
          rules: {
            type: 'array',
            items: {
              type: 'object',
              required: ['expr'],
              properties: {
                alert: { type: 'string' },
                record: { type: 'string' },
                expr: { 'x-kubernetes-int-or-string': true },
                for: duration,
                keep_firing_for: duration,
                labels: stringMap,
                annotations: stringMap,
              },
            },
          },
        },
      },
    },
  },
};

function monitoringCrd(kind: string, plural: string, spec: Record<string, unknown>) {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${plural}.monitoring.coreos.com` },
    spec: {
      group: 'monitoring.coreos.com',
      scope: 'Namespaced',
      names: { kind, plural, singular: kind.toLowerCase(), listKind: `${kind}List` },
      versions: [
        {
          name: 'v1',
          served: true,
          storage: true,
          schema: {
            openAPIV3Schema: {
              type: 'object',
              properties: { spec },
            },
          },
        },
      ],
    },
  };
}

export const prometheusOperatorCrds = [
  monitorCrd('ServiceMonitor', 'servicemonitors', {
    endpoints: { type: 'array', items: endpoint },
    targetLabels: { type: 'array', items: { type: 'string' } },
    podTargetLabels: { type: 'array', items: { type: 'string' } },
  }),
  monitorCrd('PodMonitor', 'podmonitors', {
    podMetricsEndpoints: { type: 'array', items: endpoint },
    podTargetLabels: { type: 'array', items: { type: 'string' } },
  }),
  monitoringCrd('PrometheusRule', 'prometheusrules', prometheusRuleSpec),
];
