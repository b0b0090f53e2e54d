// Jest global teardown: stops the environment the set-up started (not one started by env:up).
// With STREAMCUBE_KEEP_ENV=true the data and logs stay for a post-mortem.
import { readFileSync } from 'node:fs';
import { type TestEnvironment, stopEnvironment } from '../../src/local/environment.ts';

export default async function globalTeardown(): Promise<void> {
  const stateFile = process.env.STREAMCUBE_TEST_ENV;
  if (process.env.STREAMCUBE_TEST_ENV_OWNED !== 'true' || !stateFile) return;
  const env = JSON.parse(readFileSync(stateFile, 'utf8')) as TestEnvironment;
  await stopEnvironment(env, process.env.STREAMCUBE_KEEP_ENV !== 'true');
}
