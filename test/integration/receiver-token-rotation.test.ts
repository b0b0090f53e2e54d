// Rotating the admin token without a restart, as a changed Secret reaches a running pod: the
// receiver accepts the new token within seconds, the old one through the grace and not after, and
// an operator that saw the rotation first still gets through to a receiver that has not.
import { readFileSync, writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { ReceiverApiError, ReceiverClient } from '../../src/protocol/client.ts';
import { ReceiverProcess, tempDir } from '../support/receiver-process.ts';

const graceMs = 4_000;
const receiver = new ReceiverProcess({
  id: 'token-rotation',
  replicaSet: 'rs-a',
  deepStorageDir: tempDir('token-rotation-deep'),
  env: { STREAMCUBE_ADMIN_TOKEN_GRACE: `${graceMs}ms` },
});

beforeAll(() => receiver.start());
afterAll(() => receiver.stop());

/** The status code of GET /v1/status with `token`. */
async function statusWith(token: string): Promise<number> {
  const response = await fetch(`${receiver.baseUrl}/v1/status`, {
    headers: { authorization: `Bearer ${token}` },
  });
  await response.body?.cancel();
  return response.status;
}

test('a token written to the file is accepted within seconds; the old one only through the grace', async () => {
  const old = receiver.token;
  const rotated = `rotated-${old}`;
  expect(await statusWith(old)).toBe(200);
  expect(await statusWith(rotated)).toBe(403);

  writeFileSync(receiver.tokenFile, `${rotated}\n`);
  const written = Date.now();
  while ((await statusWith(rotated)) !== 200) {
    expect(Date.now() - written).toBeLessThan(5_000);
    await sleep(100);
  }
  const seen = Date.now();
  // Calls still carrying the old token keep working while the grace lasts...
  expect(await statusWith(old)).toBe(200);
  // ...and are refused once it is over (polled at most 2 s after the write, plus the grace).
  while ((await statusWith(old)) !== 403) {
    expect(Date.now() - seen).toBeLessThan(graceMs + 3_000);
    await sleep(100);
  }
  expect(Date.now() - written).toBeGreaterThanOrEqual(graceMs);
  expect(await statusWith(rotated)).toBe(200);
});

test('a client offering the newest token first falls back to the one the receiver still has', async () => {
  const held = readFileSync(receiver.tokenFile, 'utf8').trim();
  const newer = `newer-${held}`;
  const fallback = new ReceiverClient(receiver.baseUrl, () => [newer, held]);
  await expect(fallback.status()).resolves.toMatchObject({ receiver: 'token-rotation' });
  const onlyNewer = new ReceiverClient(receiver.baseUrl, () => [newer]);
  await expect(onlyNewer.status()).rejects.toMatchObject({ status: 403 });
  await expect(onlyNewer.status()).rejects.toBeInstanceOf(ReceiverApiError);
});
