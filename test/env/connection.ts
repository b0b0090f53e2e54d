// How a test finds the environment that jest's global set-up (or `npm run env:up`) started.
import { readFileSync } from 'node:fs';
import { KubeConfig } from '@kubernetes/client-node';
import type { TestEnvironment } from '../../src/local/environment.ts';

export function testEnvironment(): TestEnvironment {
  const stateFile = process.env.STREAMCUBE_TEST_ENV;
  if (!stateFile) {
    throw new Error(
      'STREAMCUBE_TEST_ENV is not set: run integration tests through jest (its global set-up starts Kafka and the API server)',
    );
  }
  return JSON.parse(readFileSync(stateFile, 'utf8')) as TestEnvironment;
}

/** A KubeConfig for the environment's admin. */
export function adminKubeConfig(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(testEnvironment().kube.kubeconfig);
  return kc;
}
