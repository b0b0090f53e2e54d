// Jest global teardown: removes the run's scratch directory and stops the environment the set-up
// started (not one started by env:up). With STREAMCUBE_KEEP_ENV=true both stay for a post-mortem.
import { readFileSync, rmSync } from 'node:fs';
import { type TestEnvironment, stopEnvironment } from '../../src/local/environment.ts';
import { say } from '../../src/local/progress.ts';

export default async function globalTeardown(): Promise<void> {
  const keep = process.env.STREAMCUBE_KEEP_ENV === 'true';
  const scratch = process.env.STREAMCUBE_TEST_SCRATCH;
  if (scratch && keep) say(`the suites' temporary directories are kept in ${scratch}`);
  else if (scratch) {
    try {
      rmSync(scratch, { recursive: true, force: true, maxRetries: 3 });
    } catch (error) {
      say(`could not remove the suites' temporary directories in ${scratch}: ${String(error)}`);
    }
  }
  const stateFile = process.env.STREAMCUBE_TEST_ENV;
  if (process.env.STREAMCUBE_TEST_ENV_OWNED !== 'true' || !stateFile) return;
  const env = JSON.parse(readFileSync(stateFile, 'utf8')) as TestEnvironment;
  await stopEnvironment(env, !keep);
}
