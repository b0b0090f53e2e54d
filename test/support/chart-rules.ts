// The programs the jest global set-up builds (helm, promtool, Prometheus), and the chart's
// PrometheusRule rendered by `helm template` as a Prometheus rule file, for the suites that check
// the chart's alerts.
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { dump, load } from 'js-yaml';

const run = promisify(execFile);
const chart = 'deploy/helm/streamcube';

/** The path of a program the global set-up built, from the variable it set. */
export function builtBinary(
  name: 'STREAMCUBE_PROMETHEUS' | 'STREAMCUBE_PROMTOOL' | 'STREAMCUBE_HELM',
): string {
  const path = process.env[name];
  if (!path) throw new Error(`${name} is not set: the jest global set-up builds it`);
  return path;
}

/** One rule of the chart's PrometheusRule, as the rule file holds it. */
export interface ChartRule {
  alert?: string;
  record?: string;
  expr: string;
}

/**
 * The chart's PrometheusRule with `--set` values `sets`, written to `file` as a rule file (its spec
 * is one); resolves with the rendered resource's kind.
 */
export async function writeChartRules(file: string, sets: string[] = []): Promise<string> {
  const { stdout } = await run(builtBinary('STREAMCUBE_HELM'), [
    'template',
    'sc',
    chart,
    '--set',
    'metrics.prometheusRule.enabled=true',
    ...sets.flatMap((set) => ['--set', set]),
    '--show-only',
    'templates/prometheus-rule.yaml',
  ]);
  const rule = load(stdout) as { kind: string; spec: { groups: { rules: ChartRule[] }[] } };
  writeFileSync(file, dump(rule.spec));
  return rule.kind;
}
