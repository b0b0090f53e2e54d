// `streamcube local --node` as a user runs it, on the test environment's node: it installs the
// chart, the demo cube becomes Ready and its producer writes; the receivers' answers (kubectl
// port-forward to each receiver pod, the read token) cover every event the producer wrote, tiled,
// and the chart's query service, asked as the command prints (port-forward to its Service),
// answers at least those events, complete; Ctrl-C removes the cube, the release and the namespace,
// and leaves the environment running.
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { tlsReceiverTransport } from '../../src/http/tls.ts';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { DemoLedger } from '../../src/local/demo-data.ts';
import type { NodeStackInfo } from '../../src/local/node-stack.ts';
import { freePort, runCommand, tailOf } from '../../src/local/processes.ts';
import type { QueryResponse } from '../../src/protocol/admin-api.ts';
import { rangesFromJson, tilingProblems } from '../../src/receiver/offset-ranges.ts';
import { waitFor } from '../support/wait.ts';
import { waitForStackFile } from '../support/local-stack.ts';

const cliPath = resolve(import.meta.dirname, '../../src/cli.ts');

/** A port-forward to `target`'s `remotePort` (a receiver pod's admin port by default); stopped by the returned function. */
async function portForward(
  info: NodeStackInfo,
  target: string,
  remotePort = 8080,
): Promise<[number, () => void]> {
  const port = await freePort();
  const child = spawn(
    info.kubectl,
    [
      '--kubeconfig',
      info.kubeconfig,
      '-n',
      info.namespace,
      'port-forward',
      target,
      `${port}:${remotePort}`,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  child.stdout.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr.on('data', (c: Buffer) => (output += c.toString()));
  await waitFor(
    `port-forward to ${target}`,
    () => {
      if (child.exitCode !== null) throw new Error(`port-forward exited: ${output}`);
      return Promise.resolve(output.includes('Forwarding from'));
    },
    30_000,
  );
  return [port, () => child.kill()];
}

/** A key of a Secret of the demo's namespace, decoded (`key` as jsonpath has it: dots escaped). */
async function secretValue(info: NodeStackInfo, name: string, key: string): Promise<string> {
  const kubectl = ['--kubeconfig', info.kubeconfig, '-n', info.namespace];
  const data = await runCommand(info.kubectl, [
    ...kubectl,
    'get',
    'secret',
    name,
    '-o',
    `jsonpath={.data.${key}}`,
  ]);
  return Buffer.from(data, 'base64').toString('utf8');
}

async function query(info: NodeStackInfo, token: string): Promise<QueryResponse[]> {
  // The chart serves the admin API over HTTPS: trust its receiver CA and check the receivers'
  // name, as the operator does.
  const ca = await secretValue(info, `${info.release}-receiver-tls`, 'ca\\.crt');
  const caDir = mkdtempSync(join(tmpdir(), 'streamcube-e2e-ca-'));
  const caFile = join(caDir, 'ca.crt');
  writeFileSync(caFile, ca);
  const transport = tlsReceiverTransport(caFile);
  try {
    return await queryEach(info, token, transport);
  } finally {
    transport.close();
    rmSync(caDir, { recursive: true, force: true });
  }
}

async function queryEach(
  info: NodeStackInfo,
  token: string,
  transport: ReturnType<typeof tlsReceiverTransport>,
): Promise<QueryResponse[]> {
  const answers: QueryResponse[] = [];
  for (const pod of info.receiverPods) {
    const [port, stop] = await portForward(info, `pod/${pod}`);
    try {
      const response = await transport.fetch(
        `https://127.0.0.1:${port}/v1/namespaces/${info.namespace}/cubes/${info.cube}/query`,
        {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ groupBy: ['country'] }),
        },
      );
      if (!response.ok) throw new Error(`${pod}: ${response.status} ${await response.text()}`);
      answers.push((await response.json()) as QueryResponse);
    } finally {
      stop();
    }
  }
  return answers;
}

/** Runs the check; returns the problems found (none: passed). */
export async function runLocalDemoOnNode(envDir: string): Promise<string[]> {
  const logFile = join(envDir, 'local-node-demo.log');
  const log = openSync(logFile, 'a');
  const t0 = Date.now();
  const local: ChildProcess = spawn(process.execPath, [cliPath, 'local', '--node'], {
    env: { ...process.env, STREAMCUBE_ENV_DIR: envDir },
    stdio: ['ignore', log, log],
    detached: true,
  });
  closeSync(log);
  const stackFile = join(envDir, 'local', 'stack.json');
  try {
    const info = await waitForStackFile<NodeStackInfo>(local, stackFile, logFile, 300_000);
    console.log(`[e2e] local --node started in ${((Date.now() - t0) / 1000).toFixed(1)}s`);
    const token = await secretValue(info, info.tokenSecret, 'token');
    await sleep(20_000);
    const before = JSON.parse(readFileSync(info.ledgerFile, 'utf8')) as DemoLedger;
    await sleep(5_000);
    const answers = await query(info, token);

    const problems: string[] = [];
    let answered = 0;
    let covered = 0n;
    for (const a of answers) for (const row of a.rows) answered += Number(row[1]);
    for (const [p, part] of Object.entries(before.partitions)) {
      const ranges = answers.flatMap((a) => rangesFromJson(a.offsetRanges[p] ?? []));
      const first = BigInt(part.firstOffset ?? '0');
      const end = ranges.reduce((m, r) => (r.to > m ? r.to : m), first);
      for (const x of tilingProblems(ranges, first, end))
        problems.push(`partition ${p}: ${x.kind} [${x.from}, ${x.to})`);
      if (end - first < BigInt(part.produced))
        problems.push(`partition ${p}: answers ${end - first} of ${part.produced} events`);
      covered += end - first;
    }
    if (BigInt(answered) !== covered)
      problems.push(`the query counts ${answered} events over ${covered} offsets`);
    if (before.produced < 100) problems.push(`the demo wrote only ${before.produced} events`);

    // The chart's query service, as the command prints it: one answer, complete, at least every
    // event written before the receivers were asked.
    const [queryPort, stopQuery] = await portForward(info, `service/${info.release}-query`, 8082);
    try {
      const response = await fetch(
        `http://127.0.0.1:${queryPort}/v1/namespaces/${info.namespace}/cubes/${info.cube}/query`,
        {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ measures: ['events'] }),
        },
      );
      const answer = (await response.json()) as { complete?: boolean; rows?: unknown[][] };
      const events = Number(answer.rows?.[0]?.[0] ?? 0);
      if (!response.ok || answer.complete !== true || events < before.produced)
        problems.push(
          `the query service answered ${response.status}: complete ${answer.complete}, ${events} events of at least ${before.produced}`,
        );
      console.log(`[e2e] local --node: the query service answered ${events} events, complete`);
    } finally {
      stopQuery();
    }
    console.log(
      `[e2e] local --node: ${before.produced} events produced 5 s before the query, ${answered} answered`,
    );

    // Ctrl-C: SIGINT to its process group, as a terminal sends it.
    process.kill(-local.pid!, 'SIGINT');
    const code = await waitFor(
      'streamcube local --node to stop',
      () => Promise.resolve(local.exitCode ?? undefined),
      240_000,
      500,
    );
    if (code !== 0) problems.push(`local --node exited with ${code}:\n${tailOf(logFile)}`);
    const left = await runCommand(info.kubectl, [
      '--kubeconfig',
      info.kubeconfig,
      'get',
      'namespace',
      info.namespace,
      '--ignore-not-found',
      '-o',
      'name',
    ]);
    if (left.trim() !== '') problems.push(`after Ctrl-C the namespace is still there: ${left}`);
    return problems;
  } finally {
    if (local.exitCode === null) process.kill(-local.pid!, 'SIGKILL');
  }
}
