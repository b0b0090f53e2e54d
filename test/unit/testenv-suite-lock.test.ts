// The test environment's suite lock (test/env/suite-lock.ts): suites share the environment, a
// suite that stops a shared part holds it alone, and files of dead processes hold nothing.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { type SuiteLock, holdExclusive, holdShared } from '../env/suite-lock.ts';

const newLock = (waitMs = 10_000): SuiteLock & { warnings: string[] } => {
  const warnings: string[] = [];
  return {
    dir: mkdtempSync(join(tmpdir(), 'suite-lock-')),
    waitMs,
    warn: (m) => warnings.push(m),
    warnings,
  };
};

/** Settles with the order in which the promises resolved. */
function order(named: Record<string, Promise<unknown>>): Promise<string[]> {
  const seen: string[] = [];
  return Promise.all(Object.entries(named).map(([name, p]) => p.then(() => seen.push(name)))).then(
    () => seen,
  );
}

/** A pid no process has (the kernel's pid_max is at most 2^22). */
const deadPid = 4_194_999;

test('shared holders run together; the exclusive one waits for them, and new shared ones wait for it', async () => {
  const lock = newLock();
  const releaseA = await holdShared(lock, 'a');
  const releaseB = await holdShared(lock, 'b');
  const exclusive = holdExclusive(lock, 'x');
  await sleep(600);
  const late = holdShared(lock, 'c');
  await sleep(600);
  const seen: string[] = [];
  void exclusive.then(() => seen.push('x'));
  void late.then(() => seen.push('c'));
  await sleep(300);
  expect(seen).toEqual([]);
  releaseA();
  await sleep(600);
  expect(seen).toEqual([]);
  releaseB();
  const releaseX = await exclusive;
  await sleep(600);
  expect(seen).toEqual(['x']);
  releaseX();
  (await late)();
  expect(seen).toEqual(['x', 'c']);
  expect(lock.warnings).toEqual([]);
});

test('two exclusive holders take turns', async () => {
  const lock = newLock();
  const first = await holdExclusive(lock, 'x');
  const second = holdExclusive(lock, 'y');
  const seen = order({ y: second });
  await sleep(600);
  first();
  expect(await seen).toEqual(['y']);
  (await second)();
});

test('files of dead processes hold nothing', async () => {
  const lock = newLock(2_000);
  writeFileSync(join(lock.dir, `shared.${deadPid}.gone`), 'a suite of a dead worker');
  writeFileSync(join(lock.dir, 'exclusive'), String(deadPid));
  (await holdShared(lock, 'a'))();
  (await holdExclusive(lock, 'x'))();
  expect(lock.warnings).toEqual([]);
});

test('a holder that never lets go: the waiter goes on after its wait, saying so', async () => {
  const lock = newLock(800);
  await holdShared(lock, 'stuck');
  const release = await holdExclusive(lock, 'x');
  expect(lock.warnings).toEqual([expect.stringContaining('x waited 800 ms for')]);
  release();
});
