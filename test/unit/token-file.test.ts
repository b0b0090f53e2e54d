// The admin token file read again while running: a rotation makes the new token current and keeps
// the old one valid through its grace only; a file that turns unusable changes nothing.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '../../src/config-error.ts';
import { TokenFile } from '../../src/protocol/token-file.ts';

const dir = mkdtempSync(join(tmpdir(), 'streamcube-token-file-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const opened: TokenFile[] = [];
afterEach(() => opened.splice(0).forEach((f) => f.close()));

const first = 'first-token-0123456789';
const second = 'second-token-0123456789';

function tokenFile(
  name: string,
  content: string,
): { file: TokenFile; path: string; at: number[]; errors: Error[] } {
  const path = join(dir, name);
  writeFileSync(path, content);
  const at = [1_000];
  const errors: Error[] = [];
  const file = new TokenFile(path, {
    graceMs: 5_000,
    pollMs: 3_600_000,
    now: () => at[0]!,
    onError: (e) => errors.push(e),
  });
  opened.push(file);
  return { file, path, at, errors };
}

test('the first line of the file, trimmed, is the token', () => {
  const { file } = tokenFile('plain', `  ${first}  \nsecond line ignored\n`);
  expect(file.tokens()).toEqual([first]);
});

test('a rotation makes the new token current; the old one is valid until its grace ends', async () => {
  const { file, path, at } = tokenFile('rotated', `${first}\n`);
  writeFileSync(path, `${second}\n`);
  await file.reload();
  expect(file.tokens()).toEqual([second, first]);
  at[0] = 1_000 + 4_999;
  expect(file.tokens()).toEqual([second, first]);
  at[0] = 1_000 + 5_000;
  expect(file.tokens()).toEqual([second]);
});

test('reading the same token again starts no grace', async () => {
  const { file } = tokenFile('same', `${first}\n`);
  await file.reload();
  expect(file.tokens()).toEqual([first]);
});

test.each([
  ['is emptied', ''],
  ['holds a token too short', 'short\n'],
])('a file that %s keeps the current token', async (_name, content) => {
  const { file, path, errors } = tokenFile(`bad-${content.length}`, `${first}\n`);
  writeFileSync(path, content);
  await file.reload();
  expect(file.tokens()).toEqual([first]);
  expect(errors.map((e) => e.message)).toEqual([expect.stringMatching(/at least 16 characters/)]);
});

test('a missing file keeps the current token', async () => {
  const { file, path, errors } = tokenFile('removed', `${first}\n`);
  rmSync(path);
  await file.reload();
  expect(file.tokens()).toEqual([first]);
  expect(errors).toHaveLength(1);
});

test.each([
  ['missing', undefined, /cannot read the token file/],
  ['too short', 'short\n', /at least 16 characters/],
])('a %s file at start is a ConfigError', (name, content, message) => {
  const path = join(dir, `start-${name}`);
  if (content !== undefined) writeFileSync(path, content);
  const open = (): TokenFile => new TokenFile(path, { graceMs: 0 });
  expect(open).toThrow(ConfigError);
  expect(open).toThrow(message);
});
