// The integration suites of a jest run share one broker and one API server, and jest runs two
// suites at a time. A suite that stops a shared part (chaos restarts the API server) must run
// alone: it holds the environment exclusively, every other suite holds it shared while it runs.
// A readers-writer lock in the environment's directory, made of files: a suite holding it shared
// has a marker there; the exclusive holder has the file `exclusive`. Each side writes its own
// file before it looks for the other's, so of two that come at once one always sees the other.
import { mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

const pollMs = 250;

export interface SuiteLock {
  /** The directory of the lock's files. */
  dir: string;
  /** How long a suite waits for the lock before it goes on without it, saying so. */
  waitMs: number;
  /** Told when a suite went on without the lock. */
  warn: (message: string) => void;
}

/** The lock of the environment a jest run uses (STREAMCUBE_TEST_ENV names its state file). */
export function environmentLock(stateFile: string): SuiteLock {
  return {
    dir: join(dirname(stateFile), 'suite-locks'),
    waitMs: 15 * 60_000,
    warn: (message) => process.stderr.write(`suite lock: ${message}\n`),
  };
}

const exclusiveName = 'exclusive';
const sharedPrefix = 'shared.';

/** Whether process `pid` runs (a marker of a worker that died holds nothing). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Shared markers of live processes. */
function sharedHolders(dir: string): string[] {
  return readdirSync(dir).filter((name) => {
    if (!name.startsWith(sharedPrefix)) return false;
    const pid = Number(name.slice(sharedPrefix.length).split('.')[0]);
    return !Number.isInteger(pid) || alive(pid);
  });
}

/** Whether the exclusive file is there, unless its holder died (then it is removed). */
function exclusiveHeld(dir: string): boolean {
  const file = join(dir, exclusiveName);
  let content: string;
  try {
    content = readFileSync(file, 'utf8').trim();
  } catch {
    return false;
  }
  // Empty: just created, its holder's pid not written yet.
  const pid = Number(content);
  if (content !== '' && Number.isInteger(pid) && !alive(pid)) {
    rmSync(file, { force: true });
    return false;
  }
  return true;
}

/**
 * Holds the lock shared until the returned release is called: waits while a suite holds it
 * exclusively.
 */
export async function holdShared(lock: SuiteLock, suite: string): Promise<() => void> {
  mkdirSync(lock.dir, { recursive: true });
  const marker = join(
    lock.dir,
    `${sharedPrefix}${process.pid}.${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`,
  );
  const deadline = Date.now() + lock.waitMs;
  for (;;) {
    writeFileSync(marker, suite);
    if (!exclusiveHeld(lock.dir)) break;
    rmSync(marker, { force: true });
    if (Date.now() > deadline) {
      lock.warn(`${suite} waited ${lock.waitMs} ms for a suite running alone, and goes on`);
      return () => undefined;
    }
    await sleep(pollMs);
  }
  return () => rmSync(marker, { force: true });
}

/**
 * Holds the lock exclusively until the returned release is called: takes the exclusive file
 * (new shared holders wait from then on), then waits for the shared holders to finish.
 */
export async function holdExclusive(lock: SuiteLock, suite: string): Promise<() => void> {
  mkdirSync(lock.dir, { recursive: true });
  const file = join(lock.dir, exclusiveName);
  const deadline = Date.now() + lock.waitMs;
  for (;;) {
    try {
      writeFileSync(file, String(process.pid), { flag: 'wx' });
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      exclusiveHeld(lock.dir); // removes it when its holder died
    }
    if (Date.now() > deadline) {
      lock.warn(`${suite} waited ${lock.waitMs} ms for another suite running alone, and goes on`);
      return () => undefined;
    }
    await sleep(pollMs);
  }
  const release = (): void => rmSync(file, { force: true });
  while (sharedHolders(lock.dir).length > 0) {
    if (Date.now() > deadline) {
      lock.warn(
        `${suite} waited ${lock.waitMs} ms for ${sharedHolders(lock.dir).join(', ')} to finish, and goes on`,
      );
      break;
    }
    await sleep(pollMs);
  }
  return release;
}
