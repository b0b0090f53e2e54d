// Temporary directories of the tests. The integration run's global set-up makes one directory per
// run (STREAMCUBE_TEST_SCRATCH) and its teardown removes it, so that what receivers, operators and
// brokers of the suites write goes with it; outside that run, the machine's temporary directory.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Where a test makes its temporary directories: this run's scratch directory if there is one. */
function testTmpdir(): string {
  return process.env.STREAMCUBE_TEST_SCRATCH ?? tmpdir();
}

/** A new directory `streamcube-<prefix>-XXXXXX` in this run's scratch directory. */
export function tempDir(prefix: string): string {
  return mkdtempSync(join(testTmpdir(), `streamcube-${prefix}-`));
}

/** A function making `<tmp>/<prefix>XXXXXX` directories, every one removed after the file's tests. */
export function scratchDirs(): (prefix: string) => string {
  const made: string[] = [];
  afterAll(() => {
    for (const dir of made) rmSync(dir, { recursive: true, force: true });
  });
  return (prefix) => {
    const dir = mkdtempSync(join(testTmpdir(), prefix));
    made.push(dir);
    return dir;
  };
}
