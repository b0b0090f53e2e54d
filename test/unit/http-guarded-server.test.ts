// The HTTP edge every component serves through: a malformed request target, a handler that
// throws before or after its first await, or one that fails mid-answer, never ends the process;
// callers get a 400 or a generic 500, and each unexpected failure is counted.
import { closeNow, listenOnLoopback } from '../support/listen.ts';
import { once } from 'node:events';
import type { Server } from 'node:http';
import { type AddressInfo, connect } from 'node:net';
import {
  createGuardedServer,
  parseRequestTarget,
  readBoundedBody,
  sendJson,
  tooLarge,
} from '../../src/http/guarded-server.ts';
import { createLogger } from '../../src/observability/logger.ts';

/** Sends `head` as is over a plain socket; resolves with everything the server answered. */
async function rawRequest(port: number, head: string): Promise<string> {
  const socket = connect(port, '127.0.0.1');
  await once(socket, 'connect');
  socket.end(head);
  let text = '';
  socket.on('data', (chunk: Buffer) => (text += chunk.toString('latin1')));
  await once(socket, 'close');
  return text;
}

describe('parseRequestTarget', () => {
  test.each([
    ['/v1/status', '/v1/status'],
    ['/v1/cubes?x=1', '/v1/cubes'],
    ['http://receiver/healthz', '/healthz'],
    ['/%', '/%'],
  ])('%s is the path %s', (target, pathname) => {
    expect(parseRequestTarget(target)?.pathname).toBe(pathname);
  });

  test.each(['//[', '*', '', 'healthz', 'ftp://x/y', '//[::1'])('%j is not a target', (target) => {
    expect(parseRequestTarget(target)).toBeUndefined();
  });
});

const silentLogger = createLogger('test', 'error');
silentLogger.silent = true;

describe('createGuardedServer', () => {
  let server: Server;
  let port: number;
  const unexpected: string[] = [];

  beforeAll(async () => {
    server = createGuardedServer(
      async (req, res, url) => {
        if (url.pathname === '/throws-at-once') throw new Error('secret path /var/lib/x');
        if (url.pathname === '/rejects') {
          await Promise.resolve();
          throw new Error('s3://bucket/key');
        }
        if (url.pathname === '/fails-mid-answer') {
          res.writeHead(200, { 'content-type': 'text/plain' });
          res.write('partial');
          await Promise.resolve();
          throw new Error('late');
        }
        sendJson(res, 200, { path: url.pathname, method: req.method });
      },
      {
        logger: silentLogger,
        onUnexpectedError: (req) => unexpected.push(req.url ?? ''),
      },
    );
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    port = (server.address() as AddressInfo).port;
  });

  afterAll(() => server.close());

  test('a request target that is not a URL is a 400, and the server stays up', async () => {
    const answer = await rawRequest(
      port,
      'GET //[ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
    );
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    expect(answer).toContain('the request target is not a path');
    const ok = await fetch(`http://127.0.0.1:${port}/still-up`);
    expect(await ok.json()).toEqual({ path: '/still-up', method: 'GET' });
  });

  test.each(['/throws-at-once', '/rejects'])(
    '%s: a generic 500 that names a request id, not the error',
    async (path) => {
      const before = unexpected.length;
      const res = await fetch(`http://127.0.0.1:${port}${path}`);
      expect(res.status).toBe(500);
      const body = (await res.json()) as { error: string; reason: string };
      expect(body.error).toBe('internal error');
      expect(body.reason).toMatch(/request id [0-9a-f-]{36}/);
      expect(JSON.stringify(body)).not.toMatch(/secret|s3:/);
      expect(unexpected.slice(before)).toEqual([path]);
    },
  );

  test('a failure after the answer began cuts the connection and is counted', async () => {
    const before = unexpected.length;
    const answer = await rawRequest(
      port,
      'GET /fails-mid-answer HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
    );
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    expect(answer).not.toMatch(/0\r\n\r\n$/); // the chunked answer never ends properly
    expect(unexpected.slice(before)).toEqual(['/fails-mid-answer']);
    expect((await fetch(`http://127.0.0.1:${port}/after`)).status).toBe(200);
  });

  test('the limits are set on the server', () => {
    expect(server.headersTimeout).toBe(10_000);
    expect(server.requestTimeout).toBe(60_000);
    expect(server.maxConnections).toBe(512);
  });
});

describe('readBoundedBody', () => {
  let server: Server;
  let port = 0;
  beforeAll(async () => {
    server = createGuardedServer(
      async (req, res) => {
        const body = await readBoundedBody(req, 1024, 1024 * 1024);
        if (body === tooLarge) sendJson(res, 413, { error: 'too large' });
        else sendJson(res, 200, { bytes: body.length });
      },
      { logger: silentLogger },
    );
    port = await listenOnLoopback(server);
  });
  afterAll(() => closeNow(server));
  const post = (body: string) =>
    fetch(`http://127.0.0.1:${port}/`, { method: 'POST', body }).then(async (r) => {
      await r.arrayBuffer();
      return r.status;
    });

  test('a body within the bound is read whole', async () => {
    expect(await post('x'.repeat(1024))).toBe(200);
  });

  test('a client still uploading a body past the bound gets the 413, never a reset connection', async () => {
    // Sent at once, many times: refusing by breaking off the read reset some of them.
    const statuses = await Promise.all(
      Array.from({ length: 40 }, () => post('x'.repeat(512 * 1024))),
    );
    expect(new Set(statuses)).toEqual(new Set([413]));
  });

  test('past the drain bound the connection is cut: the server reads no further', async () => {
    const status = await post('x'.repeat(4 * 1024 * 1024)).catch(() => 'reset');
    expect([413, 'reset']).toContain(status);
    expect(await post('ok')).toBe(200);
  });
});
