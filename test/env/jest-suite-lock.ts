// Integration suites run two at a time (package.json: --maxWorkers=2) on one shared broker and API
// server. Each holds the environment shared while it runs; a suite that stops a shared part runs
// alone, holding it exclusively (suite-lock.ts). The lock is taken before the suite's own hooks.
import { afterAll, beforeAll, expect } from '@jest/globals';
import { basename } from 'node:path';
import { environmentLock, holdExclusive, holdShared } from './suite-lock.ts';

/**
 * Suites that stop a part every suite shares. None today: chaos, which restarts its broker and its
 * API server, has its own (useOperatorStack's ownBroker and ownControlPlane) and runs beside others.
 */
const runAlone = new Set<string>([]);

const stateFile = process.env.STREAMCUBE_TEST_ENV;
const suite = basename(expect.getState().testPath ?? 'unknown suite');
let release: (() => void) | undefined;

beforeAll(async () => {
  if (!stateFile) return;
  const lock = environmentLock(stateFile);
  release = runAlone.has(suite) ? await holdExclusive(lock, suite) : await holdShared(lock, suite);
}, 20 * 60_000);

afterAll(() => {
  release?.();
  release = undefined;
});
