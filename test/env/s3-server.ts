// A real S3-compatible server for the deep-storage suites: the Versity S3 Gateway (versitygw,
// Apache-2.0) over a POSIX directory, built once per version from the Go module proxy into the
// cache, started lazily by the suite that needs it on a free loopback port, with real SigV4
// authentication. Stoppable and restartable on the same port and data, as an outage is.
import {
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { goBuild } from '../../src/local/controlplane.ts';
import {
  freePort,
  isAlive,
  startService,
  stopService,
  waitForService,
} from '../../src/local/processes.ts';
import { settings } from '../../src/local/settings.ts';

/** github.com/versity/versitygw: one module, no replace directives, so `go install` builds it. */
export const versitygwVersion = process.env.STREAMCUBE_VERSITYGW_VERSION || 'v1.8.0';

/**
 * Builds versitygw once per version into the cache. Two test processes may ask at once: one builds
 * under a lock file, the other waits for the binary (a lock left by a dead process is taken over).
 */
export async function ensureVersitygw(): Promise<string> {
  const dir = join(settings.cacheDir, 'bin', `versitygw-${versitygwVersion}`);
  const binary = join(dir, 'versitygw');
  if (existsSync(binary)) return binary;
  mkdirSync(join(settings.cacheDir, 'bin'), { recursive: true });
  const lock = `${dir}.lock`;
  for (;;) {
    if (existsSync(binary)) return binary;
    let fd: number;
    try {
      fd = openSync(lock, 'wx');
    } catch {
      const holder = Number(readFileSync(lock, 'utf8').trim() || '0');
      if (holder > 0 && !isAlive(holder)) rmSync(lock, { force: true });
      else await sleep(2_000);
      continue;
    }
    try {
      writeFileSync(fd, String(process.pid));
      closeSync(fd);
      // Into a directory of its own first: a build cut short leaves no binary that counts.
      const building = `${dir}.building-${process.pid}`;
      mkdirSync(building, { recursive: true });
      await goBuild(
        `building versitygw ${versitygwVersion} (S3-compatible server) with Go; the first build takes minutes`,
        [
          'install',
          '-trimpath',
          '-ldflags',
          '-s -w',
          `github.com/versity/versitygw/cmd/versitygw@${versitygwVersion}`,
        ],
        { env: { GOBIN: building } },
      );
      mkdirSync(dir, { recursive: true });
      renameSync(join(building, 'versitygw'), binary);
      rmSync(building, { recursive: true, force: true });
      return binary;
    } finally {
      rmSync(lock, { force: true });
    }
  }
}

export interface S3TestServer {
  /** http://127.0.0.1:<port> */
  endpoint: string;
  region: string;
  accessKeyId: string;
  secretAccessKey: string;
  /** The POSIX directory the gateway serves: one sub-directory per bucket. */
  dataDir: string;
  logFile: string;
  /** Whether the process runs now. */
  running(): boolean;
  /** Starts it again on the same port and data (after `stop`). */
  start(): Promise<void>;
  /** Stops it (SIGTERM, then SIGKILL): clients see connections refused. */
  stop(): Promise<void>;
}

/** Starts a versitygw on a free loopback port with a root user of random keys, serving `dir`. */
export async function startS3Server(dir: string): Promise<S3TestServer> {
  const binary = await ensureVersitygw();
  const port = await freePort();
  const dataDir = join(dir, 'posix');
  mkdirSync(dataDir, { recursive: true });
  const logFile = join(dir, 'versitygw.log');
  const accessKeyId = `sc${randomBytes(8).toString('hex')}`;
  const secretAccessKey = randomBytes(24).toString('hex');
  const endpoint = `http://127.0.0.1:${port}`;
  let pid: number | undefined;
  const server: S3TestServer = {
    endpoint,
    region: 'us-east-1',
    accessKeyId,
    secretAccessKey,
    dataDir,
    logFile,
    running: () => pid !== undefined && isAlive(pid),
    async start() {
      // Keys by environment, not on the command line (ps shows that to every user).
      pid = startService(binary, ['--port', `127.0.0.1:${port}`, 'posix', dataDir], logFile, {
        ...process.env,
        ROOT_ACCESS_KEY_ID: accessKeyId,
        ROOT_SECRET_ACCESS_KEY: secretAccessKey,
      });
      const started = pid;
      // Any HTTP answer (an unsigned request gets 403) means it serves.
      await waitForService(
        `versitygw on ${endpoint}`,
        async () => (await fetch(endpoint)).status > 0,
        { pid: started, logFile },
        60_000,
      );
    },
    async stop() {
      if (pid !== undefined) await stopService(pid);
      pid = undefined;
    },
  };
  await server.start();
  return server;
}
