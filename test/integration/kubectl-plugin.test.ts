// kubectl streamcube, the real plugin run by the real kubectl (found on the PATH as
// kubectl-streamcube) against the API server, a real operator and receivers: status per
// partition; a plan that previews an edit without applying it and matches the proposal the
// operator then writes; approve (a stale id refused, nothing changed; the current one waited to
// Done with each phase shown); suspend and resume; reset-offsets (a reset out of range refused
// with the operator's reason, one to earliest followed to its end); clear errors for a cube that
// does not exist.
import { execFile } from 'node:child_process';
import { chmodSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { dump } from 'js-yaml';
import { approveAnnotation, type CubeAssignment } from '../../src/api/cube-assignment.ts';
import { binDir } from '../../src/local/controlplane.ts';
import { createTopic, makeEvents, produce } from '../support/events.ts';
import { QueryServerProcess } from '../support/query-server-process.ts';
import { waitFor } from '../support/wait.ts';
import { applyCrd, conditionOf, cubeApi } from '../support/cluster.ts';
import { useOperatorStack } from '../support/operator-stack.ts';
import { scratchDirs } from '../support/scratch-dirs.ts';

const scratchDir = scratchDirs();

const stack = useOperatorStack({ name: 'kubectl-plugin', replicaSets: ['rs-a', 'rs-b', 'rs-c'] });
const repoRoot = resolve(import.meta.dirname, '../..');
const cube = 'orders';
const api = () => cubeApi(stack.kc);

let pluginDir: string;
beforeAll(() => {
  // What `npm install` links as the package's bin: an executable named kubectl-streamcube.
  pluginDir = scratchDir('kubectl-plugin-');
  const bin = join(pluginDir, 'kubectl-streamcube');
  writeFileSync(
    bin,
    `#!/bin/sh\nexec "${process.execPath}" --disable-warning=ExperimentalWarning "${join(repoRoot, 'src/plugin/cli.ts')}" "$@"\n`,
  );
  chmodSync(bin, 0o755);
});

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** `kubectl <args>` with the plugin on the PATH; resolves with its exit code and output. */
const kubectl = (...args: string[]): Promise<Run> =>
  new Promise((done) =>
    execFile(
      join(binDir(), 'kubectl'),
      args,
      {
        env: {
          ...process.env,
          KUBECONFIG: stack.env.kube.kubeconfig,
          PATH: `${pluginDir}:${process.env.PATH}`,
        },
      },
      (error, stdout, stderr) =>
        done({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    ),
  );
const plugin = (...args: string[]) => kubectl('streamcube', ...args, '-n', stack.namespace);

/** The cube's manifest as a user keeps it, with `edit` applied to its spec, in a file. */
function manifest(live: CubeAssignment, edit: Record<string, unknown>): string {
  const file = join(pluginDir, `manifest-${Math.random().toString(36).slice(2)}.yaml`);
  writeFileSync(
    file,
    dump({
      apiVersion: live.apiVersion,
      kind: live.kind,
      metadata: { name: live.metadata.name },
      spec: { ...live.spec, ...edit },
    }),
  );
  return file;
}

let settled: CubeAssignment;
const queryServer = new QueryServerProcess(stack);
afterAll(() => queryServer.stop());

test('kubectl finds the plugin, and status shows every partition with its owner and epoch', async () => {
  expect((await kubectl('plugin', 'list')).stdout).toContain('kubectl-streamcube');
  const topic = await createTopic(stack.admin, 4);
  await stack.createCube(cube, topic, { replicaSets: ['rs-a', 'rs-b'] });
  settled = await stack.waitForSettled(cube);
  const { code, stdout } = await plugin('status', cube);
  expect(code).toBe(0);
  expect(stdout).toContain(`CubeAssignment ${stack.namespace}/${cube}: topic ${topic}`);
  expect(stdout).toMatch(/^Ready\s+True/m);
  const rows = stdout
    .split('\n')
    .filter((l) => /^[0-9]+\s/.test(l))
    .map((l) => l.split(/\s+/));
  expect(rows.map((r) => [Number(r[0]), r[1], Number(r[2])])).toEqual(
    [0, 1, 2, 3].map((p) => [
      p,
      Object.entries(settled.status!.assignment!).find(([, ps]) => ps.includes(p))![0],
      settled.status!.epochs![String(p)],
    ]),
  );
  const json = await plugin('status', cube, '-o', 'json');
  expect((JSON.parse(json.stdout) as CubeAssignment).status?.assignment).toEqual(
    settled.status?.assignment,
  );
});

test('query asks the query service for the whole cube', async () => {
  const topic = settled.spec.source.topic;
  for (const p of [0, 1, 2, 3])
    await produce(stack.producer, topic, p, makeEvents(p, 25, Date.UTC(2026, 2, 1)));
  await queryServer.start();
  const ask = (...output: string[]) =>
    plugin(
      'query',
      cube,
      '--server',
      queryServer.baseUrl,
      '--token-file',
      queryServer.tokenFile,
      ...output,
    );
  const answer = await waitFor('the query service counting all 100 events', async () => {
    const run = await ask('-o', 'json');
    if (run.code !== 0) throw new Error(`kubectl streamcube query failed: ${run.stderr}`);
    const parsed = JSON.parse(run.stdout) as {
      complete: boolean;
      columns: string[];
      rows: unknown[][];
    };
    return parsed.rows[0]?.[parsed.columns.indexOf('events')] === 100 ? parsed : undefined;
  });
  expect(answer.complete).toBe(true);
  const table = await ask();
  expect(table.stdout).toContain('complete: every offset of 4 partitions counted once');
});

test('plan previews an edit against the live cluster and applies nothing', async () => {
  const before = await api().get(stack.namespace, cube);
  const { code, stdout } = await plugin(
    'plan',
    '-f',
    manifest(before, { replicaSets: ['rs-a', 'rs-b', 'rs-c'] }),
  );
  expect(code).toBe(0);
  expect(stdout).toContain('replicaSets: [rs-a,rs-b] → [rs-a,rs-b,rs-c]');
  expect(stdout).toMatch(/1 partition would move, touching rs-(a|b), rs-c/);
  expect((await api().get(stack.namespace, cube)).metadata.resourceVersion).toBe(
    before.metadata.resourceVersion,
  );

  const invalid = await plugin('plan', '-f', manifest(before, { replicaSets: ['Not A Set'] }));
  expect(invalid.code).toBe(1);
  expect(invalid.stderr).toMatch(/spec\.replicaSets\[0\]: /);
});

test('approve: a stale id changes nothing; the proposal the plan foresaw is approved and waited to Done', async () => {
  const auto = await plugin('approve', cube);
  expect(auto.code).toBe(1);
  expect(auto.stderr).toContain('spec.approval auto');

  await api().patchSpec(stack.namespace, cube, { approval: 'manual' });
  const manual = await stack.waitForSettled(cube);
  const planned = await plugin(
    'plan',
    '-f',
    manifest(manual, { replicaSets: ['rs-a', 'rs-b', 'rs-c'] }),
  );
  expect(planned.stdout).toContain('spec.approval is manual');
  const foreseen = planned.stdout
    .split('\n')
    .filter((l) => /^[0-9]+\s+rs-/.test(l))
    .map((l) => l.split(/\s+/).slice(0, 3).join(' '));

  await api().patchSpec(stack.namespace, cube, { replicaSets: ['rs-a', 'rs-b', 'rs-c'] });
  const proposed = await stack.waitForCube(
    cube,
    'a proposal of the current spec',
    (c) => c.status?.proposal?.generation === c.metadata.generation,
  );
  const proposal = proposed.status!.proposal!;
  expect(proposal.moves.map((m) => `${m.partition} ${m.from} ${m.to}`)).toEqual(foreseen);
  const status = await plugin('status', cube);
  expect(status.stdout).toContain(`Proposal ${proposal.id} waits for approval`);

  const stale = await plugin('approve', cube, '--id', 'p-1-0000000000');
  expect(stale.code).toBe(1);
  expect(stale.stderr).toContain(
    `proposal p-1-0000000000 is not the one waiting: ${proposal.id} is`,
  );
  expect(
    (await api().get(stack.namespace, cube)).metadata.annotations?.[approveAnnotation],
  ).toBeUndefined();

  const approved = await plugin('approve', cube, '--id', proposal.id, '--wait', '--timeout', '5m');
  expect(approved.stderr).toBe('');
  expect(approved.code).toBe(0);
  expect(approved.stdout).toContain(`approved proposal ${proposal.id}`);
  expect(approved.stdout).toMatch(/move: phase \w+/);
  expect(approved.stdout).toContain(`done: the moves of ${proposal.id} are applied`);
  const done = await api().get(stack.namespace, cube);
  for (const m of proposal.moves) expect(done.status?.assignment?.[m.to]).toContain(m.partition);
}, 360_000);

test('suspend and resume, waited for', async () => {
  const suspended = await plugin('suspend', cube, '--wait', '--timeout', '150s');
  expect(suspended.code).toBe(0);
  expect(suspended.stdout).toContain('suspended');
  const cubeNow = await api().get(stack.namespace, cube);
  expect(cubeNow.spec.suspend).toBe(true);
  expect(conditionOf(cubeNow, 'Ready')).toMatchObject({ status: 'False', reason: 'Suspended' });
  expect((await plugin('suspend', cube)).stdout).toContain('already suspended');

  const resumed = await plugin('resume', cube, '--wait', '--timeout', '150s');
  expect(resumed.code).toBe(0);
  expect(conditionOf(await api().get(stack.namespace, cube), 'Ready')?.status).toBe('True');
}, 360_000);

test('reset-offsets: an offset past the end refused with the operator reason and nothing changed; a reset to earliest followed to its end', async () => {
  // This checkout's CRD (status.resets): the API server is shared with other checkouts' suites.
  await applyCrd();
  const before = await api().get(stack.namespace, cube);
  const refused = await plugin('reset-offsets', cube, '--to-offset', '0=99999999', '--id', 'far');
  expect(refused.code).toBe(1);
  expect(refused.stderr).toMatch(
    /error: reset far refused, nothing changed: partition 0: offset 99999999 is outside what the brokers hold, \[0, \d+\]/,
  );
  expect((await api().get(stack.namespace, cube)).status?.epochs).toEqual(before.status?.epochs);
  const again = await plugin('reset-offsets', cube, '--to-latest', '--id', 'far');
  expect(again.code).toBe(1);
  expect(again.stderr).toContain('already has a reset with id far (Refused)');

  const reset = await plugin(
    'reset-offsets',
    cube,
    '--to-earliest',
    '--partitions',
    '0',
    '--id',
    'replay-0',
    '--wait',
    '--timeout',
    '150s',
  );
  expect(reset.code).toBe(0);
  expect(reset.stdout).toContain('move: phase Starting');
  expect(reset.stdout).toMatch(
    /done: reset replay-0 \(earliest\) applied\n {2}partition 0: \d+ → 0 /,
  );
  const after = await api().get(stack.namespace, cube);
  expect(after.status?.epochs?.['0']).toBe(before.status!.epochs!['0']! + 1);
  expect(after.status?.epochStarts?.['0']).toBe('0');
}, 360_000);

test('a cube that does not exist, or a command that does not: a clear error and nothing changed', async () => {
  for (const command of ['status', 'approve', 'reset-offsets', 'suspend', 'resume']) {
    const run = await plugin(command, 'no-such-cube');
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(
      `cubeassignment "no-such-cube" not found in namespace "${stack.namespace}"`,
    );
  }
  const unknown = await plugin('rebalance', cube);
  expect(unknown.code).toBe(2);
  expect(unknown.stderr).toContain("unknown command 'rebalance'");
});
