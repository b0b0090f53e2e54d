// Receivers as real processes for integration tests: `streamcube receiver` started with its own
// data directory, port and token; killable with SIGKILL and restartable on the same directory.
import {
  type ReceiverTransport,
  plainReceiverTransport,
  tlsReceiverTransport,
} from '../../src/http/tls.ts';
import type { ReceiverCertificates } from './receiver-certificates.ts';
import { type ChildProcess, spawn } from 'node:child_process';
import {
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  writeFileSync,
} from 'node:fs';
import { join, resolve } from 'node:path';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { ReceiverClient } from '../../src/protocol/client.ts';
import { type CubeCheckpoint, readCubeCheckpoint } from '../../src/receiver/cube-store.ts';
import { freePort } from '../../src/local/processes.ts';
import { benchNodeArgs } from './bench-node-args.ts';
import { processExited, processRunning } from './child-process-state.ts';
import { tempDir } from './scratch-dirs.ts';

const cliPath = resolve(import.meta.dirname, '../../src/cli.ts');

export interface ReceiverProcessOptions {
  id: string;
  replicaSet: string;
  /** Shared between receivers of a test so hand-offs land in one place. */
  deepStorageDir: string;
  /** `--data-dir`; a `data` folder beside the receiver's log and token files unless given. */
  dataDir?: string;
  /**
   * Flags naming another deep storage instead of `--deep-storage-dir` (an S3 bucket:
   * `--deep-storage=s3://…`, `--s3-endpoint=…`); `deepStorageDir` is then where the test puts
   * what it downloads from there.
   */
  deepStorage?: string[];
  flushInterval?: string;
  idleTimeout?: string;
  host?: string;
  env?: NodeJS.ProcessEnv;
  /** Admin token; receivers driven by one operator share it. */
  token?: string;
  /** Read token (status and query only); receivers read by one query server share it. */
  readToken?: string;
  /** Serve the admin API over HTTPS with these certificates (the test client trusts their CA). */
  tls?: ReceiverCertificates;
  /** Fixed port (receivers on different loopback addresses share one, as pods do). */
  port?: number;
  /**
   * The namespace of the cubes `client` and `checkpoint` name (default `default`): an operator
   * suite's own, where its CubeAssignments are.
   */
  namespace?: string;
}

export class ReceiverProcess {
  readonly options: ReceiverProcessOptions;
  readonly dataDir: string;
  readonly token: string;
  readonly logFile: string;
  port = 0;
  child: ChildProcess | undefined;
  client!: ReceiverClient;
  /** The file the receiver reads its admin token from; rewrite it to rotate the token. */
  readonly tokenFile: string;
  /** The read token (status and query only), and its file. */
  readonly readToken: string;
  readonly readTokenFile: string;

  constructor(options: ReceiverProcessOptions) {
    this.options = options;
    this.token = options.token ?? randomBytes(24).toString('hex');
    this.port = options.port ?? 0;
    const dir = tempDir(options.id);
    this.dataDir = options.dataDir ?? join(dir, 'data');
    this.logFile = join(dir, 'receiver.log');
    this.tokenFile = join(dir, 'token');
    this.readToken = options.readToken ?? randomBytes(24).toString('hex');
    this.readTokenFile = join(dir, 'read-token');
    mkdirSync(this.dataDir, { recursive: true });
    writeFileSync(this.tokenFile, `${this.token}\n`);
    writeFileSync(this.readTokenFile, `${this.readToken}\n`);
  }

  get namespace(): string {
    return this.options.namespace ?? 'default';
  }

  /** How the test reaches the admin API: plain, or HTTPS trusting the receiver's CA. */
  get transport(): ReceiverTransport {
    if (!this.options.tls) return plainReceiverTransport;
    this.tlsTransport ??= tlsReceiverTransport(this.options.tls.caFile);
    return this.tlsTransport;
  }

  private tlsTransport: (ReceiverTransport & { close: () => void }) | undefined;

  get baseUrl(): string {
    return `${this.transport.scheme}://${this.options.host ?? '127.0.0.1'}:${this.port}`;
  }

  /** Starts (or restarts on the same data directory) and waits for /readyz. */
  async start(extraEnv: NodeJS.ProcessEnv = {}): Promise<void> {
    if (this.port === 0) this.port = await freePort();
    const log = openSync(this.logFile, 'a');
    const o = this.options;
    this.child = spawn(
      process.execPath,
      [
        ...benchNodeArgs('BENCH_RECEIVER_NODE_ARGS'),
        cliPath,
        'receiver',
        `--id=${o.id}`,
        `--replica-set=${o.replicaSet}`,
        `--host=${o.host ?? '127.0.0.1'}`,
        `--port=${this.port}`,
        `--data-dir=${this.dataDir}`,
        ...(o.deepStorage ?? [`--deep-storage-dir=${o.deepStorageDir}`]),
        `--admin-token-file=${this.tokenFile}`,
        `--read-token-file=${this.readTokenFile}`,
        ...(o.tls ? [`--tls-cert-file=${o.tls.certFile}`, `--tls-key-file=${o.tls.keyFile}`] : []),
        `--flush-interval=${o.flushInterval ?? '200ms'}`,
        `--idle-timeout=${o.idleTimeout ?? '10m'}`,
      ],
      { stdio: ['ignore', log, log], env: { ...process.env, ...o.env, ...extraEnv } },
    );
    closeSync(log);
    this.client = new ReceiverClient(this.baseUrl, this.token, undefined, {
      fetch: this.transport.fetch,
      namespace: this.namespace,
    });
    const deadline = Date.now() + 30_000;
    for (;;) {
      if (this.child.exitCode !== null || this.child.signalCode !== null) {
        throw new Error(`receiver ${o.id} exited during start-up; see ${this.logFile}`);
      }
      const ok = await this.transport
        .fetch(`${this.baseUrl}/readyz`)
        .then((r) => r.ok)
        .catch(() => false);
      if (ok) return;
      if (Date.now() > deadline)
        throw new Error(`receiver ${o.id} not ready after 30s; see ${this.logFile}`);
      await sleep(100);
    }
  }

  /** Whether the process was started and has not exited since. */
  get running(): boolean {
    return processRunning(this.child);
  }

  /** Resolves when the process has exited (by itself, say at a fault point, or killed). */
  exited(): Promise<void> {
    return processExited(this.child);
  }

  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    const exited = this.exited();
    this.child?.kill(signal);
    await exited;
  }

  /**
   * Graceful stop (SIGTERM); SIGKILL if the process has not exited after `graceMs`, so that no
   * test leaves a receiver behind. Resolves true when the process exited by itself.
   */
  async stop(graceMs = 30_000): Promise<boolean> {
    const exited = this.exited();
    this.child?.kill('SIGTERM');
    const deadline = new AbortController();
    const inTime = await Promise.race([
      exited.then(() => true),
      sleep(graceMs, false, { signal: deadline.signal }).catch(() => false),
    ]);
    deadline.abort();
    if (!inTime) {
      // Say why in the test's output: a CI run keeps nothing else of the receiver's log.
      const tail = readFileSync(this.logFile, 'utf8').trimEnd().split('\n').slice(-15);
      console.warn(
        `receiver ${this.options.id} still running ${graceMs} ms after SIGTERM; its log ends:\n${tail.join('\n')}`,
      );
      await this.kill('SIGKILL');
    }
    return inTime;
  }

  /** The signal that ended the last run (SIGKILL after a fault point), or null. */
  get exitSignal(): NodeJS.Signals | null {
    return this.child?.signalCode ?? null;
  }

  /** The cube's durable checkpoint as it is on disk, read without asking the process. */
  checkpoint(cube: string, namespace = this.namespace): CubeCheckpoint | undefined {
    return readCubeCheckpoint(join(this.dataDir, 'cubes', namespace, cube));
  }

  /** Fragment files on disk that the checkpoint does not name (written by a flush that died). */
  unlistedFragments(cube: string): string[] {
    const listed = new Set(this.checkpoint(cube)?.segments.flatMap((s) => s.fragments) ?? []);
    const dir = join(this.dataDir, 'cubes', this.namespace, cube, 'fragments');
    return existsSync(dir) ? readdirSync(dir).filter((name) => !listed.has(name)) : [];
  }
}
