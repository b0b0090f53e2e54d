// The Helm chart: lints, refuses unknown values and describes the known ones, renders the generated
// CRD and every value where it belongs, and installs and upgrades against the real API server
// (objects created and valid, the CRD updated by `helm upgrade`, the aggregated roles granting
// `view`/`edit` users). No kubelet runs, so pods stay Pending and `helm test` is not run: its
// pod's script runs here instead.
import { X509Certificate, createPrivateKey } from 'node:crypto';
import { execFile, spawn } from 'node:child_process';
import { cpSync, existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import {
  AppsV1Api,
  CoreV1Api,
  NetworkingV1Api,
  PolicyV1Api,
  RbacAuthorizationV1Api,
  type KubernetesObject,
  type V1Container,
  type V1PodTemplateSpec,
} from '@kubernetes/client-node';
import { dump, load, loadAll } from 'js-yaml';
import { crdFile, crdName, cubeAssignmentCrdHelmTemplate, helmCrdFile } from '../../src/api/crd.ts';
import { operatorPoolRules } from '../support/operator-rules.ts';
import {
  poolCrdFile,
  poolCrdName,
  poolHelmCrdFile,
  receiverPoolCrdHelmTemplate,
} from '../../src/api/receiver-pool-crd.ts';
import { binDir, buildFromWrapperModule } from '../../src/local/controlplane.ts';
import { settings } from '../../src/local/settings.ts';
import { parseOperatorConfig } from '../../src/operator/config.ts';
import { operatorEnvironment, operatorNodeOptions } from '../../src/operator/node-options.ts';
import { parseQueryServerConfig } from '../../src/query/config.ts';
import { parseReceiverConfig } from '../../src/receiver/config.ts';
import { receiverPoolSpec, type ReceiverPool } from '../../src/api/receiver-pool.ts';
import { poolOfConfigMap } from '../../src/operator/pool/chart-pool.ts';
import { applyChartPoolAsLeader } from '../support/receiver-pools.ts';
import { renderSet } from '../../src/operator/pool/render.ts';
import { adminKubeConfig, testEnvironment } from '../env/connection.ts';
import { applyCrd, createNamespace, kubectl } from '../support/cluster.ts';
import { waitFor } from '../support/wait.ts';
import { prometheusOperatorCrds } from '../support/prometheus-operator-crds.ts';
import { tempDir } from '../support/scratch-dirs.ts';

const chart = 'deploy/helm/streamcube';

/** The parts of a CustomResourceDefinition the CRD upgrade test reads and edits. */
interface CustomResourceDefinition {
  metadata: { name: string };
  spec: {
    names: { shortNames?: string[]; categories?: string[] };
    versions: {
      additionalPrinterColumns?: { name: string }[];
      schema: {
        openAPIV3Schema: { properties: { spec: { properties: Record<string, unknown> } } };
      };
    }[];
  };
}
const kc = adminKubeConfig();

async function helm(...args: string[]): Promise<{ stdout: string; stderr: string }> {
  const binary = process.env.STREAMCUBE_HELM;
  if (!binary) throw new Error('STREAMCUBE_HELM is not set: the jest global set-up builds helm');
  return promisify(execFile)(binary, args, {
    env: { ...process.env, KUBECONFIG: testEnvironment().kube.kubeconfig },
  });
}

type Rendered = KubernetesObject & { spec?: Record<string, unknown> };

/**
 * `helm template` with `--set` pairs, as objects, followed by what the operator renders of each
 * ReceiverPool (src/operator/pool/render.ts): its sets' StatefulSets, Services and PDBs.
 */
async function render(...sets: string[]): Promise<Rendered[]> {
  const args = sets.flatMap((set) => ['--set', set]);
  const { stdout } = await helm('template', 't', chart, '--namespace', 'chart-ns', ...args);
  return withPoolSets(parseRendered(stdout));
}

function parseRendered(stdout: string): Rendered[] {
  return (loadAll(stdout) as (Rendered | null)[]).filter((o): o is Rendered => o !== null);
}

/**
 * `objects`, the ReceiverPool of each ConfigMap among them that holds one (the chart's pool, which
 * the operator applies: src/operator/pool/chart-pool.ts), and for each pool the objects the
 * operator applies for its sets.
 */
function withPoolSets(objects: Rendered[]): Rendered[] {
  const pools = objects.flatMap((o) => {
    if (o.kind !== 'ConfigMap' || !('data' in o)) return [];
    const parsed = poolOfConfigMap({ data: o.data as Record<string, string> });
    return 'manifest' in parsed ? [parsed.manifest] : [];
  });
  const sets = pools.flatMap((o) => {
    const pool: ReceiverPool = {
      apiVersion: 'streamcube.io/v1alpha1',
      kind: 'ReceiverPool',
      metadata: { ...o.metadata, namespace: 'chart-ns', uid: 'pool-uid' },
      spec: receiverPoolSpec.parse(o.spec),
    };
    return Array.from({ length: pool.spec.sets }, (_, index) => {
      const set = renderSet(pool, index);
      return [set.service, set.podDisruptionBudget, set.statefulSet] as Rendered[];
    }).flat();
  });
  return [...objects, ...pools, ...sets];
}

function find(objects: Rendered[], kind: string, name: string): Rendered {
  const found = objects.find((o) => o.kind === kind && o.metadata?.name === name);
  if (!found) throw new Error(`no ${kind} ${name} rendered`);
  return found;
}

function podTemplate(workload: Rendered): V1PodTemplateSpec {
  return (workload.spec as { template: V1PodTemplateSpec }).template;
}

function container(workload: Rendered): V1Container {
  return podTemplate(workload).spec!.containers[0]!;
}

/** Whether `selector`'s matchLabels all hold in `labels` (the API server's rule for matchLabels). */
function selects(selector: { matchLabels?: Record<string, string> }, labels = {}): boolean {
  const have = labels as Record<string, string>;
  const want = Object.entries(selector.matchLabels ?? {});
  return want.length > 0 && want.every(([k, v]) => have[k] === v);
}

/** The receivers' and the operator's workloads of a default render (release `t`). */
const workloads = (objects: Rendered[]): Rendered[] => [
  find(objects, 'Deployment', 't-operator'),
  find(objects, 'StatefulSet', 't-0'),
  find(objects, 'StatefulSet', 't-1'),
];

test('the chart renders the CRDs generated from src/api, kept on uninstall unless crds.keep is false; none without crds.enabled', async () => {
  expect(readFileSync(helmCrdFile, 'utf8')).toBe(cubeAssignmentCrdHelmTemplate());
  expect(readFileSync(poolHelmCrdFile, 'utf8')).toBe(receiverPoolCrdHelmTemplate());
  const generated = [crdFile, poolCrdFile].map((f) => load(readFileSync(f, 'utf8')) as Rendered);
  const crdOf = (objects: Rendered[]): Rendered[] =>
    objects
      .filter((o) => o.kind === 'CustomResourceDefinition')
      .sort((a, b) => (a.metadata!.name! < b.metadata!.name! ? -1 : 1));
  expect(crdOf(await render())).toEqual(
    generated.map((crd) => ({
      ...crd,
      metadata: { ...crd.metadata, annotations: { 'helm.sh/resource-policy': 'keep' } },
    })),
  );
  expect(crdOf(await render('crds.keep=false'))).toEqual(generated);
  expect(crdOf(await render('crds.enabled=false'))).toEqual([]);
  expect([crdName, poolCrdName]).toEqual(generated.map((crd) => crd.metadata?.name));
});

test('helm lint passes and a misspelt value is refused by values.schema.json', async () => {
  await helm('lint', chart);
  await expect(
    helm('template', 't', chart, '--set', 'receivers.replicaSet[0].name=x'),
  ).rejects.toThrow(/additional properties 'replicaSet' not allowed/);
  await expect(
    helm('template', 't', chart, '--set', 'receivers.replicaSets[0].name=Bad_Name'),
  ).rejects.toThrow(/name/);
});

/** Every property of a JSON schema without a description, at any depth (list items too). */
function undescribedKeys(node: JsonSchema, path = ''): string[] {
  const own = Object.entries(node.properties ?? {}).flatMap(([key, child]) => {
    const at = path ? `${path}.${key}` : key;
    return [...(child.description ? [] : [at]), ...undescribedKeys(child, at)];
  });
  return node.items ? [...own, ...undescribedKeys(node.items, `${path}[]`)] : own;
}
interface JsonSchema {
  description?: string;
  properties?: Record<string, JsonSchema>;
  items?: JsonSchema;
}

test('values.schema.json describes every key', () => {
  const schema = JSON.parse(readFileSync(`${chart}/values.schema.json`, 'utf8')) as JsonSchema;
  expect(undescribedKeys(schema)).toEqual([]);
  expect(undescribedKeys({ properties: { a: { properties: { b: {} } } } })).toEqual(['a', 'a.b']);
});

test("values.schema.json accepts a parent chart's global values and refuses unknown or bad ones", async () => {
  await render('global.imageRegistry=registry.example', 'global.anything.nested=1');
  for (const [set, message] of [
    ['networkPolicy.enable=true', /additional properties 'enable' not allowed/],
    ['metrics.serviceMonitor.intervall=1m', /additional properties 'intervall' not allowed/],
    ['operator.nodeSelctor.disk=ssd', /additional properties 'nodeSelctor' not allowed/],
    ['adminToken.existingSecretName=x', /additional properties 'existingSecretName' not allowed/],
    ['operator.logLevel=verbose', /logLevel/],
    ['image.digest=latest', /digest/],
    ['receivers.extraArgs[0]=oops', /extraArgs/],
    ['operator.extraEnv[0].value=x', /name/],
    ['imagePullSecrets[0].nam=x', /additional properties 'nam' not allowed/],
  ] as const) {
    await expect(render(set)).rejects.toThrow(message);
  }
});

test('image: registry, repository, tag (default: appVersion), digest, pull policy and pull secrets on every pod', async () => {
  const appVersion = /appVersion: '?([^'\n]+)/.exec(
    readFileSync(`${chart}/Chart.yaml`, 'utf8'),
  )![1];
  for (const w of workloads(await render('image.repository=sc/streamcube'))) {
    expect(container(w).image).toBe(`sc/streamcube:${appVersion}`);
    expect(podTemplate(w).spec?.imagePullSecrets).toBeUndefined();
  }
  const digest = `sha256:${'ab'.repeat(32)}`;
  const objects = await render(
    'image.registry=registry.example:5000',
    'image.repository=sc/streamcube',
    'image.tag=1.2.3',
    `image.digest=${digest}`,
    'image.pullPolicy=Always',
    'imagePullSecrets[0].name=pull-me',
  );
  for (const w of workloads(objects)) {
    expect(container(w).image).toBe(`registry.example:5000/sc/streamcube:1.2.3@${digest}`);
    expect(container(w).imagePullPolicy).toBe('Always');
    expect(podTemplate(w).spec?.imagePullSecrets).toEqual([{ name: 'pull-me' }]);
  }
});

test("scheduling values reach the operator and every replica set; a spread without a labelSelector selects its own pods, a receiver's always", async () => {
  const sets = (component: string): string[] => [
    `${component}.nodeSelector.disk=ssd`,
    `${component}.tolerations[0].key=dedicated`,
    `${component}.tolerations[0].operator=Exists`,
    `${component}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key=zone`,
    `${component}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator=Exists`,
    `${component}.priorityClassName=${component}-priority`,
    `${component}.topologySpreadConstraints[0].maxSkew=1`,
    `${component}.topologySpreadConstraints[0].topologyKey=kubernetes.io/hostname`,
    `${component}.topologySpreadConstraints[0].whenUnsatisfiable=ScheduleAnyway`,
    `${component}.topologySpreadConstraints[1].maxSkew=2`,
    `${component}.topologySpreadConstraints[1].topologyKey=zone`,
    `${component}.topologySpreadConstraints[1].whenUnsatisfiable=DoNotSchedule`,
    `${component}.topologySpreadConstraints[1].labelSelector.matchLabels.mine=yes`,
  ];
  const objects = await render(...sets('operator'), ...sets('receivers'));
  const others = workloads(objects);
  for (const w of others) {
    const component = w.kind === 'Deployment' ? 'operator' : 'receivers';
    const spec = podTemplate(w).spec!;
    expect(spec.nodeSelector).toEqual({ disk: 'ssd' });
    expect(spec.tolerations).toEqual([{ key: 'dedicated', operator: 'Exists' }]);
    expect(
      spec.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution
        ?.nodeSelectorTerms[0]?.matchExpressions,
    ).toEqual([{ key: 'zone', operator: 'Exists' }]);
    expect(spec.priorityClassName).toBe(`${component}-priority`);
    const [own, given] = spec.topologySpreadConstraints!;
    // The filled-in selector is the workload's own: its pods and no other workload's.
    expect(own!.labelSelector).toEqual({
      matchLabels: (w.spec as { selector: { matchLabels: Record<string, string> } }).selector
        .matchLabels,
    });
    for (const other of others)
      expect(selects(own!.labelSelector!, podTemplate(other).metadata?.labels)).toBe(other === w);
    // The operator's given selector is kept; a receiver's spread always selects its own set (the
    // pool's rule: a set's replicas hold the same data).
    expect(given).toMatchObject({
      maxSkew: 2,
      labelSelector:
        w.kind === 'Deployment' ? { matchLabels: { mine: 'yes' } } : own!.labelSelector,
    });
  }
  // None of it by default.
  for (const w of workloads(await render())) {
    const spec = podTemplate(w).spec!;
    for (const field of [
      'nodeSelector',
      'tolerations',
      'affinity',
      'priorityClassName',
      'topologySpreadConstraints',
    ] as const)
      expect(spec[field]).toBeUndefined();
  }
});

test("log level, extraEnv and extraArgs reach both processes, whose parsers take the chart's flags", async () => {
  const objects = await render(
    'operator.logLevel=debug',
    'receivers.logLevel=warn',
    'operator.extraEnv[0].name=EXTRA',
    'operator.extraEnv[0].value=op',
    'receivers.extraEnv[0].name=EXTRA',
    'receivers.extraEnv[0].valueFrom.fieldRef.fieldPath=spec.nodeName',
    'operator.extraArgs[0]=--workers=9',
    'receivers.extraArgs[0]=--flush-interval=5s',
    'operator.metricsPort=9100',
  );
  const operator = container(find(objects, 'Deployment', 't-operator'));
  expect(operator.env).toEqual(
    expect.arrayContaining([
      { name: 'STREAMCUBE_LOG_LEVEL', value: 'debug' },
      { name: 'EXTRA', value: 'op' },
    ]),
  );
  const [command, ...flags] = operator.args!;
  expect(command).toBe('operator');
  const operatorConfig = parseOperatorConfig(flags, {});
  expect(operatorConfig).toMatchObject({
    workers: 9,
    port: 9100,
    namespace: 'chart-ns',
    receiverNamespace: 'chart-ns',
    receiverSelector: 'app.kubernetes.io/instance=t',
    // The chart's ReceiverPool: rendered into this ConfigMap, applied by the operator.
    poolConfigMap: 't-receiver-pool',
    receiverTokenFile: '/var/run/streamcube/token',
    receiverTokenGraceMs: 120_000,
  });
  expect(find(objects, 'ConfigMap', 't-receiver-pool')).toBeDefined();
  expect(operator.ports).toEqual([{ name: 'metrics', containerPort: 9100 }]);
  for (const name of ['t-0', 't-1']) {
    const receiver = container(find(objects, 'StatefulSet', name));
    expect(receiver.env).toEqual(
      expect.arrayContaining([
        { name: 'STREAMCUBE_LOG_LEVEL', value: 'warn' },
        { name: 'EXTRA', valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } },
      ]),
    );
    const [cmd, ...receiverFlags] = receiver.args!;
    expect(cmd).toBe('receiver');
    // A later flag wins: extraArgs override the chart's own.
    expect(parseReceiverConfig(receiverFlags, {})).toMatchObject({
      replicaSet: name,
      flushIntervalMs: 5000,
      adminTokenFile: '/var/run/streamcube/token',
      adminTokenGraceMs: 120_000,
      readTokenFile: '/var/run/streamcube-read/token',
      metricsPort: 9090,
    });
  }
});

test('the operator runs with the V8 flags of src/operator/node-options.ts, unless nodeOptions says otherwise; receivers with none', async () => {
  const nodeOptionsOf = (objects: Rendered[], kind: string, name: string): string | undefined =>
    container(find(objects, kind, name)).env?.find((e) => e.name === 'NODE_OPTIONS')?.value;
  const defaults = await render();
  expect(nodeOptionsOf(defaults, 'Deployment', 't-operator')).toBe(operatorNodeOptions.join(' '));
  expect(nodeOptionsOf(defaults, 'StatefulSet', 't-0')).toBeUndefined();
  const none = await render('operator.nodeOptions=');
  expect(nodeOptionsOf(none, 'Deployment', 't-operator')).toBeUndefined();
  const own = await render('operator.nodeOptions=--max-old-space-size=200');
  expect(nodeOptionsOf(own, 'Deployment', 't-operator')).toBe('--max-old-space-size=200');
});

test('the operator runs with the environment of src/operator/node-options.ts (MALLOC_ARENA_MAX), unless mallocArenaMax says otherwise', async () => {
  const arenasOf = (objects: Rendered[]): string | undefined =>
    container(find(objects, 'Deployment', 't-operator')).env?.find(
      (e) => e.name === 'MALLOC_ARENA_MAX',
    )?.value;
  expect(arenasOf(await render())).toBe(operatorEnvironment.MALLOC_ARENA_MAX);
  expect(arenasOf(await render('operator.mallocArenaMax='))).toBeUndefined();
  expect(arenasOf(await render('operator.mallocArenaMax=4'))).toBe('4');
});

test("NetworkPolicies admit only the operator's pods, the query servers (and extraIngressFrom) to the receivers' admin port, metricsFrom (everyone by default) to the metrics ports, and queryFrom (everyone by default) to the query servers", async () => {
  const objects = await render();
  const policy = find(objects, 'NetworkPolicy', 't-receivers').spec as {
    podSelector: { matchLabels: Record<string, string> };
    policyTypes: string[];
    ingress: {
      from: { podSelector?: { matchLabels: Record<string, string> } }[];
      ports: unknown[];
    }[];
  };
  const [operator, ...receivers] = workloads(objects);
  for (const r of receivers)
    expect(selects(policy.podSelector, podTemplate(r).metadata?.labels)).toBe(true);
  expect(selects(policy.podSelector, podTemplate(operator!).metadata?.labels)).toBe(false);
  expect(policy.policyTypes).toEqual(['Ingress']);
  expect(policy.ingress).toHaveLength(2);
  const [rule, metricsRule] = policy.ingress;
  // The metrics port: from anywhere unless metricsFrom narrows it (a rule without `from`).
  expect(metricsRule).toEqual({ ports: [{ protocol: 'TCP', port: 9090 }] });
  expect(rule!.ports).toEqual([{ protocol: 'TCP', port: 8080 }]);
  expect(rule!.from).toHaveLength(2);
  const query = find(objects, 'Deployment', 't-query');
  expect(selects(rule!.from[0]!.podSelector!, podTemplate(operator!).metadata?.labels)).toBe(true);
  expect(selects(rule!.from[1]!.podSelector!, podTemplate(query).metadata?.labels)).toBe(true);
  for (const r of [...receivers, query])
    expect(selects(rule!.from[0]!.podSelector!, podTemplate(r).metadata?.labels)).toBe(false);
  for (const r of [...receivers, operator!])
    expect(selects(rule!.from[1]!.podSelector!, podTemplate(r).metadata?.labels)).toBe(false);
  // The receivers' container ports are the ones the policy opens.
  for (const r of receivers)
    expect(container(r).ports).toEqual([
      { name: 'admin', containerPort: 8080 },
      { name: 'metrics', containerPort: 9090 },
    ]);

  const opened = await render(
    'receivers.port=9000',
    'networkPolicy.extraIngressFrom[0].namespaceSelector.matchLabels.team=monitoring',
  );
  const openedRule = (find(opened, 'NetworkPolicy', 't-receivers').spec as typeof policy)
    .ingress[0]!;
  expect(openedRule.ports).toEqual([{ protocol: 'TCP', port: 9000 }]);
  expect(openedRule.from[2]).toEqual({
    namespaceSelector: { matchLabels: { team: 'monitoring' } },
  });
  const monitoring = { namespaceSelector: { matchLabels: { team: 'monitoring' } } };
  const narrowed = await render(
    'receivers.metricsPort=9300',
    'networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.team=monitoring',
  );
  expect((find(narrowed, 'NetworkPolicy', 't-receivers').spec as typeof policy).ingress[1]).toEqual(
    { ports: [{ protocol: 'TCP', port: 9300 }], from: [monitoring] },
  );
  expect((find(narrowed, 'NetworkPolicy', 't-operator').spec as typeof policy).ingress).toEqual([
    { ports: [{ protocol: 'TCP', port: 8081 }], from: [monitoring] },
  ]);

  // The query servers: their one port (query API and /metrics), from anywhere unless queryFrom
  // narrows it.
  const queryPolicy = find(objects, 'NetworkPolicy', 't-query').spec as typeof policy;
  expect(selects(queryPolicy.podSelector, podTemplate(query).metadata?.labels)).toBe(true);
  for (const w of workloads(objects))
    expect(selects(queryPolicy.podSelector, podTemplate(w).metadata?.labels)).toBe(false);
  expect(queryPolicy.policyTypes).toEqual(['Ingress']);
  expect(queryPolicy.ingress).toEqual([{ ports: [{ protocol: 'TCP', port: 8082 }] }]);
  expect(container(query).ports).toEqual([{ name: 'query', containerPort: 8082 }]);
  const clients = await render(
    'queryServer.port=8443',
    'networkPolicy.queryFrom[0].namespaceSelector.matchLabels.team=monitoring',
  );
  expect((find(clients, 'NetworkPolicy', 't-query').spec as typeof policy).ingress).toEqual([
    { ports: [{ protocol: 'TCP', port: 8443 }], from: [monitoring] },
  ]);

  const withoutQuery = await render('queryServer.enabled=false');
  expect(
    (find(withoutQuery, 'NetworkPolicy', 't-receivers').spec as typeof policy).ingress[0]!.from,
  ).toHaveLength(1);
  expect(withoutQuery.some((o) => o.metadata?.name === 't-query')).toBe(false);

  const off = await render('networkPolicy.enabled=false');
  expect(off.some((o) => o.kind === 'NetworkPolicy')).toBe(false);
});

interface EgressRule {
  to?: { ipBlock?: { cidr: string }; podSelector?: { matchLabels: Record<string, string> } }[];
  ports: { protocol: string; port: number }[];
}

test('egress, opt-in: each component may reach DNS, the API server and what it needs of Kafka, deep storage (S3) and the receivers, at the CIDRs and ports given', async () => {
  const egressOf = (objects: Rendered[], name: string): EgressRule[] | undefined => {
    const spec = find(objects, 'NetworkPolicy', name).spec as {
      policyTypes: string[];
      egress?: EgressRule[];
    };
    expect([name, spec.policyTypes]).toEqual([
      name,
      spec.egress ? ['Ingress', 'Egress'] : ['Ingress'],
    ]);
    return spec.egress;
  };
  const policies = ['t-receivers', 't-operator', 't-query'];
  const defaults = await render();
  for (const name of policies) expect(egressOf(defaults, name)).toBeUndefined();

  const tcp = (...ports: number[]) => ports.map((port) => ({ protocol: 'TCP', port }));
  const dns = { ports: [{ protocol: 'UDP', port: 53 }, ...tcp(53)] };
  const apiServer = { ports: tcp(443, 6443) };
  const receivers = {
    to: [
      {
        podSelector: {
          matchLabels: {
            'app.kubernetes.io/instance': 't',
            'app.kubernetes.io/component': 'receiver',
          },
        },
      },
    ],
    ports: tcp(8080),
  };
  // Any address on the default ports; deep storage on a claim needs no egress of the pods.
  const open = await render('networkPolicy.egress.enabled=true');
  expect(egressOf(open, 't-receivers')).toEqual([dns, apiServer, { ports: tcp(9092) }]);
  expect(egressOf(open, 't-operator')).toEqual([dns, apiServer, { ports: tcp(9092) }, receivers]);
  expect(egressOf(open, 't-query')).toEqual([dns, apiServer, receivers]);
  // The receivers' policy selects their pods, whose admin port the operator's rule names.
  const [, ...sets] = workloads(open);
  for (const set of sets) {
    expect(selects(receivers.to[0]!.podSelector, podTemplate(set).metadata?.labels)).toBe(true);
    expect(container(set).ports).toContainEqual({ name: 'admin', containerPort: 8080 });
  }

  const kubeDns = { podSelector: { matchLabels: { 'k8s-app': 'kube-dns' } } };
  const narrowed = await render(
    'networkPolicy.egress.enabled=true',
    'networkPolicy.egress.dns.to[0].podSelector.matchLabels.k8s-app=kube-dns',
    'networkPolicy.egress.apiServer.cidrs={10.0.0.10/32}',
    'networkPolicy.egress.apiServer.ports={6443}',
    'networkPolicy.egress.kafka.cidrs={10.1.0.0/16,fd00::/8}',
    'networkPolicy.egress.kafka.ports={9093,9094}',
    'networkPolicy.egress.deepStorage.cidrs={192.168.7.0/24}',
    'networkPolicy.egress.deepStorage.ports={9000}',
    'deepStorage.type=s3',
    'deepStorage.s3.bucket=lake',
    'receivers.port=9443',
  );
  const to = (...cidrs: string[]) => cidrs.map((cidr) => ({ ipBlock: { cidr } }));
  const dnsTo = { ...dns, to: [kubeDns] };
  const api = { ports: tcp(6443), to: to('10.0.0.10/32') };
  const kafka = { ports: tcp(9093, 9094), to: to('10.1.0.0/16', 'fd00::/8') };
  const s3 = { ports: tcp(9000), to: to('192.168.7.0/24') };
  const receiversAt = { ...receivers, ports: tcp(9443) };
  expect(egressOf(narrowed, 't-receivers')).toEqual([dnsTo, api, kafka, s3]);
  expect(egressOf(narrowed, 't-operator')).toEqual([dnsTo, api, kafka, receiversAt]);
  expect(egressOf(narrowed, 't-query')).toEqual([dnsTo, api, s3, receiversAt]);

  // No rule without a port (it would open every port), no address that is not a CIDR.
  const refused = (...flags: string[]) =>
    helm('template', 't', chart, '--set', 'networkPolicy.egress.enabled=true', ...flags);
  await expect(refused('--set-json', 'networkPolicy.egress.kafka.ports=[]')).rejects.toThrow(
    /networkPolicy\/egress\/kafka\/ports/,
  );
  await expect(
    refused('--set', 'networkPolicy.egress.apiServer.cidrs={kubernetes.default}'),
  ).rejects.toThrow(/networkPolicy\/egress\/apiServer\/cidrs/);
});

test("a Service serves the operator's metrics; ServiceMonitors or PodMonitors only when enabled, selecting what serves /metrics", async () => {
  const plain = await render();
  const service = find(plain, 'Service', 't-operator-metrics');
  const operator = find(plain, 'Deployment', 't-operator');
  expect(
    selects(
      { matchLabels: (service.spec as { selector: Record<string, string> }).selector },
      podTemplate(operator).metadata?.labels,
    ),
  ).toBe(true);
  expect(service.spec?.ports).toEqual([{ name: 'metrics', port: 8081, targetPort: 'metrics' }]);
  expect(plain.some((o) => o.apiVersion === 'monitoring.coreos.com/v1')).toBe(false);
  for (const w of workloads(plain).slice(1))
    expect(podTemplate(w).metadata?.annotations).toEqual({
      'prometheus.io/scrape': 'true',
      'prometheus.io/port': '9090',
    });

  const withServiceMonitors = await render(
    'metrics.serviceMonitor.enabled=true',
    'metrics.serviceMonitor.labels.release=prom',
  );
  expect(withServiceMonitors.filter((o) => o.kind === 'PodMonitor')).toEqual([]);
  const services = withServiceMonitors.filter((o) => o.kind === 'Service');
  // A target's labels never override the scrape's (honorLabels: false); only the cube's own
  // `namespace`, renamed exported_namespace by Prometheus, is taken back.
  const endpointOf = (port: string): Record<string, unknown> => ({
    port,
    path: '/metrics',
    interval: '30s',
    honorLabels: false,
    metricRelabelings: [
      {
        sourceLabels: ['exported_namespace'],
        regex: '(.+)',
        targetLabel: 'namespace',
        replacement: '$1',
        action: 'replace',
      },
      { regex: 'exported_namespace', action: 'labeldrop' },
    ],
  });
  for (const [name, port, serving] of [
    ['t-operator', 'metrics', ['t-operator-metrics']],
    ['t-receivers', 'metrics', ['t-0', 't-1']],
    ['t-query', 'query', ['t-query']],
  ] as const) {
    const monitor = find(withServiceMonitors, 'ServiceMonitor', name);
    expect(monitor.metadata?.labels).toMatchObject({ release: 'prom' });
    const spec = monitor.spec as {
      selector: { matchLabels: Record<string, string> };
      endpoints: { port: string; path: string; interval: string }[];
    };
    expect(
      services
        .filter((s) => selects(spec.selector, s.metadata?.labels))
        .map((s) => s.metadata?.name),
    ).toEqual(serving);
    expect(spec.endpoints).toEqual([endpointOf(port)]);
    for (const s of serving)
      expect(
        (find(services, 'Service', s).spec as { ports: { name: string }[] }).ports.map(
          (p) => p.name,
        ),
      ).toContain(port);
  }

  const withPodMonitors = await render('metrics.podMonitor.enabled=true');
  expect(withPodMonitors.filter((o) => o.kind === 'ServiceMonitor')).toEqual([]);
  const pods = [...workloads(withPodMonitors), find(withPodMonitors, 'Deployment', 't-query')];
  for (const [name, port, serving] of [
    ['t-operator', 'metrics', ['t-operator']],
    ['t-receivers', 'metrics', ['t-0', 't-1']],
    ['t-query', 'query', ['t-query']],
  ] as const) {
    const spec = find(withPodMonitors, 'PodMonitor', name).spec as {
      selector: { matchLabels: Record<string, string> };
      podMetricsEndpoints: { port: string }[];
    };
    expect(
      pods
        .filter((w) => selects(spec.selector, podTemplate(w).metadata?.labels))
        .map((w) => w.metadata?.name),
    ).toEqual(serving);
    expect(spec.podMetricsEndpoints).toEqual([endpointOf(port)]);
  }

  await expect(
    render('metrics.serviceMonitor.enabled=true', 'metrics.podMonitor.enabled=true'),
  ).rejects.toThrow(/serviceMonitor or podMonitor, not both/);
});

test('a PrometheusRule and a Grafana dashboard ConfigMap only when enabled, made of the files in the chart', async () => {
  const plain = await render();
  // The one ConfigMap of a plain render holds the ReceiverPool.
  expect(
    plain
      .filter((o) => o.kind === 'PrometheusRule' || o.kind === 'ConfigMap')
      .map((o) => o.metadata?.name),
  ).toEqual(['t-receiver-pool']);
  const rendered = await render(
    'metrics.prometheusRule.enabled=true',
    'metrics.prometheusRule.labels.release=prom',
    'metrics.dashboards.enabled=true',
    'metrics.dashboards.namespace=monitoring',
  );
  const rule = find(rendered, 'PrometheusRule', 't-alerts');
  expect(rule.metadata?.labels).toMatchObject({ release: 'prom' });
  expect(rule.spec).toEqual(load(readFileSync(`${chart}/files/prometheus-rules.yaml`, 'utf8')));
  const alerts = (rule.spec as { groups: { rules: { alert: string }[] }[] }).groups.flatMap((g) =>
    g.rules.map((r) => r.alert),
  );
  for (const alert of [
    'StreamcubeCubeNotReady',
    'StreamcubeCubeDegraded',
    'StreamcubePartitionLagHigh',
    'StreamcubeDataStale',
    'StreamcubeReassignStuck',
    'StreamcubeHandOffFailing',
    'StreamcubeConsumerDown',
    'StreamcubeEventsRejected',
    'StreamcubeOffsetsLost',
    'StreamcubeReconcileErrors',
  ])
    expect(alerts).toContain(alert);
  const dashboard = find(rendered, 'ConfigMap', 't-dashboard');
  expect(dashboard.metadata?.namespace).toBe('monitoring');
  expect(dashboard.metadata?.labels).toMatchObject({ grafana_dashboard: '1' });
  const json = (dashboard as { data?: Record<string, string> }).data?.['streamcube.json'] ?? '';
  expect(JSON.parse(json)).toEqual(
    JSON.parse(readFileSync(`${chart}/files/dashboard.json`, 'utf8')),
  );
});

/** Runs the `helm test` pod's container command here, as the pod would; its exit code and output. */
async function runTestPod(
  pod: Rendered,
  env: Record<string, string>,
): Promise<{ code: number; out: string }> {
  const c = (pod.spec as { containers: V1Container[] }).containers[0]!;
  const [command, ...flags] = c.command!;
  expect(command).toBe('node');
  const child = spawn(process.execPath, [...flags, ...c.args!], {
    env: { ...process.env, ...env },
  });
  let out = '';
  child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
  const code = await new Promise<number>((resolve) => child.once('exit', (n) => resolve(n ?? -1)));
  return { code, out };
}

test('helm test: a hook pod of the chart image asks the Services of the operator and the query service for /readyz, failing unless each answers 200', async () => {
  const objects = await render('operator.metricsPort=9100', 'queryServer.port=9200');
  const pod = find(objects, 'Pod', 't-test-readiness');
  expect(pod.metadata?.annotations).toMatchObject({ 'helm.sh/hook': 'test' });
  const c = (pod.spec as { containers: V1Container[] }).containers[0]!;
  expect(c.image).toBe(container(find(objects, 'Deployment', 't-operator')).image);
  expect(c.securityContext).toMatchObject({
    readOnlyRootFilesystem: true,
    allowPrivilegeEscalation: false,
  });
  const urls = c.env!.find((e) => e.name === 'STREAMCUBE_READYZ_URLS')!.value!;
  // The URLs name the chart's own Services and ports.
  expect(urls).toBe('http://t-operator-metrics:9100/readyz http://t-query:9200/readyz');
  for (const [service, port] of [
    ['t-operator-metrics', 9100],
    ['t-query', 9200],
  ] as const)
    expect(
      (find(objects, 'Service', service).spec as { ports: { port: number }[] }).ports[0]!.port,
    ).toBe(port);
  expect(find(await render('queryServer.enabled=false'), 'Pod', 't-test-readiness')).toMatchObject(
    {},
  );
  expect(
    (await render('queryServer.enabled=false')).find((o) => o.kind === 'Pod')?.spec,
  ).toMatchObject({
    containers: [{ env: [{ value: 'http://t-operator-metrics:8081/readyz' }] }],
  });
  expect((await render('helmTest.enabled=false')).filter((o) => o.kind === 'Pod')).toEqual([]);

  // The script itself, against a server that is ready on one path and not on another.
  const { createServer } = await import('node:http');
  const server = createServer((req, res) =>
    req.url === '/readyz'
      ? res.writeHead(200).end('ok')
      : res.writeHead(503).end('informers not synced'),
  );
  server.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  const { port } = server.address() as { port: number };
  try {
    const ready = await runTestPod(pod, {
      STREAMCUBE_READYZ_URLS: `http://127.0.0.1:${port}/readyz http://127.0.0.1:${port}/readyz`,
    });
    expect(ready.code).toBe(0);
    expect(ready.out).toContain(`http://127.0.0.1:${port}/readyz: 200 ok`);
    const notReady = await runTestPod(pod, {
      STREAMCUBE_READYZ_URLS: `http://127.0.0.1:${port}/readyz http://127.0.0.1:${port}/other`,
    });
    expect(notReady.code).toBe(1);
    expect(notReady.out).toContain(`/other: 503 informers not synced`);
    // A port nothing listens on any more.
    const closed = createServer().listen(0, '127.0.0.1');
    await new Promise((resolve) => closed.once('listening', resolve));
    const closedPort = (closed.address() as { port: number }).port;
    await new Promise((resolve) => closed.close(resolve));
    const unreachable = await runTestPod(pod, {
      STREAMCUBE_READYZ_URLS: `http://127.0.0.1:${closedPort}/readyz`,
    });
    expect(unreachable).toEqual({
      code: 1,
      out: `http://127.0.0.1:${closedPort}/readyz: ECONNREFUSED\n`,
    });
  } finally {
    server.close();
  }
});

/** An alerting rule as the rules file and the PrometheusRule hold it. */
interface AlertRule {
  alert: string;
  expr: string;
  for?: string;
  annotations: Record<string, string>;
}

const alertsOf = (objects: Rendered[]): AlertRule[] =>
  (
    find(objects, 'PrometheusRule', 't-alerts').spec as { groups: { rules: AlertRule[] }[] }
  ).groups.flatMap((g) => g.rules);

test("every alert links its runbook in docs/operations.md; thresholds, for: durations and the runbooks' address come from values", async () => {
  const defaults = alertsOf(await render('metrics.prometheusRule.enabled=true'));
  const operations = readFileSync('docs/operations.md', 'utf8');
  const values = load(readFileSync(`${chart}/values.yaml`, 'utf8')) as {
    metrics: { prometheusRule: { runbookBaseUrl: string; for: Record<string, string> } };
  };
  const { runbookBaseUrl } = values.metrics.prometheusRule;
  expect(runbookBaseUrl).toMatch(/\/docs\/operations\.md$/);
  for (const rule of defaults) {
    expect(rule.annotations.runbook_url).toBe(`${runbookBaseUrl}#${rule.alert.toLowerCase()}`);
    // The anchor GitHub gives a heading is its text in lower case.
    expect(operations).toContain(`\n### ${rule.alert}\n`);
  }
  // Every alert's `for:` is a value (the defaults render the file as it is: the test above).
  expect(Object.keys(values.metrics.prometheusRule.for).sort()).toEqual(
    defaults.map((r) => r.alert).sort(),
  );

  const tuned = alertsOf(
    await renderValues({
      metrics: {
        prometheusRule: {
          enabled: true,
          runbookBaseUrl: 'https://wiki.example/streamcube',
          lagThreshold: 2_500_000,
          rejectedShareThreshold: 0.05,
          for: {
            StreamcubeOffsetsLost: '2m',
            StreamcubeCubeNotReady: '0s',
            StreamcubeCubeDegraded: '1h',
          },
        },
      },
    }),
  );
  const byName = (name: string): AlertRule => tuned.find((r) => r.alert === name)!;
  expect(byName('StreamcubePartitionLagHigh').expr).toContain('> 2500000');
  expect(byName('StreamcubePartitionLagHigh').annotations.description).toContain('2500000');
  expect(byName('StreamcubeEventsRejected').expr).toMatch(/> 0\.05\s*$/);
  expect(byName('StreamcubeEventsRejected').annotations.description).toContain('0.05');
  expect(byName('StreamcubeOffsetsLost').for).toBe('2m');
  expect(byName('StreamcubeCubeNotReady').for).toBeUndefined();
  expect(byName('StreamcubeCubeDegraded').for).toBe('1h');
  expect(byName('StreamcubeReassignStuck').for).toBe('15m');
  expect(byName('StreamcubeCubeDegraded').annotations.runbook_url).toBe(
    'https://wiki.example/streamcube#streamcubecubedegraded',
  );
  for (const [set, message] of [
    [
      'metrics.prometheusRule.for.StreamcubeLagHigh=1m',
      /additional properties 'StreamcubeLagHigh' not allowed/,
    ],
    ['metrics.prometheusRule.for.StreamcubeCubeDegraded=soon', /StreamcubeCubeDegraded/],
    ['metrics.prometheusRule.lagThreshold=0', /lagThreshold/],
  ] as const)
    await expect(render(set)).rejects.toThrow(message);
});

/** `helm template` with a values file made of `values`, as objects. */
async function renderValues(values: Record<string, unknown>): Promise<Rendered[]> {
  const file = join(tempDir('values'), 'values.yaml');
  writeFileSync(file, dump(values));
  const { stdout } = await helm('template', 't', chart, '--namespace', 'chart-ns', '-f', file);
  return withPoolSets(parseRendered(stdout));
}

test("podLabels and podAnnotations reach every pod, a component's own merged over them; the chart's labels win, so selectors still select", async () => {
  const objects = await renderValues({
    podLabels: { team: 'olap', tier: 'all', 'app.kubernetes.io/component': 'mine' },
    podAnnotations: { 'sidecar.istio.io/inject': 'false', 'prometheus.io/scrape': 'false' },
    operator: { podLabels: { tier: 'control' }, podAnnotations: { owner: 'operator-team' } },
    receivers: { podLabels: { tier: 'data' } },
    queryServer: { podAnnotations: { 'sidecar.istio.io/inject': 'true' } },
  });
  const pods = [...workloads(objects), find(objects, 'Deployment', 't-query')];
  const [operator, rsA, rsB, query] = pods.map((w) => podTemplate(w).metadata!);
  expect(operator!.labels).toMatchObject({
    team: 'olap',
    tier: 'control',
    'app.kubernetes.io/component': 'operator',
  });
  expect(operator!.annotations).toEqual({
    'sidecar.istio.io/inject': 'false',
    'prometheus.io/scrape': 'false',
    owner: 'operator-team',
  });
  for (const receiver of [rsA!, rsB!]) {
    expect(receiver.labels).toMatchObject({ team: 'olap', tier: 'data' });
    // The user's annotations win over the chart's own.
    expect(receiver.annotations).toEqual({
      'sidecar.istio.io/inject': 'false',
      'prometheus.io/scrape': 'false',
      'prometheus.io/port': '9090',
    });
  }
  expect(query!.labels).toMatchObject({ team: 'olap', tier: 'all' });
  expect(query!.annotations).toMatchObject({ 'sidecar.istio.io/inject': 'true' });
  for (const w of pods)
    expect(
      selects(
        (w.spec as { selector: { matchLabels: Record<string, string> } }).selector,
        podTemplate(w).metadata?.labels,
      ),
    ).toBe(true);
  // None by default: the operator's pods have no annotations at all.
  expect(podTemplate(find(await render(), 'Deployment', 't-operator')).metadata?.annotations).toBe(
    undefined,
  );
  await expect(render('podLabels.team=1', 'operator.podLabels.x.y=z')).rejects.toThrow(/podLabels/);
});

test('extraObjects: objects and strings of YAML, rendered with tpl', async () => {
  const objects = await renderValues({
    extraObjects: [
      {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: '{{ .Release.Name }}-extra' },
        data: { namespace: '{{ .Release.Namespace }}' },
      },
      'apiVersion: v1\nkind: Secret\nmetadata:\n  name: {{ .Release.Name }}-kafka-user\nstringData: { password: x }\n',
    ],
  });
  expect(find(objects, 'ConfigMap', 't-extra')).toMatchObject({ data: { namespace: 'chart-ns' } });
  expect(find(objects, 'Secret', 't-kafka-user')).toMatchObject({ stringData: { password: 'x' } });
  expect((await render()).filter((o) => o.metadata?.name?.includes('extra'))).toEqual([]);
});

/** A Role `name` in the release namespace with exactly `rules`, bound to the operator alone. */
function expectOperatorRoleInRelease(
  objects: Rendered[],
  name: string,
  rules: { apiGroups: string[]; resources: string[]; resourceNames?: string[]; verbs: string[] }[],
): void {
  const role = find(objects, 'Role', name) as Rendered & { rules: unknown };
  expect(role.metadata?.namespace).toBe('chart-ns');
  expect(role.rules).toEqual(rules);
  const binding = find(objects, 'RoleBinding', name) as Rendered & {
    roleRef: { kind: string; name: string };
    subjects: { name: string; namespace: string }[];
  };
  expect(binding.metadata?.namespace).toBe('chart-ns');
  expect(binding.roleRef).toMatchObject({ kind: 'Role', name });
  expect(binding.subjects).toEqual([
    { kind: 'ServiceAccount', name: 't-operator', namespace: 'chart-ns' },
  ]);
}

test('Leases: a Role and RoleBinding in the release namespace, also when the operator watches every namespace', async () => {
  for (const watchReleaseNamespace of [true, false]) {
    const objects = await render(`operator.watchReleaseNamespace=${watchReleaseNamespace}`);
    const main = find(objects, watchReleaseNamespace ? 'Role' : 'ClusterRole', 't-operator') as {
      rules?: { apiGroups: string[] }[];
    };
    expect(main.rules?.some((r) => r.apiGroups.includes('coordination.k8s.io'))).toBe(false);
    // Only the operator's own Lease, by name (the flag's default), past its creation.
    expect(
      parseOperatorConfig(['--receiver-token-file=/t', '--receiver-plain-http'], {}).leaseName,
    ).toBe('streamcube-operator');
    expectOperatorRoleInRelease(objects, 't-operator-leases', [
      { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['create'] },
      {
        apiGroups: ['coordination.k8s.io'],
        resources: ['leases'],
        resourceNames: ['streamcube-operator'],
        verbs: ['get', 'update'],
      },
    ]);
    expect(
      objects.some((o) => o.kind === 'ClusterRole' && o.metadata?.name === 't-operator-leases'),
    ).toBe(false);
  }
});

test("least privilege: a ServiceAccount per component, receivers with an API token only to get the operator's Lease or source Secrets, scratch volumes bounded, the operator reached on its metrics port only", async () => {
  const defaults = await render();
  const [operator, ...receivers] = workloads(defaults);
  // Each component under its own ServiceAccount, the chart's; none under the namespace's default.
  const query = find(defaults, 'Deployment', 't-query');
  expect(
    [operator!, ...receivers, query].map((w) => [
      w.metadata?.name,
      podTemplate(w).spec!.serviceAccountName,
    ]),
  ).toEqual([
    ['t-operator', 't-operator'],
    ['t-0', 't-receiver'],
    ['t-1', 't-receiver'],
    ['t-query', 't-query'],
  ]);
  expect(
    defaults
      .filter((o) => o.kind === 'ServiceAccount')
      .map((o) => o.metadata?.name)
      .sort(),
  ).toEqual(['t-operator', 't-query', 't-receiver']);
  // By default a receiver may get the one Lease, and checks leader terms against it.
  for (const r of receivers) {
    expect(podTemplate(r).spec!.automountServiceAccountToken).toBe(true);
    expect(podTemplate(r).spec!.serviceAccountName).toBe('t-receiver');
    expect(podTemplate(r).spec!.containers[0]!.args!.join(' ')).toMatch(
      /--leader-lease=[a-z0-9-]+\/streamcube-operator( |$)/,
    );
  }
  expect((find(defaults, 'Role', 't-receiver-lease') as { rules: unknown }).rules).toEqual([
    {
      apiGroups: ['coordination.k8s.io'],
      resources: ['leases'],
      resourceNames: ['streamcube-operator'],
      verbs: ['get'],
    },
  ]);
  const noLease = await render('receivers.leaderLease=false');
  for (const r of workloads(noLease).slice(1)) {
    expect(podTemplate(r).spec!.automountServiceAccountToken).toBe(false);
    expect(podTemplate(r).spec!.containers[0]!.args!.join(' ')).not.toContain('--leader-lease');
  }
  expect(noLease.some((o) => o.metadata?.name === 't-receiver-lease')).toBe(false);
  // The operator talks to the API server.
  expect(podTemplate(operator!).spec!.automountServiceAccountToken).toBeUndefined();
  for (const w of workloads(defaults))
    expect(podTemplate(w).spec!.volumes!.find((v) => v.name === 'tmp')?.emptyDir).toEqual({
      sizeLimit: '256Mi',
    });
  const withSecrets = await render('sourceSecrets.names[0]=kafka-user', 'scratchSizeLimit=1Gi');
  for (const [i, r] of workloads(withSecrets).entries()) {
    if (i > 0) expect(podTemplate(r).spec!.automountServiceAccountToken).toBe(true);
    // The receivers' scratch volume is the pool's.
    expect(podTemplate(r).spec!.volumes!.find((v) => v.name === 'tmp')?.emptyDir).toEqual({
      sizeLimit: i > 0 ? '256Mi' : '1Gi',
    });
  }
  // The pool's receivers get an API token only to read the Lease, which source Secrets need.
  await expect(
    render('sourceSecrets.names[0]=kafka-user', 'receivers.leaderLease=false'),
  ).rejects.toThrow(/sourceSecrets\.names with receivers\.leaderLease=false/);
  await expect(render('scratchSizeLimit=lots')).rejects.toThrow(/scratchSizeLimit/);
  const policy = find(defaults, 'NetworkPolicy', 't-operator').spec as {
    podSelector: { matchLabels: Record<string, string> };
    policyTypes: string[];
    ingress: unknown[];
  };
  expect(selects(policy.podSelector, podTemplate(operator!).metadata?.labels)).toBe(true);
  for (const r of receivers)
    expect(selects(policy.podSelector, podTemplate(r).metadata?.labels)).toBe(false);
  expect(policy.policyTypes).toEqual(['Ingress']);
  expect(policy.ingress).toEqual([{ ports: [{ protocol: 'TCP', port: 8081 }] }]);
  expect(container(operator!).ports).toEqual([{ name: 'metrics', containerPort: 8081 }]);
  const off = await render('networkPolicy.enabled=false');
  expect(off.filter((o) => o.kind === 'NetworkPolicy')).toEqual([]);
});

test('receivers: the operator finds them in the release namespace (--receiver-namespace) and reads pods there only, also when it watches every namespace; ReceiverPools and their workloads there too', async () => {
  for (const watchReleaseNamespace of [true, false]) {
    const objects = await render(`operator.watchReleaseNamespace=${watchReleaseNamespace}`);
    expect(container(find(objects, 'Deployment', 't-operator')).args).toContain(
      '--receiver-namespace=chart-ns',
    );
    const main = find(objects, watchReleaseNamespace ? 'Role' : 'ClusterRole', 't-operator') as {
      rules?: { resources: string[] }[];
    };
    expect(main.rules?.some((r) => r.resources.includes('pods'))).toBe(false);
    expectOperatorRoleInRelease(objects, 't-operator-receivers', [
      { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch'] },
    ]);
    expectOperatorRoleInRelease(objects, 't-operator-pools', operatorPoolRules('t-receiver-pool'));
  }
});

/** The names of the Secrets the chart renders. */
const secretNames = (objects: Rendered[]): (string | undefined)[] =>
  objects.filter((o) => o.kind === 'Secret').map((o) => o.metadata?.name);

test('adminToken.existingSecret: no Secret rendered; every pod mounts the named key as the token file', async () => {
  const objects = await render(
    'adminToken.existingSecret=from-vault',
    'adminToken.existingSecretKey=admin',
  );
  expect(secretNames(objects)).toEqual(['t-read-token', 't-receiver-tls']);
  for (const w of workloads(objects)) {
    const volume = podTemplate(w).spec!.volumes!.find((v) => v.name === 'token');
    expect(volume?.secret).toEqual({
      secretName: 'from-vault',
      items: [{ key: 'admin', path: 'token' }],
    });
    expect(container(w).volumeMounts).toContainEqual({
      name: 'token',
      mountPath: '/var/run/streamcube',
      readOnly: true,
    });
  }
  // The default: the chart's own Secret, key `token`, mounted as a directory so updates reach it.
  // Without a cluster to look it up in, each `helm template` makes a new token.
  const [one, two] = await Promise.all([render(), render()]);
  const tokenOf = (objects: Rendered[]): unknown =>
    (find(objects, 'Secret', 't-admin-token') as { data?: { token?: string } }).data?.token;
  expect(tokenOf(one)).not.toEqual(tokenOf(two));
  for (const w of workloads(one)) {
    const volume = podTemplate(w).spec!.volumes!.find((v) => v.name === 'token');
    expect(volume?.secret).toEqual({
      secretName: 't-admin-token',
      items: [{ key: 'token', path: 'token' }],
    });
    expect(container(w).volumeMounts?.find((m) => m.name === 'token')?.subPath).toBeUndefined();
  }
});

test('readToken: the receivers mount the read token, the operator only the admin one; existingSecret names your own', async () => {
  const readVolumeOf = (w: Rendered) =>
    podTemplate(w).spec!.volumes!.find((v) => v.name === 'read-token');
  const defaults = await render();
  expect(find(defaults, 'Secret', 't-read-token')).toBeDefined();
  expect(readVolumeOf(find(defaults, 'Deployment', 't-operator'))).toBeUndefined();
  const own = await render(
    'readToken.existingSecret=from-vault',
    'readToken.existingSecretKey=read',
  );
  expect(secretNames(own)).toEqual(['t-admin-token', 't-receiver-tls']);
  for (const [objects, secret] of [
    [defaults, { secretName: 't-read-token', items: [{ key: 'token', path: 'token' }] }],
    [own, { secretName: 'from-vault', items: [{ key: 'read', path: 'token' }] }],
  ] as const)
    for (const name of ['t-0', 't-1']) {
      const set = find(objects, 'StatefulSet', name);
      expect(readVolumeOf(set)?.secret).toEqual(secret);
      expect(container(set).volumeMounts).toContainEqual({
        name: 'read-token',
        mountPath: '/var/run/streamcube-read',
        readOnly: true,
      });
      const [, ...flags] = container(set).args!;
      expect(parseReceiverConfig(flags, {}).readTokenFile).toBe('/var/run/streamcube-read/token');
    }
});

test("receivers.tls: the receivers serve the admin API with the chart's certificate, which the operator and the query servers verify by its CA and name; probes on the plain metrics port", async () => {
  const objects = await render();
  const secret = find(objects, 'Secret', 't-receiver-tls') as Rendered & {
    type: string;
    data: Record<string, string>;
  };
  expect(secret.type).toBe('kubernetes.io/tls');
  const pem = (key: string): string => Buffer.from(secret.data[key]!, 'base64').toString();
  // The certificate carries the name the callers check, and the CA signed it.
  const cert = new X509Certificate(pem('tls.crt'));
  expect(cert.subjectAltName).toBe('DNS:streamcube-receiver');
  expect(cert.verify(new X509Certificate(pem('ca.crt')).publicKey)).toBe(true);
  expect(cert.checkPrivateKey(createPrivateKey(pem('tls.key')))).toBe(true);
  const [operator, ...receivers] = workloads(objects);
  for (const r of receivers) {
    const [, ...flags] = container(r).args!;
    expect(parseReceiverConfig(flags, {}).tls).toEqual({
      certFile: '/var/run/streamcube-tls/tls.crt',
      keyFile: '/var/run/streamcube-tls/tls.key',
    });
    expect(podTemplate(r).spec!.volumes!.find((v) => v.name === 'tls')?.secret?.secretName).toBe(
      't-receiver-tls',
    );
    expect(container(r).readinessProbe?.httpGet?.port).toBe('metrics');
    expect(container(r).livenessProbe?.httpGet?.port).toBe('metrics');
  }
  const [, ...operatorFlags] = container(operator!).args!;
  const [, ...queryFlags] = container(find(objects, 'Deployment', 't-query')).args!;
  for (const config of [
    parseOperatorConfig(operatorFlags, {}),
    parseQueryServerConfig(queryFlags, {}),
  ])
    expect(config).toMatchObject({
      receiverCaFile: '/var/run/streamcube-receiver-ca/ca.crt',
      receiverServerName: 'streamcube-receiver',
    });
  // cert-manager's Secret instead: none rendered, the same mounts name it.
  const managed = await render('receivers.tls.existingSecret=from-cert-manager');
  expect(managed.some((o) => o.metadata?.name === 't-receiver-tls')).toBe(false);
  expect(
    podTemplate(find(managed, 'Deployment', 't-operator')).spec!.volumes!.find(
      (v) => v.name === 'receiver-ca',
    )?.secret?.secretName,
  ).toBe('from-cert-manager');
  // Off: plain HTTP, no certificate anywhere.
  const plain = await render('receivers.tls.enabled=false');
  expect(plain.some((o) => o.metadata?.name === 't-receiver-tls')).toBe(false);
  expect(
    parseOperatorConfig(container(find(plain, 'Deployment', 't-operator')).args!.slice(1), {})
      .receiverCaFile,
  ).toBeUndefined();
});

test('the operator and the query servers can run under ServiceAccounts made elsewhere', async () => {
  const { stdout } = await helm(
    'template',
    't',
    chart,
    '--set',
    'operator.serviceAccount.create=false',
    '--set',
    'operator.serviceAccount.name=made-elsewhere',
    '--set',
    'queryServer.serviceAccount.create=false',
    '--set',
    'queryServer.serviceAccount.name=queries-elsewhere',
  );
  // Only the receivers' own is made (the chart's, always).
  expect(
    (loadAll(stdout) as (Rendered | null)[])
      .filter((o) => o?.kind === 'ServiceAccount')
      .map((o) => o?.metadata?.name),
  ).toEqual(['t-receiver']);
  expect(stdout).toContain('serviceAccountName: made-elsewhere');
  expect(stdout).toMatch(/subjects:\n\s+- kind: ServiceAccount\n\s+name: made-elsewhere/);
  expect(stdout).toContain('serviceAccountName: queries-elsewhere');
  expect(stdout).toMatch(/subjects:\n\s+- kind: ServiceAccount\n\s+name: queries-elsewhere/);
});

test('source Secrets: the operator and a receiver ServiceAccount may get exactly those names, and the receiver the CubeAssignments, in each namespace listed', async () => {
  const plain = await helm('template', 't', chart, '--set', 'receivers.leaderLease=false');
  expect(plain.stdout).not.toContain('t-source-secrets');
  const objects = await render(
    'sourceSecrets.names={kafka-ca,kafka-user}',
    'sourceSecrets.namespaces={team-a,team-b}',
  );
  for (const namespace of ['team-a', 'team-b']) {
    const role = objects.find(
      (o) =>
        o.kind === 'Role' &&
        o.metadata?.name === 't-source-secrets' &&
        o.metadata.namespace === namespace,
    ) as Rendered & { rules: unknown[] };
    expect(role.rules).toEqual([
      {
        apiGroups: [''],
        resources: ['secrets'],
        resourceNames: ['kafka-ca', 'kafka-user'],
        verbs: ['get'],
      },
      // An assign naming Secrets is checked against the cube's CubeAssignment.
      { apiGroups: ['streamcube.io'], resources: ['cubeassignments'], verbs: ['get'] },
    ]);
    const binding = objects.find(
      (o) =>
        o.kind === 'RoleBinding' &&
        o.metadata?.name === 't-source-secrets' &&
        o.metadata.namespace === namespace,
    ) as Rendered & { subjects: { name: string }[] };
    expect(binding.subjects.map((s) => s.name)).toEqual(['t-operator', 't-receiver']);
  }
  expect(find(objects, 'ServiceAccount', 't-receiver')).toBeDefined();
  const receivers = objects.filter((o) => o.kind === 'StatefulSet');
  expect(receivers.length).toBeGreaterThan(0);
  for (const r of receivers)
    expect(
      (r.spec as { template: { spec: { serviceAccountName?: string } } }).template.spec
        .serviceAccountName,
    ).toBe('t-receiver');
});

test('deepStorage.type=s3: no claim and no volume; the receivers parse the bucket from their flags, credentials from a Secret or the pod identity (IRSA)', async () => {
  const pvc = await render();
  expect(find(pvc, 'PersistentVolumeClaim', 't-deep-storage')).toBeDefined();
  const pvcFlags = container(find(pvc, 'StatefulSet', 't-0')).args!.slice(1);
  expect(parseReceiverConfig(pvcFlags, {}).deepStorage).toEqual({
    type: 'filesystem',
    dir: '/var/lib/streamcube/deep-storage',
  });

  const withSecret = await render(
    'deepStorage.type=s3',
    'deepStorage.s3.bucket=lake',
    'deepStorage.s3.prefix=olap/segments',
    'deepStorage.s3.endpoint=http://seaweedfs.storage:8333',
    'deepStorage.s3.region=eu-west-1',
    'deepStorage.s3.forcePathStyle=true',
    'deepStorage.s3.credentialsSecret=s3-creds',
  );
  expect(withSecret.some((o) => o.kind === 'PersistentVolumeClaim')).toBe(false);
  for (const name of ['t-0', 't-1']) {
    const receiver = container(find(withSecret, 'StatefulSet', name));
    expect(parseReceiverConfig(receiver.args!.slice(1), {}).deepStorage).toEqual({
      type: 's3',
      bucket: 'lake',
      prefix: 'olap/segments',
      endpoint: 'http://seaweedfs.storage:8333',
      region: 'eu-west-1',
      forcePathStyle: true,
    });
    for (const key of ['AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY'])
      expect(receiver.env).toContainEqual({
        name: key,
        valueFrom: { secretKeyRef: { name: 's3-creds', key } },
      });
    expect(receiver.volumeMounts?.map((m) => m.name)).not.toContain('deep-storage');
    expect(
      podTemplate(find(withSecret, 'StatefulSet', name)).spec!.volumes!.map((v) => v.name),
    ).not.toContain('deep-storage');
  }

  // IRSA: no Secret, an annotated ServiceAccount the receivers run under.
  const irsa = await render(
    'deepStorage.type=s3',
    'deepStorage.s3.bucket=lake',
    'receivers.serviceAccount.annotations.eks\\.amazonaws\\.com/role-arn=arn:aws:iam::111122223333:role/streamcube',
  );
  expect(find(irsa, 'ServiceAccount', 't-receiver').metadata?.annotations).toEqual({
    'eks.amazonaws.com/role-arn': 'arn:aws:iam::111122223333:role/streamcube',
  });
  const irsaReceiver = find(irsa, 'StatefulSet', 't-0');
  expect(podTemplate(irsaReceiver).spec!.serviceAccountName).toBe('t-receiver');
  expect(container(irsaReceiver).env?.map((e) => e.name)).not.toContain('AWS_ACCESS_KEY_ID');
  expect(parseReceiverConfig(container(irsaReceiver).args!.slice(1), {}).deepStorage).toEqual({
    type: 's3',
    bucket: 'lake',
    prefix: 'streamcube',
    forcePathStyle: false,
  });
  // No source Secrets: the ServiceAccount gets no Role.
  expect(irsa.some((o) => o.kind === 'Role' && o.metadata?.name === 't-source-secrets')).toBe(
    false,
  );

  // values.schema.json: s3 without a bucket, a bucket S3 refuses, an unknown type.
  for (const [sets, message] of [
    [['deepStorage.type=s3'], /deepStorage\/s3\/bucket/],
    [['deepStorage.type=s3', 'deepStorage.s3.bucket=Not_A_Bucket'], /deepStorage\/s3\/bucket/],
    [['deepStorage.type=gcs'], /deepStorage\/type/],
    [
      ['deepStorage.type=s3', 'deepStorage.s3.bucket=lake', 'deepStorage.s3.endpoint=s3.local'],
      /deepStorage\/s3\/endpoint/,
    ],
  ] as [string[], RegExp][])
    await expect(render(...sets)).rejects.toThrow(message);
});

/** The values of the install test: every option of the chart set to something. */
const everyOption = {
  // The CRD other suites use is already there and no release's: the chart's own CRD is tested by
  // the CRD upgrade test, under a group of its own.
  crds: { enabled: false },
  podLabels: { team: 'olap' },
  podAnnotations: { 'sidecar.istio.io/inject': 'false' },
  extraObjects: [
    { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: '{{ .Release.Name }}-extra' } },
  ],
  imagePullSecrets: [{ name: 'pull-me' }],
  operator: {
    logLevel: 'debug',
    extraArgs: ['--workers=2'],
    extraEnv: [{ name: 'EXTRA', value: 'yes' }],
    nodeSelector: { 'kubernetes.io/os': 'linux' },
    tolerations: [{ key: 'dedicated', operator: 'Exists', effect: 'NoSchedule' }],
    affinity: {
      podAntiAffinity: {
        preferredDuringSchedulingIgnoredDuringExecution: [
          {
            weight: 1,
            podAffinityTerm: {
              topologyKey: 'kubernetes.io/hostname',
              labelSelector: { matchLabels: { 'app.kubernetes.io/component': 'operator' } },
            },
          },
        ],
      },
    },
    topologySpreadConstraints: [
      { maxSkew: 1, topologyKey: 'kubernetes.io/hostname', whenUnsatisfiable: 'ScheduleAnyway' },
    ],
    priorityClassName: 'system-cluster-critical',
  },
  receivers: {
    replicaSets: [{ name: 'rs-x', replicas: 3 }],
    logLevel: 'warn',
    extraArgs: ['--flush-interval=2s'],
    extraEnv: [{ name: 'EXTRA', value: 'yes' }],
    nodeSelector: { 'kubernetes.io/os': 'linux' },
    topologySpreadConstraints: [
      { maxSkew: 1, topologyKey: 'kubernetes.io/hostname', whenUnsatisfiable: 'DoNotSchedule' },
    ],
  },
  networkPolicy: {
    extraIngressFrom: [
      { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } },
    ],
    queryFrom: [
      { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } },
    ],
    egress: {
      enabled: true,
      dns: {
        to: [{ namespaceSelector: {}, podSelector: { matchLabels: { 'k8s-app': 'kube-dns' } } }],
      },
      apiServer: { cidrs: ['10.0.0.10/32'], ports: [6443] },
      kafka: { cidrs: ['10.1.0.0/16'], ports: [9092] },
      deepStorage: { cidrs: ['192.168.7.0/24'], ports: [443] },
    },
  },
  metrics: {
    serviceMonitor: { enabled: true, labels: { release: 'prom' } },
    prometheusRule: { enabled: true, labels: { release: 'prom' } },
    dashboards: { enabled: true, annotations: { grafana_folder: 'streamcube' } },
  },
};

test("the query service: a Deployment under the chart's security context whose flags its parser takes, a Service, a budget and read-only RBAC; none when disabled", async () => {
  const objects = await render(
    'queryServer.maxRows=500',
    'queryServer.cacheBytes=64Mi',
    'queryServer.extraArgs[0]=--receiver-timeout=2s',
  );
  const deployment = find(objects, 'Deployment', 't-query');
  const pod = podTemplate(deployment);
  const c = container(deployment);
  expect(pod.spec?.securityContext).toMatchObject({ runAsNonRoot: true });
  expect(c.securityContext).toMatchObject({
    readOnlyRootFilesystem: true,
    allowPrivilegeEscalation: false,
  });
  expect(c.args![0]).toBe('query-server');
  // A later flag wins: extraArgs come after the chart's own.
  expect(parseQueryServerConfig(c.args!.slice(1), {})).toMatchObject({
    port: 8082,
    namespace: 'chart-ns',
    receiverNamespace: 'chart-ns',
    receiverPort: 8080,
    // The read token, never the admin one; this release's receivers only.
    receiverTokenFile: '/var/run/streamcube-read/token',
    tokenFile: '/var/run/streamcube-read/token',
    receiverSelector: 'app.kubernetes.io/instance=t',
    deepStorage: { type: 'filesystem', dir: '/var/lib/streamcube/deep-storage' },
    receiverTimeoutMs: 2000,
    maxRows: 500,
    cacheBytes: 64 * 2 ** 20,
  });
  expect(pod.spec?.volumes).toContainEqual({
    name: 'deep-storage',
    persistentVolumeClaim: { claimName: 't-deep-storage', readOnly: true },
  });
  expect(c.ports).toEqual([{ name: 'query', containerPort: 8082 }]);
  expect(pod.spec?.volumes?.map((v) => v.name)).not.toContain('token');
  const service = find(objects, 'Service', 't-query');
  expect(
    selects(
      { matchLabels: (service.spec as { selector: Record<string, string> }).selector },
      pod.metadata?.labels,
    ),
  ).toBe(true);
  expect(service.spec?.ports).toEqual([{ name: 'query', port: 8082, targetPort: 'query' }]);
  const budget = find(objects, 'PodDisruptionBudget', 't-query').spec as {
    minAvailable: number;
    selector: { matchLabels: Record<string, string> };
  };
  expect(budget.minAvailable).toBe(1);
  expect(selects(budget.selector, pod.metadata?.labels)).toBe(true);
  expect(pod.spec?.serviceAccountName).toBe('t-query');
  const rules = (name: string) =>
    (
      find(objects, 'Role', name) as unknown as {
        rules: { resources: string[]; verbs: string[] }[];
      }
    ).rules;
  expect(rules('t-query')).toEqual([
    {
      apiGroups: ['streamcube.io'],
      resources: ['cubeassignments'],
      verbs: ['get', 'list', 'watch'],
    },
  ]);
  expect(rules('t-query-receivers')).toEqual([
    { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch'] },
  ]);

  // Deep storage in S3: the receivers' flags and credentials, no claim mounted.
  const s3 = await render(
    'deepStorage.type=s3',
    'deepStorage.s3.bucket=lake',
    'deepStorage.s3.endpoint=http://seaweedfs:8333',
    'deepStorage.s3.forcePathStyle=true',
    'deepStorage.s3.credentialsSecret=s3-creds',
    'operator.watchReleaseNamespace=false',
  );
  const s3Query = container(find(s3, 'Deployment', 't-query'));
  const s3Receiver = container(find(s3, 'StatefulSet', 't-0'));
  expect(parseQueryServerConfig(s3Query.args!.slice(1), {})).toMatchObject({
    namespace: undefined,
    deepStorage: parseReceiverConfig(s3Receiver.args!.slice(1), {}).deepStorage,
  });
  expect(s3Query.env?.filter((e) => e.name.startsWith('AWS_'))).toEqual(
    s3Receiver.env?.filter((e) => e.name.startsWith('AWS_')),
  );
  expect(podTemplate(find(s3, 'Deployment', 't-query')).spec?.volumes?.map((v) => v.name)).toEqual([
    'tmp',
    'read-token',
    'receiver-ca',
  ]);
  expect(find(s3, 'ClusterRole', 't-query')).toBeDefined();

  const one = await render('queryServer.replicas=1');
  expect(one.some((o) => o.kind === 'PodDisruptionBudget' && o.metadata?.name === 't-query')).toBe(
    false,
  );
  const off = await render('queryServer.enabled=false');
  expect(off.filter((o) => o.metadata?.name?.startsWith('t-query'))).toEqual([]);
  await expect(render('queryServer.cacheBytes=lots')).rejects.toThrow(/cacheBytes/);
});

test('helm install creates the operator, RBAC, token, policy, monitors and a ReceiverPool whose sets the API server takes', async () => {
  await applyCrd();
  const dir = tempDir('helm');
  const file = (name: string, text: string): string => {
    writeFileSync(join(dir, name), text);
    return join(dir, name);
  };
  await kubectl(
    'apply',
    '--server-side',
    '-f',
    file(
      'monitoring-crds.json',
      JSON.stringify({ apiVersion: 'v1', kind: 'List', items: prometheusOperatorCrds }),
    ),
  );
  await kubectl(
    'wait',
    '--for=condition=Established',
    'crd/servicemonitors.monitoring.coreos.com',
    'crd/podmonitors.monitoring.coreos.com',
    'crd/prometheusrules.monitoring.coreos.com',
  );
  const namespace = await createNamespace(kc, 'helm');
  const values = file('values.yaml', dump(everyOption));
  /** `helm <verb> sc <chart>` in the namespace with the values above, then `more`. */
  const release = (verb: string, ...more: string[]): ReturnType<typeof helm> =>
    helm(verb, 'sc', chart, '--namespace', namespace, '-f', values, ...more);

  // Every rendered object passes the API server's strict field validation (no unknown field).
  const rendered = await release('template');
  const createStrictly = (name: string, text: string): Promise<string> =>
    kubectl(
      'create',
      '--dry-run=server',
      '--validate=strict',
      '-n',
      namespace,
      '-f',
      file(name, text),
    );
  const dryRun = await createStrictly('rendered.yaml', rendered.stdout);
  for (const name of ['sc-receivers', 'sc-operator', 'sc-query'])
    expect(dryRun).toContain(`networkpolicy.networking.k8s.io/${name} created (server dry run)`);
  expect(dryRun).toContain(
    'servicemonitor.monitoring.coreos.com/sc-receivers created (server dry run)',
  );
  expect(dryRun).toContain(
    'prometheusrule.monitoring.coreos.com/sc-alerts created (server dry run)',
  );
  expect(dryRun).toContain('configmap/sc-dashboard created (server dry run)');
  // ...which does refuse one, in a core object and in a monitor.
  const misspelt = rendered.stdout
    .replace('policyTypes: [Ingress, Egress]', 'policyTypes: [Ingress, Egress]\n  ingres: []')
    .replace('- port: metrics\n      path: /metrics', '- prot: metrics\n      path: /metrics');
  const refused = createStrictly('misspelt.yaml', misspelt);
  await expect(refused).rejects.toThrow(/unknown field "spec.ingres"/);
  await expect(refused).rejects.toThrow(/unknown field "spec.endpoints\[0\].prot"/);

  const installed = await release('install');
  // NOTES.txt: the next steps, with this release's names.
  for (const step of [
    `kubectl -n ${namespace} get cube`,
    `kubectl -n ${namespace} describe cube <name>`,
    `kubectl -n ${namespace} get secret sc-read-token -o jsonpath='{.data.token}' | base64 -d > token`,
    `kubectl -n ${namespace} port-forward service/sc-query 8082:8082`,
    'streamcube query --server http://127.0.0.1:8082 --token-file token -n <namespace> <name>',
    'kubectl apply --server-side',
  ])
    expect(installed.stdout).toContain(step);
  // The helm test pod is a hook: `helm test` creates it, an install does not. (No kubelet runs
  // here, so `helm test` itself is not run: its pod would stay Pending.)
  expect(
    (await kc.makeApiClient(CoreV1Api).listNamespacedPod({ namespace })).items.map(
      (p) => p.metadata?.name,
    ),
  ).toEqual([]);
  // The receivers: a ReceiverPool in the ConfigMap sc-receiver-pool, not a resource of the
  // release; the operator applies it (none runs here: its apply, called as the leader does, and no
  // StatefulSet is made). The old values' one set keeps its name as the pool's first set.
  const apps = kc.makeApiClient(AppsV1Api);
  expect((await apps.listNamespacedStatefulSet({ namespace })).items).toEqual([]);
  // (No document of that kind; the CRD names the kind indented.)
  expect((await helm('get', 'manifest', 'sc', '--namespace', namespace)).stdout).not.toMatch(
    /^kind: ReceiverPool$/m,
  );
  expect(await applyChartPoolAsLeader(kc, namespace, 'sc-receiver-pool')).toMatchObject({
    outcome: 'applied',
    pool: 'sc',
    sets: 1,
    setsFrom: 'chart',
  });
  const pool = JSON.parse(
    await kubectl('get', 'receiverpool', 'sc', '--namespace', namespace, '-o', 'json'),
  ) as ReceiverPool;
  expect(pool.spec).toMatchObject({
    sets: 1,
    replicas: 3,
    setNames: ['rs-x'],
    podLabels: { team: 'olap', 'app.kubernetes.io/instance': 'sc' },
    scheduling: {
      nodeSelector: { 'kubernetes.io/os': 'linux' },
      topologySpreadConstraints: [
        { maxSkew: 1, topologyKey: 'kubernetes.io/hostname', whenUnsatisfiable: 'DoNotSchedule' },
      ],
    },
  });
  // What the operator applies for it passes the API server's strict validation too.
  const set = renderSet(pool, 0);
  expect(set.statefulSet.metadata?.name).toBe('sc-rs-x');
  expect(
    set.statefulSet.spec?.template.spec?.topologySpreadConstraints?.[0]?.labelSelector,
  ).toEqual({ matchLabels: { 'streamcube.io/pool': 'sc', 'streamcube.io/replica-set': 'rs-x' } });
  await createStrictly(
    'pool-set.json',
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'List',
      items: [set.service, set.podDisruptionBudget, set.statefulSet].map((o) => ({
        ...o,
        metadata: { ...o.metadata, ownerReferences: undefined },
      })),
    }),
  );
  // One budget for the operators (two replicas by default) and one for the query servers; the
  // sets' are the operator's.
  const budgets = await kc
    .makeApiClient(PolicyV1Api)
    .listNamespacedPodDisruptionBudget({ namespace });
  expect(
    budgets.items.map((b) => [b.metadata?.name, b.spec?.maxUnavailable, b.spec?.minAvailable]),
  ).toEqual([
    ['sc-operator', undefined, 1],
    ['sc-query', undefined, 1],
  ]);
  const operator = await apps.readNamespacedDeployment({ name: 'sc-operator', namespace });
  expect(operator.spec?.template.spec?.containers[0]?.args).toContain(`--namespace=${namespace}`);
  expect(operator.spec?.template.spec?.priorityClassName).toBe('system-cluster-critical');
  const secret = await kc
    .makeApiClient(CoreV1Api)
    .readNamespacedSecret({ name: 'sc-admin-token', namespace });
  const token = Buffer.from(secret.data?.token ?? '', 'base64').toString();
  expect(token).toHaveLength(40);
  const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
  const role = await rbac.readNamespacedRole({ name: 'sc-operator', namespace });
  expect(role.rules?.some((r) => r.resources?.includes('cubeassignments/status'))).toBe(true);
  const leases = await rbac.readNamespacedRole({ name: 'sc-operator-leases', namespace });
  expect(leases.rules?.[0]?.resources).toEqual(['leases']);
  await rbac.readNamespacedRoleBinding({ name: 'sc-operator-leases', namespace });
  const policy = await kc
    .makeApiClient(NetworkingV1Api)
    .readNamespacedNetworkPolicy({ name: 'sc-receivers', namespace });
  expect(policy.spec?.ingress?.[0]?._from).toHaveLength(3);
  await kc
    .makeApiClient(CoreV1Api)
    .readNamespacedService({ name: 'sc-operator-metrics', namespace });
  const monitors = async (): Promise<string> =>
    kubectl('get', 'servicemonitors,podmonitors', '--namespace', namespace, '-o', 'name');
  expect((await monitors()).split('\n').filter(Boolean).sort()).toEqual([
    'servicemonitor.monitoring.coreos.com/sc-operator',
    'servicemonitor.monitoring.coreos.com/sc-query',
    'servicemonitor.monitoring.coreos.com/sc-receivers',
  ]);

  // Rendering against the cluster (what `helm upgrade` does) looks the token up instead of
  // generating one, so running pods keep theirs.
  const againstCluster = await release(
    'template',
    '--dry-run=server',
    '--show-only',
    'templates/admin-token.yaml',
  );
  expect(againstCluster.stdout).toContain(`token: ${secret.data?.token}`);

  // An upgrade keeps the token (lookup); switching to PodMonitors removes the ServiceMonitors.
  await release(
    'upgrade',
    '--set',
    'metrics.serviceMonitor.enabled=false',
    '--set',
    'metrics.podMonitor.enabled=true',
  );
  const after = await kc
    .makeApiClient(CoreV1Api)
    .readNamespacedSecret({ name: 'sc-admin-token', namespace });
  expect(Buffer.from(after.data?.token ?? '', 'base64').toString()).toBe(token);
  expect((await monitors()).split('\n').filter(Boolean).sort()).toEqual([
    'podmonitor.monitoring.coreos.com/sc-operator',
    'podmonitor.monitoring.coreos.com/sc-query',
    'podmonitor.monitoring.coreos.com/sc-receivers',
  ]);
  await helm('uninstall', 'sc', '--namespace', namespace);
  // The Secret outlives the release (helm.sh/resource-policy: keep): a reinstall keeps the token.
  const kept = await kc
    .makeApiClient(CoreV1Api)
    .readNamespacedSecret({ name: 'sc-admin-token', namespace });
  expect(kept.data?.token).toBe(secret.data?.token);
});

/**
 * The CRD under a group of its own (so the CRD other suites use stays as is), and the one of a
 * release before: a spec field (rejectedEventsThreshold) fewer.
 */
function crdUnderOwnGroup(prefix: string): {
  current: CustomResourceDefinition;
  previous: CustomResourceDefinition;
  name: string;
} {
  const group = `${prefix}-${Date.now().toString(36)}.streamcube.test`;
  const current = load(
    readFileSync(crdFile, 'utf8').replaceAll('streamcube.io', group),
  ) as CustomResourceDefinition;
  // No short name or category of its own: `kubectl get cube` in suites running meanwhile (and
  // kubectl's discovery cache, for minutes after) must still find the real CRD, not this copy.
  delete current.spec.names.shortNames;
  delete current.spec.names.categories;
  const previous = structuredClone(current);
  delete previous.spec.versions[0]!.schema.openAPIV3Schema.properties.spec.properties
    .rejectedEventsThreshold;
  return { current, previous, name: current.metadata.name };
}

test('CRD upgrade path without Helm: kubectl apply --server-side --force-conflicts upgrades a CRD that an older chart created from crds/', async () => {
  const { current, previous, name } = crdUnderOwnGroup('upgrade');
  // The release before had one printer column fewer too.
  const version = previous.spec.versions[0]!;
  version.additionalPrinterColumns = version.additionalPrinterColumns!.filter(
    (c) => c.name !== 'Strategy',
  );
  const dir = tempDir('crd-upgrade');
  const write = (file: string, crd: CustomResourceDefinition): string => {
    writeFileSync(join(dir, file), JSON.stringify(crd));
    return join(dir, file);
  };
  // What `helm install` of an older chart did with crds/: create it (helm is its field manager).
  await kubectl('create', '--field-manager=helm', '-f', write('previous.json', previous));
  const upgraded = write('current.json', current);
  try {
    const served = async (): Promise<CustomResourceDefinition> =>
      JSON.parse(await kubectl('get', 'crd', name, '-o', 'json')) as CustomResourceDefinition;
    const columns = async (): Promise<string[]> =>
      (await served()).spec.versions[0]!.additionalPrinterColumns!.map((c) => c.name);
    expect(await columns()).not.toContain('Strategy');
    // Without --force-conflicts the fields helm owns and the new file changes are conflicts.
    await expect(kubectl('apply', '--server-side', '-f', upgraded)).rejects.toThrow(/conflict/i);
    await kubectl('apply', '--server-side', '--force-conflicts', '-f', upgraded);
    expect(await columns()).toContain('Strategy');
    expect(
      (await served()).spec.versions[0]!.schema.openAPIV3Schema.properties.spec.properties,
    ).toHaveProperty('rejectedEventsThreshold');
    // Applying the same file again changes nothing and needs no force.
    await kubectl('apply', '--server-side', '-f', upgraded);
  } finally {
    await kubectl('delete', 'crd', name, '--wait=false');
  }
});

test('helm upgrade updates the CRD: an older release adopted from crds/, upgraded to the current chart; helm uninstall keeps it', async () => {
  // The chart copies hold the CRD template alone (with the chart's values and schema).
  const { current, previous, name } = crdUnderOwnGroup('helm');
  const dir = tempDir('crd-helm');
  const chartWith = (release: string, crd: CustomResourceDefinition): string => {
    const copy = join(dir, release);
    cpSync(chart, copy, { recursive: true });
    rmSync(join(copy, 'templates'), { recursive: true });
    cpSync(join(chart, 'templates', '_helpers.tpl'), join(copy, 'templates', '_helpers.tpl'));
    writeFileSync(
      join(copy, 'templates', 'crd.yaml'),
      cubeAssignmentCrdHelmTemplate(dump(JSON.parse(JSON.stringify(crd)))),
    );
    return copy;
  };
  const served = async (): Promise<CustomResourceDefinition & { metadata: object }> =>
    JSON.parse(await kubectl('get', 'crd', name, '-o', 'json')) as CustomResourceDefinition;
  const specFields = async (): Promise<string[]> =>
    Object.keys(
      (await served()).spec.versions[0]!.schema.openAPIV3Schema.properties.spec.properties,
    );
  const namespace = await createNamespace(kc, 'crd-helm');
  try {
    // A release of a chart that had the CRD in crds/: created by helm, not recorded as the
    // release's. Helm refuses to take it over until it is adopted as the chart README says.
    writeFileSync(join(dir, 'previous.json'), JSON.stringify(previous));
    await kubectl('create', '--field-manager=helm', '-f', join(dir, 'previous.json'));
    const older = chartWith('older', previous);
    await expect(helm('install', 'crd', older, '--namespace', namespace)).rejects.toThrow(
      /invalid ownership metadata/,
    );
    await kubectl(
      'annotate',
      'crd',
      name,
      'meta.helm.sh/release-name=crd',
      `meta.helm.sh/release-namespace=${namespace}`,
    );
    await kubectl('label', 'crd', name, 'app.kubernetes.io/managed-by=Helm');
    await helm('install', 'crd', older, '--namespace', namespace);
    expect(await specFields()).not.toContain('rejectedEventsThreshold');

    await helm('upgrade', 'crd', chartWith('current', current), '--namespace', namespace);
    expect(await specFields()).toContain('rejectedEventsThreshold');
    expect((await served()).metadata).toMatchObject({
      annotations: { 'helm.sh/resource-policy': 'keep' },
    });

    await helm('uninstall', 'crd', '--namespace', namespace);
    expect(await specFields()).toContain('rejectedEventsThreshold');
  } finally {
    await kubectl('delete', 'crd', name, '--wait=false');
  }
});

const controllerManager = join(binDir(), 'kube-controller-manager');

// The first run on a machine builds kube-controller-manager from the Go module proxy: over two
// minutes on 2 cores beside the other suites (a cold CI ran the aggregated-roles test out of its
// 120 s while it built), so here, with the time it needs, and not in the test.
beforeAll(async () => {
  if (!existsSync(controllerManager))
    await buildFromWrapperModule(
      binDir(),
      'kube-controller-manager',
      'k8s.io/kubernetes/cmd/kube-controller-manager',
      settings.kubernetesVersion,
    );
}, 45 * 60_000);

/**
 * Runs `body` with kube-controller-manager's ClusterRole aggregation controller alone (the
 * environment runs no controller-manager): it copies the rules of labelled ClusterRoles into
 * `view`, `edit` and `admin`, as in any cluster.
 */
async function withClusterRoleAggregation(body: () => Promise<void>): Promise<void> {
  const controller = spawn(
    controllerManager,
    [
      `--kubeconfig=${testEnvironment().kube.kubeconfig}`,
      '--controllers=clusterrole-aggregation',
      '--leader-elect=false',
      '--secure-port=0',
    ],
    { stdio: 'ignore' },
  );
  const exited = new Promise((resolve) => controller.once('exit', resolve));
  try {
    await body();
  } finally {
    controller.kill();
    await exited;
  }
}

/** `kubectl auth can-i` as `user`: true for yes, false for no. */
async function userCan(
  user: string,
  namespace: string,
  ...verbResource: string[]
): Promise<boolean> {
  try {
    return (
      (await kubectl('auth', 'can-i', '--as', user, '-n', namespace, ...verbResource)).trim() ===
      'yes'
    );
  } catch (error) {
    if (/\bno\b/.test(String((error as { stdout?: string }).stdout ?? error))) return false;
    throw error;
  }
}

test("aggregated roles: a user bound to the built-in view may read a namespace's cubes, one bound to edit may change them (never their status); none without rbac.aggregateToDefaultRoles", async () => {
  const release = `agg${Date.now().toString(36)}`;
  const namespace = await createNamespace(kc, 'aggregated');
  const other = await createNamespace(kc, 'aggregated-other');
  const { stdout } = await helm(
    'template',
    release,
    chart,
    '--namespace',
    namespace,
    '--show-only',
    'templates/aggregated-roles.yaml',
  );
  const roles = (loadAll(stdout) as Rendered[]).filter(Boolean);
  expect(
    roles.map((r) => [
      r.metadata?.name,
      r.metadata?.labels?.['rbac.authorization.k8s.io/aggregate-to-view'],
      r.metadata?.labels?.['rbac.authorization.k8s.io/aggregate-to-edit'],
    ]),
  ).toEqual([
    [`${release}-${namespace}-cubes-view`, 'true', undefined],
    [`${release}-${namespace}-cubes-edit`, undefined, 'true'],
  ]);
  await expect(
    helm(
      'template',
      't',
      chart,
      '--show-only',
      'templates/aggregated-roles.yaml',
      '--set',
      'rbac.aggregateToDefaultRoles=false',
    ),
  ).rejects.toThrow(/could not find template/);

  const dir = tempDir('aggregated');
  writeFileSync(join(dir, 'roles.yaml'), stdout);
  const viewer = `viewer-${release}`;
  const editor = `editor-${release}`;
  await kubectl(
    'create',
    'rolebinding',
    'viewers',
    '-n',
    namespace,
    '--clusterrole=view',
    `--user=${viewer}`,
  );
  await kubectl(
    'create',
    'rolebinding',
    'editors',
    '-n',
    namespace,
    '--clusterrole=edit',
    `--user=${editor}`,
  );
  await withClusterRoleAggregation(async () => {
    expect(await userCan(viewer, namespace, 'get', 'cubeassignments.streamcube.io')).toBe(false);
    await kubectl('apply', '-f', join(dir, 'roles.yaml'));
    try {
      await waitFor('the view role to grant cubeassignments', () =>
        userCan(viewer, namespace, 'list', 'cubeassignments.streamcube.io'),
      );
      await waitFor('the edit role to grant cubeassignments', () =>
        userCan(editor, namespace, 'create', 'cubeassignments.streamcube.io'),
      );
      const cube = 'cubeassignments.streamcube.io';
      const status = '--subresource=status';
      const who = (user: string): string => (user === viewer ? 'viewer' : 'editor');
      const where = (ns: string): string => (ns === namespace ? 'own' : 'other');
      const answers: string[] = [];
      for (const [user, ns, verb, ...more] of [
        [viewer, namespace, 'get'],
        [viewer, namespace, 'watch'],
        [viewer, namespace, 'get', status],
        [viewer, namespace, 'create'],
        [viewer, namespace, 'delete'],
        [viewer, other, 'get'],
        [editor, namespace, 'get'],
        [editor, namespace, 'update'],
        [editor, namespace, 'delete'],
        [editor, namespace, 'update', status],
        [editor, other, 'create'],
      ] as [string, string, string, ...string[]][])
        answers.push(
          `${who(user)} ${verb} ${[cube, ...more].join(' ')} in ${where(ns)}: ${await userCan(user, ns, verb, cube, ...more)}`,
        );
      expect(answers).toEqual([
        `viewer get ${cube} in own: true`,
        `viewer watch ${cube} in own: true`,
        `viewer get ${cube} ${status} in own: true`,
        `viewer create ${cube} in own: false`,
        `viewer delete ${cube} in own: false`,
        `viewer get ${cube} in other: false`,
        `editor get ${cube} in own: true`,
        `editor update ${cube} in own: true`,
        `editor delete ${cube} in own: true`,
        `editor update ${cube} ${status} in own: false`,
        `editor create ${cube} in other: false`,
      ]);
    } finally {
      // Taken out of view and edit again before the controller stops, for the suites after this one.
      await kubectl('delete', '-f', join(dir, 'roles.yaml'));
      await waitFor(
        'the view role to forget cubeassignments',
        async () => !(await userCan(viewer, namespace, 'list', 'cubeassignments.streamcube.io')),
      );
    }
  });
});
