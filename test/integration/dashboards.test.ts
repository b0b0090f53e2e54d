// The chart's alerts and Grafana dashboard checked against the real thing: the rules the chart
// renders pass `promtool check rules`, and a real Prometheus scraping a running stack (the
// operator, two replica sets of receivers, a cube under load, a reassign) evaluates every alert
// without error and returns series for every dashboard query. The series of partitions that moved
// away and of a deleted cube disappear from the scrape.
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ApiException } from '@kubernetes/client-node';
import { dump, load } from 'js-yaml';
import type { Producer } from 'kafkajs';
import { freePort } from '../../src/local/processes.ts';
import { type ChartRule, builtBinary, writeChartRules } from '../support/chart-rules.ts';
import { cubeApi, waitForSettled } from '../support/cluster.ts';
import { createTopic, windowedSchema } from '../support/events.ts';
import { SteadyLoad } from '../support/load.ts';
import { useOperatorStack } from '../support/operator-stack.ts';
import { QueryServerProcess } from '../support/query-server-process.ts';
import { waitFor } from '../support/wait.ts';
import { tempDir } from '../support/scratch-dirs.ts';

const stack = useOperatorStack({
  name: 'dashboards',
  replicaSets: ['rs-a', 'rs-b'],
  receiver: { idleTimeout: '2s', flushInterval: '500ms' },
});
const { kc, kafka, receivers } = stack;
const cube = 'orders';
const partitions = 4;
const chart = 'deploy/helm/streamcube';
const run = promisify(execFile);

let producer: Producer;
let topic: string;
let load_: SteadyLoad | undefined;
let prometheus: ChildProcess | undefined;
const queryServer = new QueryServerProcess(stack);
let prometheusUrl = '';
const dir = tempDir('dashboards');

/** The rules of the chart's PrometheusRule, as a Prometheus rule file. */
async function renderedRuleFile(...sets: string[]): Promise<string> {
  const file = join(dir, `rules-${sets.length}.yaml`);
  expect(await writeChartRules(file, sets)).toBe('PrometheusRule');
  return file;
}

interface QueryResult {
  status: 'success' | 'error';
  error?: string;
  data?: { resultType: string; result: { metric: Record<string, string> }[] };
}

async function query(expr: string): Promise<QueryResult> {
  const response = await fetch(`${prometheusUrl}/api/v1/query`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ query: expr }),
  });
  return (await response.json()) as QueryResult;
}

/** The series a query returns now; fails on a query Prometheus refuses. */
async function seriesOf(expr: string): Promise<Record<string, string>[]> {
  const answer = await query(expr);
  if (answer.status !== 'success') throw new Error(`${expr}: ${answer.error}`);
  return (answer.data?.result ?? []).map((r) => r.metric);
}

/**
 * A dashboard query as Grafana sends it with "All" selected: the template variables become the
 * chart's allValue `.*`, `$__rate_interval` a window of several scrapes.
 */
function asGrafanaSends(expr: string): string {
  return expr
    .replaceAll('$namespace', '.*')
    .replaceAll('$cube', '.*')
    .replaceAll('$__rate_interval', '1m');
}

/** `label_values(selector, label)` of a template variable, as a query of its own. */
function labelValuesQuery(definition: string): string {
  const match = /^label_values\((.*), *(\w+)\)$/.exec(definition);
  if (!match) throw new Error(`not a label_values() query: ${definition}`);
  return `count by (${match[2]}) (${asGrafanaSends(match[1]!)})`;
}

interface Dashboard {
  panels: { title: string; type: string; targets?: { expr: string }[] }[];
  templating: { list: { name: string; type: string; definition?: string }[] };
}

function receiverTarget(rs: string): string {
  return new URL(receivers[rs]!.baseUrl).host;
}

/** What the chart's monitors render (streamcube.scrapeLabels), in Prometheus's own words. */
const asTheChartScrapes = {
  honor_labels: false,
  metric_relabel_configs: [
    {
      source_labels: ['exported_namespace'],
      regex: '(.+)',
      target_label: 'namespace',
      replacement: '$1',
      action: 'replace',
    },
    { regex: 'exported_namespace', action: 'labeldrop' },
  ],
};

async function startPrometheus(ruleFile: string): Promise<void> {
  const port = await freePort();
  prometheusUrl = `http://127.0.0.1:${port}`;
  const config = join(dir, 'prometheus.yml');
  writeFileSync(
    config,
    dump({
      global: { scrape_interval: '1s', evaluation_interval: '1s' },
      rule_files: [ruleFile],
      scrape_configs: [
        {
          job_name: 'streamcube-operator',
          ...asTheChartScrapes,
          static_configs: [{ targets: [`127.0.0.1:${stack.operator.port}`] }],
        },
        {
          job_name: 'streamcube-receivers',
          ...asTheChartScrapes,
          static_configs: [{ targets: ['rs-a', 'rs-b'].map(receiverTarget) }],
        },
        {
          job_name: 'streamcube-query',
          ...asTheChartScrapes,
          static_configs: [{ targets: [new URL(queryServer.baseUrl).host] }],
        },
      ],
    }),
  );
  const log = openSync(join(dir, 'prometheus.log'), 'a');
  prometheus = spawn(
    builtBinary('STREAMCUBE_PROMETHEUS'),
    [
      `--config.file=${config}`,
      `--storage.tsdb.path=${join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--log.level=warn',
    ],
    { stdio: ['ignore', log, log] },
  );
  closeSync(log);
  await waitFor(
    'prometheus ready',
    async () => {
      if (prometheus?.exitCode !== null)
        throw new Error(`prometheus exited; see ${join(dir, 'prometheus.log')}`);
      return (await fetch(`${prometheusUrl}/-/ready`)).ok;
    },
    30_000,
    200,
  );
}

/** Waits until the operator and rs-a, the cube's first owner, have been scraped with the cube. */
async function waitForScrapes(): Promise<void> {
  await waitFor(
    'the operator and rs-a scraped with the cube',
    async () => {
      const jobs = (await seriesOf(`count by (instance) ({cube="${cube}"})`)).map(
        (s) => s.instance,
      );
      return (
        (jobs.includes(`127.0.0.1:${stack.operator.port}`) &&
          jobs.includes(receiverTarget('rs-a'))) ||
        undefined
      );
    },
    60_000,
    500,
  );
}

beforeAll(async () => {
  producer = kafka.producer();
  await producer.connect();
  topic = await createTopic(stack.admin, partitions);
  // Event time runs ahead of the clock (2 s per round), so one-minute windows seal and hand off;
  // from six hours back it stays behind the clock plus the cube's skew (1h) for the whole suite.
  load_ = new SteadyLoad(producer, topic, partitions);
  load_.start(Date.now() - 6 * 3_600_000);
  await cubeApi(kc).create(stack.namespace, cube, {
    source: { brokers: [stack.env.kafka.bootstrap], topic, startingOffsets: 'earliest' },
    schema: windowedSchema,
    replicaSets: ['rs-a'],
    strategy: 'range',
  });
  await waitForSettled(kc, stack.namespace, cube);
  await queryServer.start();
  await startPrometheus(await renderedRuleFile());
  await waitForScrapes();
});

afterAll(async () => {
  await queryServer.stop();
  await load_?.stop();
  await producer?.disconnect();
  if (prometheus && prometheus.exitCode === null) {
    const exited = new Promise((r) => prometheus!.once('exit', r));
    prometheus.kill('SIGTERM');
    await exited;
  }
});

test('promtool accepts the rules the chart renders', async () => {
  const { stdout } = await run(builtBinary('STREAMCUBE_PROMTOOL'), [
    'check',
    'rules',
    await renderedRuleFile(),
  ]);
  const rules = (
    load(readFileSync(`${chart}/files/prometheus-rules.yaml`, 'utf8')) as {
      groups: { rules: ChartRule[] }[];
    }
  ).groups.flatMap((g) => g.rules);
  expect(stdout).toContain(`SUCCESS: ${rules.length} rules found`);
  // Thresholds and durations from values keep the rules valid.
  const tuned = await run(builtBinary('STREAMCUBE_PROMTOOL'), [
    'check',
    'rules',
    await renderedRuleFile(
      'metrics.prometheusRule.lagThreshold=2500000',
      'metrics.prometheusRule.for.StreamcubeCubeNotReady=0s',
      'metrics.prometheusRule.for.StreamcubeOffsetsLost=90s',
    ),
  ]);
  expect(tuned.stdout).toContain(`SUCCESS: ${rules.length} rules found`);
});

test('after a reassign, a receiver exports only the partitions it owns; every dashboard query returns series', async () => {
  // Half the partitions move from rs-a to rs-b: rs-a must drop their series, not freeze them.
  await cubeApi(kc).patchSpec(stack.namespace, cube, { replicaSets: ['rs-a', 'rs-b'] });
  const settled = await waitForSettled(
    kc,
    stack.namespace,
    cube,
    (c) => Object.keys(c.status?.assignment ?? {}).length === 2,
  );
  const assignment = settled.status!.assignment!;
  expect(assignment['rs-a']!.length + assignment['rs-b']!.length).toBe(partitions);
  expect(assignment['rs-b']!.length).toBeGreaterThan(0);
  for (const rs of ['rs-a', 'rs-b']) {
    const owned = [...assignment[rs]!].map(String).sort();
    await waitFor(
      `${rs} exporting positions of exactly partitions ${owned.join(', ')}`,
      async () => {
        const series = await seriesOf(
          `streamcube_receiver_partition_position{instance="${receiverTarget(rs)}", cube="${cube}"}`,
        );
        const exported = series.map((s) => s.partition!).sort();
        return JSON.stringify(exported) === JSON.stringify(owned) || undefined;
      },
      60_000,
      500,
    );
  }

  const dashboard = JSON.parse(readFileSync(`${chart}/files/dashboard.json`, 'utf8')) as Dashboard;
  const queries = [
    ...dashboard.panels.flatMap((p) =>
      (p.targets ?? []).map((t) => ({ what: `panel "${p.title}"`, expr: asGrafanaSends(t.expr) })),
    ),
    ...dashboard.templating.list
      .filter((v) => v.type === 'query')
      .map((v) => ({ what: `variable $${v.name}`, expr: labelValuesQuery(v.definition!) })),
  ];
  expect(queries.length).toBeGreaterThan(20);
  // The reassign phase has a series only while a move is in flight (a cube at rest exports none):
  // its panels must query without error, and the operator must export the family by that name.
  const duringMoves = (expr: string) => expr.includes('streamcube_reassign_phase');
  for (const q of queries.filter((q) => duringMoves(q.expr))) await seriesOf(q.expr);
  expect(await (await fetch(`http://127.0.0.1:${stack.operator.port}/metrics`)).text()).toContain(
    '# TYPE streamcube_reassign_phase gauge',
  );
  // Rates need two scrapes and the hand-off histograms a hand-off: polled, not assumed. The query
  // row needs queries: one per poll, over committed windows and live ones (the cache hits too).
  const empty = new Set(
    queries.filter((q) => !duringMoves(q.expr)).map((q) => q.what + ': ' + q.expr),
  );
  await waitFor(
    'every dashboard query to return series',
    async () => {
      await queryServer.query(cube, { groupBy: ['country'] });
      for (const q of queries) {
        const key = q.what + ': ' + q.expr;
        if (empty.has(key) && (await seriesOf(q.expr)).length > 0) empty.delete(key);
      }
      return empty.size === 0 || undefined;
    },
    90_000,
    1_000,
  ).catch((error: unknown) => {
    throw new Error(`${(error as Error).message}; no series for:\n${[...empty].join('\n')}`);
  });
  // The partition series carry the labels the dashboard groups by.
  const positions = await seriesOf(`streamcube_receiver_partition_position{cube="${cube}"}`);
  expect(positions.length).toBe(partitions);
  for (const s of positions)
    expect(s).toMatchObject({
      namespace: stack.namespace,
      cube,
      topic,
      job: 'streamcube-receivers',
    });
  // The operator's carry the cube's namespace (its lag waits for a high watermark: polled).
  const operatorLag = await waitFor(
    'the operator exporting the lag of every partition',
    async () => {
      const series = await seriesOf(`streamcube_partition_lag{cube="${cube}"}`);
      return series.length === partitions ? series : undefined;
    },
    30_000,
    500,
  );
  expect(operatorLag.map((s) => s.namespace)).toEqual(
    Array.from({ length: partitions }, () => stack.namespace),
  );
  // The conditions the cube alerts read: Ready and not Degraded, as the status says.
  const conditions = await waitFor(
    'the operator exporting the conditions of the settled cube',
    async () => {
      const series = await seriesOf(`streamcube_cube_condition{cube="${cube}"}`);
      return series.some((s) => s.type === 'Ready' && s.status === 'True') ? series : undefined;
    },
    30_000,
    500,
  );
  expect(conditions.map((s) => [s.namespace, s.type, s.status, s.job]).sort()).toEqual([
    [stack.namespace, 'Degraded', 'False', 'streamcube-operator'],
    [stack.namespace, 'Ready', 'True', 'streamcube-operator'],
  ]);
});

test('every alert evaluates without error in Prometheus, and as a query of its own', async () => {
  const rules = (
    load(readFileSync(`${chart}/files/prometheus-rules.yaml`, 'utf8')) as {
      groups: { rules: ChartRule[] }[];
    }
  ).groups.flatMap((g) => g.rules);
  for (const rule of rules) await seriesOf(rule.expr); // throws on an error
  const evaluated = await waitFor(
    'every rule evaluated',
    async () => {
      const response = await fetch(`${prometheusUrl}/api/v1/rules`);
      const body = (await response.json()) as {
        data: { groups: { rules: { name: string; health: string; lastError?: string }[] }[] };
      };
      const all = body.data.groups.flatMap((g) => g.rules);
      return all.length === rules.length && all.every((r) => r.health !== 'unknown')
        ? all
        : undefined;
    },
    30_000,
    500,
  );
  expect(evaluated.filter((r) => r.health !== 'ok')).toEqual([]);
});

test('a deleted cube leaves no series on the receivers or the operator', async () => {
  await load_?.stop();
  await cubeApi(kc).delete(stack.namespace, cube);
  await waitFor(
    `cube ${cube} gone`,
    async () => {
      try {
        await cubeApi(kc).get(stack.namespace, cube);
        return undefined;
      } catch (error) {
        if (error instanceof ApiException && error.code === 404) return true;
        throw error;
      }
    },
    90_000,
    500,
  );
  // Removed from the exposition, a series goes stale at the next scrape.
  // Except the leader term a receiver keeps for the cube, which outlives its unassign on purpose
  // (a partition moved away and back is fenced too), and the refusals counted against it.
  const fencing = 'streamcube_receiver_(leader_term|stale_leader_requests_total)';
  const ofCube = `count by (job, __name__) ({cube="${cube}", __name__!~"${fencing}"})`;
  await waitFor(
    'the series of the deleted cube to go stale',
    async () => (await seriesOf(ofCube)).length === 0 || undefined,
    30_000,
    500,
  ).catch(async (error: unknown) => {
    throw new Error(`${(error as Error).message}: ${JSON.stringify(await seriesOf(ofCube))}`);
  });
  // Prometheus still scrapes the processes (operator, two receivers, the query server): their
  // own series are there.
  expect((await seriesOf('streamcube_build_info')).length).toBe(4);
});
