// The receivers' admin API over HTTPS: a caller trusting the receivers' CA and checking their
// name reaches a receiver at any address; one trusting another CA, checking another name, or
// speaking plain HTTP does not.
import { closeNow, listenOnLoopback } from '../support/listen.ts';
import type { Server } from 'node:http';
import { createGuardedServer, sendJson } from '../../src/http/guarded-server.ts';
import { readCertificate, tlsReceiverTransport } from '../../src/http/tls.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { makeReceiverCertificates } from '../support/receiver-certificates.ts';
import { scratchDirs } from '../support/scratch-dirs.ts';

const scratch = scratchDirs();

const certs = await makeReceiverCertificates(scratch('streamcube-tls-'));
let server: Server;
let port = 0;
beforeAll(async () => {
  server = createGuardedServer(
    (_req, res) => {
      sendJson(res, 200, { ok: true });
      return Promise.resolve();
    },
    { logger: createLogger('test', 'error'), tls: readCertificate(certs) },
  );
  port = await listenOnLoopback(server);
});
afterAll(() => closeNow(server));

test('trusting the CA and checking the receivers name: answered, at an IP address', async () => {
  const transport = tlsReceiverTransport(certs.caFile);
  const res = await transport.fetch(`https://127.0.0.1:${port}/healthz`);
  expect(res.status).toBe(200);
  expect(await res.json()).toEqual({ ok: true });
  transport.close();
});

test.each([
  ['another CA', () => tlsReceiverTransport(certs.otherCaFile)],
  ['another name', () => tlsReceiverTransport(certs.caFile, 'someone-else')],
])('trusting %s: refused by the caller before any request is sent', async (_name, make) => {
  const transport = make();
  await expect(transport.fetch(`https://127.0.0.1:${port}/healthz`)).rejects.toThrow();
  transport.close();
});

test('plain HTTP to the HTTPS port gets no answer', async () => {
  await expect(fetch(`http://127.0.0.1:${port}/healthz`)).rejects.toThrow();
});
