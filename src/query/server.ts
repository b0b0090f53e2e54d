// The query server's HTTP API: unauthenticated /healthz, /readyz, /metrics; the bearer-token
// `POST /v1/namespaces/<ns>/cubes/<cube>/query`. Bad input is a 4xx naming the field.
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Registry } from 'prom-client';
import { cubeName } from '../api/cube.ts';
import { checkBearer } from '../http/bearer-auth.ts';
import {
  closeIfBodyUnread,
  createGuardedServer,
  readBoundedBody,
  tooLarge,
} from '../http/guarded-server.ts';
import type { Logger } from '../observability/logger.ts';
import type { ErrorResponse } from '../protocol/admin-api.ts';
import { parseCubePath } from '../protocol/cube-paths.ts';
import type { BearerTokens } from '../protocol/token-file.ts';
import type { QueryMetrics } from './metrics.ts';
import { QueryError } from './request.ts';
import { answerSql } from './sql.ts';
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
  closeIfBodyUnread(res);
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

async function readBody(req: IncomingMessage): Promise<unknown> {
  const body = await readBoundedBody(req, maxQueryBodyBytes);
  if (body === tooLarge)
    throw new QueryError(413, `the body is larger than ${maxQueryBodyBytes} bytes`);
  if (body.length === 0) return {};
  try {
    return JSON.parse(body.toString('utf8'));
  } catch (error) {
    throw new QueryError(400, `the body is not valid JSON: ${(error as Error).message}`);
  }
}

export function createQueryServer(o: QueryServerOptions): Server {
  const handle = async (req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> => {
    const timer = o.metrics.seconds.startTimer({ kind: 'http' });
    res.on('finish', () => {
      timer();
      o.metrics.requests.inc({ status: String(res.statusCode) });
    });
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
      const auth = checkBearer(req, o.tokens());
      if (auth !== true)
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
      const sqlPath = /^\/v1(?:\/namespaces\/([^/]+))?\/sql$/.exec(url.pathname);
      if (sqlPath) {
        if (req.method !== 'POST')
          return send(
            res,
            405,
            failure('method not allowed', `${req.method} is not allowed on ${url.pathname}`),
          );
        const namespace = sqlPath[1];
        if (namespace !== undefined && !cubeName.safeParse(namespace).success)
          return send(
            res,
            400,
            failure(
              'invalid request',
              `namespace name '${namespace}' must be a DNS label`,
              'namespace',
            ),
          );
        return send(res, 200, await answerSql(o.service, namespace, await readBody(req)));
      }
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
      // Unexpected: logged under a request id and answered with a generic 500 by the guard.
      throw error;
    }
  };
  return createGuardedServer(handle, {
    logger: o.logger,
    onUnexpectedError: () => o.metrics.unexpectedErrors.inc(),
  });
}
