// Child processes of the test environment: one-shot commands with their output kept for errors,
// long-running services detached into their own process group with output to a log file.
import { spawn } from 'node:child_process';
import { openSync, closeSync, readFileSync, existsSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

export interface RunOptions {
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  /** Called with every line the command prints, on stdout or stderr. */
  onLine?: (line: string) => void;
  /** Written to the command's standard input (which is closed when this is absent). */
  input?: string;
  /** Ends the command (SIGTERM) when aborted, as Ctrl-C of `local` does. */
  signal?: AbortSignal;
}

/** Runs a command to completion; on failure the error carries the command and its last output. */
export function runCommand(
  command: string,
  args: string[],
  options: RunOptions = {},
): Promise<string> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(command, args, {
      cwd: options.cwd,
      env: options.env ?? process.env,
      stdio: [options.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
      ...(options.signal ? { signal: options.signal } : {}),
    });
    if (options.input !== undefined) child.stdin?.end(options.input);
    const output: string[] = [];
    let stdout = '';
    const collect = (chunk: Buffer, isStdout: boolean): void => {
      const text = chunk.toString('utf8');
      if (isStdout) stdout += text;
      for (const line of text.split('\n')) {
        if (line.trim() === '') continue;
        output.push(line);
        if (output.length > 200) output.shift();
        options.onLine?.(line);
      }
    };
    child.stdout?.on('data', (c: Buffer) => collect(c, true));
    child.stderr?.on('data', (c: Buffer) => collect(c, false));
    child.on('error', (err) =>
      reject(new Error(`cannot run ${command}: ${err.message}`, { cause: err })),
    );
    child.on('close', (code, signal) => {
      if (code === 0) resolvePromise(stdout);
      else
        reject(
          new Error(
            `${command} ${args.join(' ')} exited with ${code ?? signal}; last output:\n` +
              output.slice(-40).join('\n'),
          ),
        );
    });
  });
}

/** Starts a long-running service in its own process group, appending its output to `logFile`. */
export function startService(
  command: string,
  args: string[],
  logFile: string,
  env: NodeJS.ProcessEnv = process.env,
): number {
  const fd = openSync(logFile, 'a');
  try {
    const child = spawn(command, args, { detached: true, stdio: ['ignore', fd, fd], env });
    if (child.pid === undefined) throw new Error(`cannot start ${command}`);
    child.unref();
    return child.pid;
  } finally {
    closeSync(fd);
  }
}

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** SIGTERM to the service's process group, then SIGKILL if it is still there after `graceMs`. */
export async function stopService(pid: number, graceMs = 15_000): Promise<void> {
  const signalGroup = (signal: NodeJS.Signals): void => {
    try {
      process.kill(-pid, signal);
    } catch {
      // already gone
    }
  };
  signalGroup('SIGTERM');
  const deadline = Date.now() + graceMs;
  while (isAlive(pid) && Date.now() < deadline) await sleep(100);
  if (isAlive(pid)) signalGroup('SIGKILL');
  while (isAlive(pid)) await sleep(50);
}

/** A TCP port on 127.0.0.1 that nothing listens on right now. */
/**
 * A free loopback port for a service to listen on. Chosen below the kernel's ephemeral range
 * (32768–60999 on Linux): a port from that range can be taken by any outgoing connection — a
 * Kafka client's, say — between this check and the service's bind, which made brokers fail with
 * "Address already in use". Ports handed out once by this process are not handed out again.
 */
export async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = 20_000 + Math.floor(Math.random() * 12_000);
    if (handedOut.has(port) || !(await canListen(port))) continue;
    handedOut.add(port);
    return port;
  }
  throw new Error('no free port between 20000 and 31999 on 127.0.0.1');
}

const handedOut = new Set<number>();

/**
 * Free ports for the services named, the same ones as the last start on `file`'s directory when
 * they are still free: a restarted environment keeps its addresses, so that what its data
 * recorded (the `kubernetes` Service's target port, the brokers' addresses in KRaft metadata)
 * still holds, and so do kubeconfigs handed out.
 */
export async function recordedPorts<N extends string>(
  file: string,
  names: readonly N[],
): Promise<Record<N, number>> {
  let recorded: Record<string, number> = {};
  try {
    recorded = JSON.parse(readFileSync(file, 'utf8')) as Record<string, number>;
  } catch {
    // first start on this directory
  }
  const ports = {} as Record<N, number>;
  for (const name of names) {
    const port = recorded[name];
    if (port !== undefined && !handedOut.has(port) && (await canListen(port))) {
      handedOut.add(port);
      ports[name] = port;
    } else ports[name] = await freePort();
  }
  writeFileSync(file, JSON.stringify({ ...recorded, ...ports }));
  return ports;
}

function canListen(port: number): Promise<boolean> {
  return new Promise((resolvePromise) => {
    const server = createServer();
    server.unref();
    server.once('error', () => resolvePromise(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolvePromise(true)));
  });
}

export function tailOf(file: string, lines = 30): string {
  if (!existsSync(file)) return '(no log)';
  return readFileSync(file, 'utf8').split('\n').slice(-lines).join('\n');
}

/**
 * Polls `probe` until it returns true. Fails early if the service process died, and on timeout,
 * in both cases quoting the end of its log, and stops the service (its whole process group)
 * first: a service that did not start is never left running.
 */
export async function waitForService(
  what: string,
  probe: () => Promise<boolean>,
  service: { pid: number; logFile: string },
  timeoutMs: number,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const fail = async (reason: string): Promise<never> => {
    await stopService(service.pid);
    throw new Error(`${what} ${reason}; log ${service.logFile}:\n${tailOf(service.logFile)}`);
  };
  for (;;) {
    if (!isAlive(service.pid)) return fail('exited during start-up');
    if (await probe().catch(() => false)) return;
    if (Date.now() > deadline) return fail(`not ready after ${timeoutMs / 1000}s`);
    await sleep(250);
  }
}
