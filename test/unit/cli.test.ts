// The `streamcube` command: help lists the three commands, unknown commands are refused.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { runCli } from '../../src/cli.ts';

async function run(argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runCli(argv, { out: (t) => (out += t), err: (t) => (err += t) });
  return { code, out, err };
}

test('--help lists operator, receiver and local', async () => {
  const { code, out } = await run(['--help']);
  expect(code).toBe(0);
  for (const command of ['operator', 'receiver', 'local'])
    expect(out).toMatch(new RegExp(`^  ${command} `, 'm'));
});

test('an unknown command is refused with the usage on stderr', async () => {
  const { code, err } = await run(['frobnicate']);
  expect(code).toBe(2);
  expect(err).toContain("unknown command 'frobnicate'");
});

test('no command prints the usage and fails', async () => {
  const { code, err } = await run([]);
  expect(code).toBe(2);
  expect(err).toContain('Usage: streamcube');
});

test('the entry point runs under Node 24 as a script', async () => {
  const { stdout } = await promisify(execFile)(process.execPath, ['src/cli.ts', '--help']);
  expect(stdout).toContain('receiver');
  expect(process.versions.node.split('.')[0]).toBe('24');
});
