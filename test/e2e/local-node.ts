// `npm run test:e2e`: the end-to-end scenario (./scenario.ts) on the test environment's own
// one-node cluster. Uses the environment of `npm run env:up -- --node` when one runs (not in CI),
// or starts one for the run and stops it afterwards; builds and imports the image either way.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { settings } from '../../src/local/settings.ts';
import {
  type TestEnvironment,
  findRunningEnvironment,
  startEnvironment,
  stopEnvironment,
} from '../../src/local/environment.ts';
import { binDir, ensureHelm, ensurePrometheus } from '../../src/local/controlplane.ts';
import {
  buildStreamcubeImageFrom,
  ensureNodeImages,
  ensurePrometheusImage,
  prometheusImage,
  streamcubeImage,
} from '../../src/local/node/images.ts';
import { importImages } from '../../src/local/node/node.ts';
import { say, step } from '../../src/local/progress.ts';
import { runCommand } from '../../src/local/processes.ts';
import { recycleReleasedVolumes } from '../../src/local/node/storage.ts';
import { runLocalDemoOnNode } from './local-demo-node.ts';
import { previousSources } from './previous-release.ts';

const namespace = process.env.STREAMCUBE_E2E_NAMESPACE || 'streamcube-e2e';
const previousImageName = `${streamcubeImage.repository}:previous`;

async function main(): Promise<number> {
  const t0 = Date.now();
  const running = process.env.CI === 'true' ? undefined : findRunningEnvironment(settings.stateDir);
  let env: TestEnvironment;
  let owned = false;
  if (running?.node) {
    say(`using the environment started by env:up --node in ${settings.stateDir}`);
    env = running;
    // The image from the Dockerfile as the sources are now (layers cached: quick when unchanged).
    await importImages(running.node, await ensureNodeImages());
    // A fresh namespace, and the volumes of the last run's claims free again.
    const kubectl = join(binDir(), 'kubectl');
    await step(`deleting namespace ${namespace} of an earlier run`, () =>
      runCommand(kubectl, [
        '--kubeconfig',
        env.kube.kubeconfig,
        'delete',
        'namespace',
        namespace,
        '--ignore-not-found',
        '--wait',
      ]),
    );
    await recycleReleasedVolumes(env.kube.kubeconfig, kubectl);
  } else {
    env = await startEnvironment(mkdtempSync(join(tmpdir(), 'streamcube-e2e-')), { node: true });
    owned = true;
  }
  say(`environment ready after ${((Date.now() - t0) / 1000).toFixed(1)}s`);
  // The previous release's image, which the scenario installs and upgrades from, and a Prometheus
  // for its monitoring step (./monitoring.ts), on the node beside streamcube's image.
  const previous = previousSources([
    'Dockerfile',
    'package.json',
    'package-lock.json',
    'tsconfig.json',
    'tsconfig.build.json',
    'src',
  ]);
  try {
    await importImages(env.node!, [
      await buildStreamcubeImageFrom(previous.dir, previousImageName, 'streamcube-previous.tar'),
      await ensurePrometheusImage((await ensurePrometheus()).prometheus),
    ]);
  } finally {
    previous.remove();
  }
  Object.assign(process.env, {
    STREAMCUBE_E2E_PREVIOUS_IMAGE: previousImageName,
    STREAMCUBE_E2E_PROMETHEUS_IMAGE: prometheusImage,
    KUBECONFIG: env.kube.kubeconfig,
    STREAMCUBE_E2E_KUBECTL: join(binDir(), 'kubectl'),
    STREAMCUBE_E2E_HELM: await ensureHelm(),
    STREAMCUBE_E2E_BROKERS: env.kafka.bootstrap,
    STREAMCUBE_E2E_IMAGE: `${streamcubeImage.repository}:${streamcubeImage.tag}`,
  });
  try {
    // Imported only now: the scenario reads its settings from the environment when it loads.
    const { runScenario } = await import('./scenario.ts');
    const failed = await runScenario();
    if (failed !== 0) return failed;
    // Then `streamcube local --node` on the same environment, as a user runs the demo there.
    const started = Date.now();
    const problems = await runLocalDemoOnNode(env.dir).catch((error: Error) => [error.message]);
    const took = `(${((Date.now() - started) / 1000).toFixed(1)}s)`;
    if (problems.length > 0) {
      console.log(`[e2e] FAIL streamcube local --node ${took}\n  ${problems.join('\n  ')}`);
      return 1;
    }
    console.log(
      `[e2e] ok   streamcube local --node: installs, answers every event, Ctrl-C ${took}`,
    );
    return 0;
  } finally {
    if (owned && process.env.STREAMCUBE_KEEP_ENV !== 'true') await stopEnvironment(env, true);
    say(`test:e2e took ${((Date.now() - t0) / 1000).toFixed(1)}s`);
  }
}

process.exitCode = await main();
