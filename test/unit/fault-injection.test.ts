// The fault hooks are inert in a product process: STREAMCUBE_FAULT_DIR alone does nothing, only
// with STREAMCUBE_TEST_HOOKS=1 (the test suites' set-up) does a fault file fail its point.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { injectedFault } from '../../src/observability/fault-injection.ts';
import { scratchDirs } from '../support/scratch-dirs.ts';

const scratch = scratchDirs();

const dir = scratch('streamcube-faults-');
writeFileSync(join(dir, 'hand-off-rs-a'), 'deep storage refuses writes\n');
const saved = { ...process.env };
afterEach(() => {
  process.env = { ...saved };
});

test.each([
  ['no variable', {}, undefined],
  ['the directory alone', { STREAMCUBE_FAULT_DIR: dir }, undefined],
  [
    'the directory and the test hooks',
    { STREAMCUBE_FAULT_DIR: dir, STREAMCUBE_TEST_HOOKS: '1' },
    'deep storage refuses writes',
  ],
  [
    'test hooks set to anything else',
    { STREAMCUBE_FAULT_DIR: dir, STREAMCUBE_TEST_HOOKS: 'true' },
    undefined,
  ],
])('%s', (_name, env, expected) => {
  delete process.env.STREAMCUBE_FAULT_DIR;
  delete process.env.STREAMCUBE_TEST_HOOKS;
  Object.assign(process.env, env);
  expect(injectedFault('hand-off-rs-a')?.message).toBe(expected);
  expect(injectedFault('another-point')).toBeUndefined();
});
