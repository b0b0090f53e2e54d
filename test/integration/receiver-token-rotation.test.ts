// Rotating the admin token without a restart, as a changed Secret reaches a running pod: the
// receiver accepts the new token within seconds, the old one through the grace and not after, and
// an operator that saw the rotation first still gets through to a receiver that has not.
import { readFileSync, writeFileSync } from 'node:fs';
import { ReceiverApiError, ReceiverClient } from '../../src/protocol/client.ts';
import { useReceiver } from '../support/receiver-fixture.ts';
import { waitFor } from '../support/wait.ts';

const graceMs = 4_000;
/** A hang guard: the receiver reads its token file every 2 s; a loaded machine is only slower. */
const deadlineMs = 60_000;
const fixture = useReceiver({
  id: 'token-rotation',
  env: { STREAMCUBE_ADMIN_TOKEN_GRACE: `${graceMs}ms` },
});

/** The status code of GET /v1/status with `token`. */
async function statusWith(token: string): Promise<number> {
  const response = await fetch(`${fixture.receiver.baseUrl}/v1/status`, {
    headers: { authorization: `Bearer ${token}` },
  });
  await response.body?.cancel();
  return response.status;
}

test('a token written to the file is accepted within seconds; the old one only through the grace', async () => {
  const old = fixture.receiver.token;
  const rotated = `rotated-${old}`;
  expect(await statusWith(old)).toBe(200);
  expect(await statusWith(rotated)).toBe(403);

  writeFileSync(fixture.receiver.tokenFile, `${rotated}\n`);
  const written = Date.now();
  await waitFor(
    'the rotated token accepted',
    async () => (await statusWith(rotated)) === 200,
    deadlineMs,
  );
  // Calls still carrying the old token keep working while the grace lasts...
  expect(await statusWith(old)).toBe(200);
  // ...and are refused once it is over, not before.
  await waitFor('the old token refused', async () => (await statusWith(old)) === 403, deadlineMs);
  expect(Date.now() - written).toBeGreaterThanOrEqual(graceMs);
  expect(await statusWith(rotated)).toBe(200);
});

test('a client offering the newest token first falls back to the one the receiver still has', async () => {
  const held = readFileSync(fixture.receiver.tokenFile, 'utf8').trim();
  const newer = `newer-${held}`;
  const fallback = new ReceiverClient(fixture.receiver.baseUrl, () => [newer, held]);
  await expect(fallback.status()).resolves.toMatchObject({ receiver: 'token-rotation' });
  const onlyNewer = new ReceiverClient(fixture.receiver.baseUrl, () => [newer]);
  await expect(onlyNewer.status()).rejects.toMatchObject({ status: 403 });
  await expect(onlyNewer.status()).rejects.toBeInstanceOf(ReceiverApiError);
});
