// A `streamcube query-server` process for integration suites: the stack's API server, receivers
// (found as the operator finds them: Ready pods of the namespace) and deep storage directory.
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { freePort } from '../../src/local/processes.ts';
import type { QueryBody } from '../../src/query/request.ts';
import type { CubeAnswer } from '../../src/query/service.ts';
import { testEnvironment } from '../env/connection.ts';
import type { OperatorStack } from './operator-stack.ts';
import { waitFor } from './wait.ts';
import { tempDir } from './scratch-dirs.ts';

const cliPath = resolve(import.meta.dirname, '../../src/cli.ts');

export class QueryServerProcess {
  readonly logFile: string;
  readonly token: string;
  /** The file holding `token`, for `streamcube query --token-file`. */
  tokenFile = '';
  port = 0;
  private child: ChildProcess | undefined;
  private readonly stack: OperatorStack;

  constructor(stack: OperatorStack) {
    this.stack = stack;
    const dir = tempDir('query-server');
    this.logFile = join(dir, 'query-server.log');
    this.token = `${stack.readToken}-query`;
  }

  get baseUrl(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  async start(): Promise<void> {
    const dir = tempDir('query-token');
    // Its own token for its clients; the receivers' read token to call them: never the admin one.
    const tokenFile = join(dir, 'token');
    writeFileSync(tokenFile, `${this.token}\n`);
    this.tokenFile = tokenFile;
    const receiverTokenFile = join(dir, 'receiver-read-token');
    writeFileSync(receiverTokenFile, `${this.stack.readToken}\n`);
    this.port = await freePort();
    const log = openSync(this.logFile, 'a');
    const { receiverPort } = this.stack;
    this.child = spawn(
      process.execPath,
      [
        cliPath,
        'query-server',
        `--kubeconfig=${testEnvironment().kube.kubeconfig}`,
        `--namespace=${this.stack.namespace}`,
        `--receiver-token-file=${receiverTokenFile}`,
        '--receiver-plain-http',
        `--token-file=${tokenFile}`,
        `--receiver-port=${receiverPort}`,
        `--deep-storage-dir=${this.stack.deepStorageDir}`,
        '--receiver-timeout=3s',
        '--host=127.0.0.1',
        `--port=${this.port}`,
      ],
      { stdio: ['ignore', log, log] },
    );
    closeSync(log);
    try {
      await waitFor(
        'query server ready',
        async () => {
          if (this.child?.exitCode !== null || this.child.signalCode !== null)
            throw new Error(`query server exited; see ${this.logFile}`);
          return (await fetch(`${this.baseUrl}/readyz`)).ok;
        },
        30_000,
      );
    } catch (error) {
      const tail = readFileSync(this.logFile, 'utf8').trimEnd().split('\n').slice(-15);
      throw new Error(`${(error as Error).message}; its log ends:\n${tail.join('\n')}`, {
        cause: error,
      });
    }
  }

  /** POST …/query: the status and the parsed body. */
  async post(
    cube: string,
    body: unknown,
    o: { token?: string | undefined; namespace?: string } = {},
  ): Promise<{ status: number; body: unknown }> {
    const namespace = o.namespace ?? this.stack.namespace;
    const response = await fetch(`${this.baseUrl}/v1/namespaces/${namespace}/cubes/${cube}/query`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        ...(o.token === undefined && 'token' in o
          ? {}
          : { authorization: `Bearer ${o.token ?? this.token}` }),
      },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });
    const text = await response.text();
    return { status: response.status, body: JSON.parse(text) as unknown };
  }

  /** POST /v1/namespaces/<ns>/sql (or /v1/sql without a namespace): the status and the body. */
  async sql(
    query: string,
    o: { namespace?: string | null; requireComplete?: boolean } = {},
  ): Promise<{ status: number; body: unknown }> {
    const namespace = o.namespace === undefined ? this.stack.namespace : o.namespace;
    const path = namespace === null ? '/v1/sql' : `/v1/namespaces/${namespace}/sql`;
    const response = await fetch(`${this.baseUrl}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${this.token}` },
      body: JSON.stringify({
        query,
        ...(o.requireComplete === undefined ? {} : { requireComplete: o.requireComplete }),
      }),
    });
    return { status: response.status, body: JSON.parse(await response.text()) as unknown };
  }

  /** An answer that must be 200. */
  async query(cube: string, body: QueryBody): Promise<CubeAnswer> {
    const { status, body: answer } = await this.post(cube, body);
    if (status !== 200)
      throw new Error(`query ${JSON.stringify(body)}: ${status} ${JSON.stringify(answer)}`);
    return answer as CubeAnswer;
  }

  /** `streamcube query` against this server: its exit code and output. */
  async cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
    const run = promisify(execFile);
    try {
      const { stdout, stderr } = await run(process.execPath, [
        cliPath,
        'query',
        `--server=${this.baseUrl}`,
        `--token-file=${this.tokenFile}`,
        `--namespace=${this.stack.namespace}`,
        ...args,
      ]);
      return { code: 0, stdout, stderr };
    } catch (error) {
      const e = error as { code?: number; stdout?: string; stderr?: string };
      return { code: e.code ?? 1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
    }
  }

  async metrics(): Promise<string> {
    return (await fetch(`${this.baseUrl}/metrics`)).text();
  }

  async stop(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await exited;
  }
}
