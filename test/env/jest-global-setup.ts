// Jest global set-up for the integration suites: reuse an environment started by
// `npm run env:up` if it runs the requested Kafka version, or start a fresh one in a temporary
// directory for this run (always in CI).
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { settings } from '../../src/local/settings.ts';
import {
  type TestEnvironment,
  describeEnvironment,
  environmentVariables,
  findRunningEnvironment,
  startEnvironment,
} from '../../src/local/environment.ts';
import { say } from '../../src/local/progress.ts';
import { ensureHelm, ensurePrometheus } from '../../src/local/controlplane.ts';

/** The env:up environment, if there is one and it runs the Kafka version this run asks for. */
function reusableEnvironment(): TestEnvironment | undefined {
  if (process.env.CI === 'true') return undefined;
  const running = findRunningEnvironment(settings.stateDir);
  if (running && running.kafka.version !== settings.kafkaVersion) {
    say(
      `the env:up environment in ${settings.stateDir} runs Kafka ${running.kafka.version}, this run asks for ${settings.kafkaVersion} (STREAMCUBE_KAFKA_VERSION): starting a fresh one`,
    );
    return undefined;
  }
  return running;
}

export default async function globalSetup(): Promise<void> {
  let env = reusableEnvironment();
  if (env) {
    say(`using the environment started by env:up in ${settings.stateDir}`);
  } else {
    env = await startEnvironment(mkdtempSync(join(tmpdir(), 'streamcube-test-')));
    process.env.STREAMCUBE_TEST_ENV_OWNED = 'true';
  }
  // The chart tests and the e2e suite drive helm; build it once per version (cached).
  process.env.STREAMCUBE_HELM = await ensureHelm();
  // The dashboards suite runs Prometheus and promtool; built once per version (cached).
  const prometheus = await ensurePrometheus();
  process.env.STREAMCUBE_PROMETHEUS = prometheus.prometheus;
  process.env.STREAMCUBE_PROMTOOL = prometheus.promtool;
  Object.assign(process.env, environmentVariables(env));
  // The processes the suites start honour their fault hooks (src/observability/fault-injection.ts).
  process.env.STREAMCUBE_TEST_HOOKS = '1';
  // Every temporary directory the suites make goes under one directory the teardown removes.
  process.env.STREAMCUBE_TEST_SCRATCH = mkdtempSync(join(tmpdir(), 'streamcube-scratch-'));
  say(`test environment:\n${describeEnvironment(env)}`);
}
