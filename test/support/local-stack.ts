// Waiting for a `streamcube local` child to write its stack.json (what it started, where).
import type { ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { tailOf } from '../../src/local/processes.ts';
import { waitFor } from './wait.ts';

/** The stack file `local` writes once it runs; fails with its log's tail if it exits first. */
export function waitForStackFile<T>(
  local: ChildProcess,
  stackFile: string,
  logFile: string,
  timeoutMs: number,
): Promise<T> {
  return waitFor(
    'streamcube local to start',
    () => {
      if (local.exitCode !== null) throw new Error(`local exited:\n${tailOf(logFile)}`);
      return Promise.resolve(
        existsSync(stackFile) ? (JSON.parse(readFileSync(stackFile, 'utf8')) as T) : undefined,
      );
    },
    timeoutMs,
    500,
  );
}
