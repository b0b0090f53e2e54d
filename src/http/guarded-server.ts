// The HTTP edge every component serves through: no request can end the process. The request
// target is parsed inside the error path (a malformed one is a 400), a handler's unexpected
// failure is logged with a request id and answered with a generic 500, and the server has
// explicit limits on slow and numerous clients.
import { randomUUID } from 'node:crypto';
import { type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { Logger } from '../observability/logger.ts';

export interface ServerLimits {
  /** Longest wait for a request's headers once its connection opened (slow-header clients). */
  headersTimeoutMs: number;
  /** Longest wait for a whole request, headers and body, to arrive. */
  requestTimeoutMs: number;
  /** How long an idle keep-alive connection stays open. */
  keepAliveTimeoutMs: number;
  /** Connections served at once; further ones are closed at accept. */
  maxConnections: number;
}

export const defaultServerLimits: ServerLimits = {
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 60_000,
  keepAliveTimeoutMs: 5_000,
  maxConnections: 512,
};

/** A handler gets the request target already parsed; anything it throws is a generic 500. */
export type GuardedHandler = (req: IncomingMessage, res: ServerResponse, url: URL) => Promise<void>;

export interface GuardedServerOptions {
  logger: Logger;
  limits?: ServerLimits;
  /** Called once per request that ended in the last-resort 500 (for a metric). */
  onUnexpectedError?: (req: IncomingMessage) => void;
  /** Serve HTTPS with this certificate and key (PEM) instead of plain HTTP. */
  tls?: { cert: string; key: string };
}

/**
 * The request target as a URL, or undefined when it is not one (`//[`, a bare `*`, …). The
 * origin form (`/path`) and the absolute form (`http://host/path`) are the two HTTP/1.1 defines
 * for a server's own resources.
 */
export function parseRequestTarget(target: string | undefined): URL | undefined {
  if (target === undefined || !(target.startsWith('/') || /^https?:\/\//i.test(target)))
    return undefined;
  try {
    return new URL(target, 'http://localhost');
  } catch {
    return undefined;
  }
}

/**
 * An answer sent before its request's body was read whole (a 401, a 413) closes the connection:
 * the unread rest would otherwise be parsed as the next request on it, and the client, which may
 * reuse the connection, would get that one's 400 or 408 for its next call.
 */
export function closeIfBodyUnread(res: ServerResponse): void {
  if (!res.req.complete) res.shouldKeepAlive = false;
}

/**
 * A request's body, or `tooLarge` once it passes `maxBytes`. Past the bound the rest is still read
 * and dropped, up to `drainBytes`, so that a client still sending gets the 413 rather than a
 * connection reset under its upload (a request broken off mid-body resets it); a client past
 * `drainBytes` is cut off there, and the request timeout bounds a slow one.
 */
export function readBoundedBody(
  req: IncomingMessage,
  maxBytes: number,
  drainBytes = 16 * maxBytes,
): Promise<Buffer | typeof tooLarge> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= maxBytes) {
        chunks.push(chunk);
        return;
      }
      chunks.length = 0;
      if (size > drainBytes) {
        req.destroy();
        resolve(tooLarge);
      }
    });
    req.on('end', () => resolve(size > maxBytes ? tooLarge : Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

/** What readBoundedBody answers for a body past its bound. */
export const tooLarge = Symbol('too large');

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  closeIfBodyUnread(res);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}

export function createGuardedServer(
  handler: GuardedHandler,
  options: GuardedServerOptions,
): Server {
  const limits = options.limits ?? defaultServerLimits;
  const serverOptions = {
    headersTimeout: limits.headersTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    // Node enforces the two timeouts above on this period (30 s by default), which would let a
    // slow client hold its connection well past them.
    connectionsCheckingInterval: Math.min(1_000, limits.headersTimeoutMs),
  };
  const listener = (req: IncomingMessage, res: ServerResponse): void => {
    const url = parseRequestTarget(req.url);
    if (!url) {
      sendJson(res, 400, {
        error: 'invalid request',
        reason: 'the request target is not a path (origin form) or an http URL (absolute form)',
      });
      return;
    }
    // An async wrapper, so that a handler throwing before its first await lands here too.
    const answered = (async () => handler(req, res, url))();
    answered.catch((error: unknown) => {
      if (req.destroyed && !req.complete) {
        // The client went away (or was cut off by a timeout) before its request arrived whole:
        // reading the body failed, and there is no one to answer.
        options.logger.debug('request abandoned by its client', {
          method: req.method,
          path: url.pathname,
        });
        res.destroy();
        return;
      }
      const requestId = randomUUID();
      options.logger.error('request failed unexpectedly', {
        requestId,
        method: req.method,
        path: url.pathname,
        error: error instanceof Error ? error.stack : String(error),
      });
      options.onUnexpectedError?.(req);
      if (res.headersSent) {
        // Part of an answer is on the wire already: cut it rather than send a wrong one.
        res.destroy();
        return;
      }
      try {
        sendJson(res, 500, {
          error: 'internal error',
          reason: `the request failed unexpectedly; the server's log has the details under request id ${requestId}`,
        });
      } catch {
        res.destroy();
      }
    });
  };
  const server: Server = options.tls
    ? createHttpsServer({ ...serverOptions, ...options.tls }, listener)
    : createServer(serverOptions, listener);
  server.maxConnections = limits.maxConnections;
  return server;
}
