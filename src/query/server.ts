// The query server's HTTP API: unauthenticated /healthz, /readyz, /metrics; the bearer-token
// `POST /v1/namespaces/<ns>/cubes/<cube>/query`. Bad input is a 4xx naming the field.
import { timingSafeEqual } from 'node:crypto';
import { type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http';
import type { Registry } from 'prom-client';
import { cubeName } from '../api/cube.ts';
import type { Logger } from '../observability/logger.ts';
import type { ErrorResponse } from '../protocol/admin-api.ts';
import { parseCubePath } from '../protocol/cube-paths.ts';
import type { BearerTokens } from '../protocol/token-file.ts';
import type { QueryMetrics } from './metrics.ts';
import { QueryError } from './request.ts';
import type { QueryService } from './service.ts';

export const maxQueryBodyBytes = 1024 * 1024;

export interface QueryServerOptions {
  service: QueryService;
  tokens: BearerTokens;
  registry: Registry;
  metrics: QueryMetrics;
  logger: Logger;
  /** Whether the informers have synced: /readyz. */
  ready: () => boolean;
}

function send(res: ServerResponse, status: number, body: unknown, type = 'application/json'): void {
  const text = type === 'application/json' ? JSON.stringify(body) : String(body);
  res.writeHead(status, { 'content-type': type, 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

const failure = (error: string, reason: string, field?: string): ErrorResponse =>
  field === undefined ? { error, reason } : { error, reason, field };

const words: Record<QueryError['status'], string> = {
  400: 'invalid request',
  404: 'not found',
  413: 'request too large',
  503: 'incomplete',
};

/** The presented bearer token against those valid now, in constant time per token. */
function bearerCheck(req: IncomingMessage, tokens: readonly string[]): 'ok' | 401 | 403 {
  const header = req.headers.authorization;
  if (!header?.startsWith('Bearer ')) return 401;
  const given = Buffer.from(header.slice('Bearer '.length));
  const valid = tokens.map((t) => Buffer.from(t));
  return valid.some((t) => t.length === given.length && timingSafeEqual(t, given)) ? 'ok' : 403;
}

async function readBody(req: IncomingMessage): Promise<unknown> {
  const declared = Number(req.headers['content-length'] ?? 0);
  if (declared > maxQueryBodyBytes)
    throw new QueryError(413, `the body is larger than ${maxQueryBodyBytes} bytes`);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > maxQueryBodyBytes)
      throw new QueryError(413, `the body is larger than ${maxQueryBodyBytes} bytes`);
    chunks.push(chunk as Buffer);
  }
  if (size === 0) return {};
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch (error) {
    throw new QueryError(400, `the body is not valid JSON: ${(error as Error).message}`);
  }
}

export function createQueryServer(o: QueryServerOptions): Server {
  return createServer((req, res) => {
    const timer = o.metrics.seconds.startTimer({ kind: 'http' });
    res.on('finish', () => {
      timer();
      o.metrics.requests.inc({ status: String(res.statusCode) });
    });
    void (async () => {
      const url = new URL(req.url ?? '/', 'http://query');
      try {
        if (req.method === 'GET' && url.pathname === '/healthz')
          return send(res, 200, 'ok', 'text/plain');
        if (req.method === 'GET' && url.pathname === '/readyz')
          return o.ready()
            ? send(res, 200, 'ok', 'text/plain')
            : send(res, 503, 'informers not synced', 'text/plain');
        if (req.method === 'GET' && url.pathname === '/metrics')
          return send(res, 200, await o.registry.metrics(), o.registry.contentType);
        if (!url.pathname.startsWith('/v1/'))
          return send(res, 404, failure('not found', `no route ${url.pathname}`));
        const auth = bearerCheck(req, o.tokens());
        if (auth !== 'ok')
          return send(
            res,
            auth,
            failure(
              auth === 401 ? 'unauthenticated' : 'forbidden',
              auth === 401
                ? 'an Authorization: Bearer token is required'
                : 'the bearer token is not valid for this query server',
            ),
          );
        let path;
        try {
          path = parseCubePath(url.pathname);
        } catch {
          path = undefined;
        }
        if (!path || path.action !== 'query' || !url.pathname.startsWith('/v1/namespaces/'))
          return send(res, 404, failure('not found', `no route ${url.pathname}`));
        if (req.method !== 'POST')
          return send(
            res,
            405,
            failure('method not allowed', `${req.method} is not allowed on ${url.pathname}`),
          );
        for (const [field, value] of [
          ['namespace', path.namespace],
          ['cube', path.name],
        ] as const)
          if (!cubeName.safeParse(value).success)
            return send(
              res,
              400,
              failure('invalid request', `${field} name '${value}' must be a DNS label`, field),
            );
        const body = await readBody(req);
        return send(res, 200, await o.service.answer(path.namespace, path.name, body));
      } catch (error) {
        if (error instanceof QueryError)
          return send(res, error.status, failure(words[error.status], error.message, error.field));
        o.logger.error('query failed', { path: url.pathname, error: (error as Error).stack });
        return send(res, 500, failure('internal error', (error as Error).message));
      }
    })();
  });
}
