// The chart's alerts evaluated by promtool over series written out minute by minute: each fires
// when its condition has held for its `for:`, with the labels and annotations an on-call reads,
// and stays quiet in the states that are normal (a pool applied, a scale-out whose new set is
// still starting, a Draining set). The rule file is the one `helm template` renders.
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { dump } from 'js-yaml';
import { builtBinary, writeChartRules } from '../support/chart-rules.ts';
import { scratchDirs } from '../support/scratch-dirs.ts';

const run = promisify(execFile);
const runbooks = 'https://github.com/streamcube/streamcube/blob/main/docs/operations.md';
const dir = scratchDirs()('streamcube-alert-rules-');

interface AlertTest {
  eval_time: string;
  alertname: string;
  exp_alerts: { exp_labels: Record<string, string>; exp_annotations: Record<string, string> }[];
}

/** `promtool test rules` over the chart's rendered rules: resolves with its output, or throws it. */
async function promtoolTest(
  inputSeries: { series: string; values: string }[],
  alertTests: AlertTest[],
): Promise<string> {
  const rules = join(dir, 'rules.yaml');
  await writeChartRules(rules);
  const tests = join(dir, 'tests.yaml');
  writeFileSync(
    tests,
    dump({
      rule_files: [rules],
      evaluation_interval: '1m',
      tests: [{ interval: '1m', input_series: inputSeries, alert_rule_test: alertTests }],
    }),
  );
  try {
    return (await run(builtBinary('STREAMCUBE_PROMTOOL'), ['test', 'rules', tests])).stdout;
  } catch (error) {
    const { stdout, stderr } = error as { stdout: string; stderr: string };
    throw new Error(`promtool test rules failed:\n${stdout}${stderr}`, { cause: error });
  }
}

test("StreamcubePoolNotApplied fires once the chart's pool has not been applied for 10 minutes", async () => {
  const notApplied = {
    exp_labels: { severity: 'warning', namespace: 'shop', configmap: 'sc-receiver-pool' },
    exp_annotations: {
      summary: "The operator cannot apply the chart's ReceiverPool of ConfigMap sc-receiver-pool",
      description:
        'The values of the last helm upgrade have not reached the pool: the Warning Event PoolNotApplied on ConfigMap sc-receiver-pool in shop names the reason (a field the API server refused, RBAC).',
      runbook_url: `${runbooks}#streamcubepoolnotapplied`,
    },
  };
  const output = await promtoolTest(
    [
      // Refused from minute 2 to minute 19, applied again from minute 20.
      {
        series: 'streamcube_pool_chart_applied{namespace="shop", configmap="sc-receiver-pool"}',
        values: '1 1 0x17 1x10',
      },
      // Another release's pool, applied all along.
      {
        series: 'streamcube_pool_chart_applied{namespace="other", configmap="o-receiver-pool"}',
        values: '1x30',
      },
    ],
    [
      { eval_time: '11m', alertname: 'StreamcubePoolNotApplied', exp_alerts: [] },
      { eval_time: '13m', alertname: 'StreamcubePoolNotApplied', exp_alerts: [notApplied] },
      { eval_time: '19m', alertname: 'StreamcubePoolNotApplied', exp_alerts: [notApplied] },
      { eval_time: '21m', alertname: 'StreamcubePoolNotApplied', exp_alerts: [] },
    ],
  );
  expect(output).toContain('SUCCESS');
});

test('StreamcubePoolSetsNotReady fires for a pool whose Active set lacks Ready receivers for 15 minutes, not for a scale-out or a Draining set', async () => {
  const pool = (name: string, active: string, ready: string, draining = '0x40') => [
    {
      series: `streamcube_pool_sets{namespace="shop", pool="${name}", state="Active"}`,
      values: active,
    },
    {
      series: `streamcube_pool_sets{namespace="shop", pool="${name}", state="Draining"}`,
      values: draining,
    },
    { series: `streamcube_pool_ready_sets{namespace="shop", pool="${name}"}`, values: ready },
  ];
  const output = await promtoolTest(
    [
      // One set of three stops being Ready at minute 5.
      ...pool('broken', '3x40', '3x4 2x35'),
      // Every set Ready all along.
      ...pool('healthy', '2x40', '2x40'),
      // Scaled out at minute 5: the new set is Ready 8 minutes later.
      ...pool('growing', '2x4 3x35', '2x12 3x27'),
      // Scaled in from 3 to 1 at minute 5: two Draining sets, which readySets does not count.
      ...pool('shrinking', '3x4 1x35', '3x4 1x35', '0x4 2x35'),
    ],
    [
      // The scale-out's new set was not Ready for 8 minutes, the broken one for 6 so far.
      { eval_time: '11m', alertname: 'StreamcubePoolSetsNotReady', exp_alerts: [] },
      { eval_time: '19m', alertname: 'StreamcubePoolSetsNotReady', exp_alerts: [] },
      {
        eval_time: '21m',
        alertname: 'StreamcubePoolSetsNotReady',
        exp_alerts: [
          {
            exp_labels: { severity: 'warning', namespace: 'shop', pool: 'broken' },
            exp_annotations: {
              summary: 'ReceiverPool broken has Active replica sets with receivers not Ready (1)',
              description:
                'A set whose receivers are not all Ready serves with fewer copies, or not at all. kubectl describe receiverpool broken -n shop shows each set and its Ready replicas.',
              runbook_url: `${runbooks}#streamcubepoolsetsnotready`,
            },
          },
        ],
      },
    ],
  );
  expect(output).toContain('SUCCESS');
});
