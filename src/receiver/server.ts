// The receiver's HTTP server: unauthenticated /healthz, /readyz, /metrics; the bearer-token admin
// API and query under /v1, a cube's under /v1/namespaces/<ns>/cubes/<cube> (and, for namespace
// `default`, /v1/cubes/<cube>). Bad requests get 4xx naming the field; nothing is only logged.
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { z } from 'zod';
import { type RoleTokens, authorize } from '../http/bearer-auth.ts';
import {
  type ServerLimits,
  closeIfBodyUnread,
  createGuardedServer,
  readBoundedBody,
  tooLarge,
} from '../http/guarded-server.ts';
import type { Logger } from '../observability/logger.ts';
import {
  drainRequest,
  leaderTerm,
  leaderTermHeader,
  partitionsRequest,
  releaseRequest,
  queryRequest,
  assignCubeRequest,
  fenceRequest,
  sealRequest,
  staleLeaderReason,
  cubeName,
} from '../protocol/admin-api.ts';
import type { ErrorResponse } from '../protocol/admin-api.ts';
import {
  type CubeAction,
  type CubeKey,
  type ParsedCubePath,
  parseCubePath,
} from '../protocol/cube-paths.ts';
import { ChannelError, type ChannelErrorReason } from './channel-error.ts';
import type { Receiver } from './receiver.ts';

const maxBodyBytes = 4 * 1024 * 1024;

/** The status code and the `error` word of each reason the domain gives. */
const httpOf: Record<ChannelErrorReason, { status: number; error: string }> = {
  NotFound: { status: 404, error: 'not found' },
  Conflict: { status: 409, error: 'conflict' },
  Invalid: { status: 400, error: 'invalid request' },
  TooLarge: { status: 413, error: 'invalid request' },
  StaleLeader: { status: 409, error: 'stale leader' },
  Unavailable: { status: 503, error: 'unavailable' },
};

/** A route of the receiver as a whole: GET /v1/status, GET /v1/cubes. */
interface ReceiverRoute {
  method: string;
  path: string;
  handle: (receiver: Receiver) => unknown;
}

/** A route of one cube: its path names the cube (cube-paths.ts) and maybe an action. */
interface CubeRoute {
  method: string;
  action: CubeAction | undefined;
  /** Changes the receiver's state: fenced by the caller's leader term (every one but reads). */
  mutates: boolean;
  /**
   * Validates the body (zod throws: a 400 naming the field) before anything else is done with
   * the call, its leader term included: an invalid call changes nothing.
   */
  parse: (body: unknown) => unknown;
  /**
   * What the API server must agree with before the call's leader term is admitted (the assign's
   * source); throws a ChannelError when it does not.
   */
  precheck?: (receiver: Receiver, cube: CubeKey, request: never) => Promise<void>;
  handle: (receiver: Receiver, cube: CubeKey, request: never, url: URL) => unknown;
}

/**
 * `?view=` of a cube's GET: `full` (the default) lists its segments with their offsets, `summary`
 * counts them, as GET /v1/cubes does, for callers that need its partitions and coverage only.
 */
function cubeView(url: URL): 'full' | 'summary' {
  const view = url.searchParams.get('view') ?? 'full';
  if (view === 'full' || view === 'summary') return view;
  throw new ChannelError(
    'Invalid',
    `view ${JSON.stringify(view.slice(0, 40))} is not one of full, summary`,
    'view',
  );
}

const noBody = (): undefined => undefined;

/** A route whose handler takes what its `parse` returns. */
function cubeRoute<T>(route: {
  method: string;
  action: CubeAction | undefined;
  mutates: boolean;
  parse: (body: unknown) => T;
  precheck?: (receiver: Receiver, cube: CubeKey, request: T) => Promise<void>;
  handle: (receiver: Receiver, cube: CubeKey, request: T, url: URL) => unknown;
}): CubeRoute {
  return route;
}

const receiverRoutes: ReceiverRoute[] = [
  { method: 'GET', path: '/v1/status', handle: (r) => r.status() },
  { method: 'GET', path: '/v1/cubes', handle: (r) => r.summaries() },
];

const cubeRoutes: CubeRoute[] = [
  cubeRoute({
    method: 'PUT',
    action: undefined,
    mutates: true,
    parse: (body) => assignCubeRequest.parse(body),
    precheck: (r, cube, request) => r.checkAssign(cube, request),
    handle: (r, cube, request) => r.assign(cube, request, true),
  }),
  cubeRoute({
    method: 'GET',
    action: undefined,
    mutates: false,
    parse: noBody,
    handle: (r, cube, _request, url) =>
      cubeView(url) === 'summary' ? r.get(cube).summary() : r.get(cube).status(),
  }),
  cubeRoute({
    method: 'DELETE',
    action: undefined,
    mutates: true,
    parse: noBody,
    handle: async (r, cube, _request, url) => {
      await r.unassign(cube, url.searchParams.get('force') === 'true');
      return { namespace: cube.namespace, cube: cube.name, unassigned: true };
    },
  }),
  cubeRoute({
    method: 'POST',
    action: 'pause',
    mutates: true,
    parse: (body) => partitionsRequest.parse(body),
    handle: async (r, cube, request) => ({
      partitions: await r.get(cube).pause(request.partitions),
    }),
  }),
  cubeRoute({
    method: 'POST',
    action: 'resume',
    mutates: true,
    parse: (body) => partitionsRequest.parse(body),
    handle: async (r, cube, request) => ({
      partitions: await r.get(cube).resume(request.partitions),
    }),
  }),
  cubeRoute({
    method: 'POST',
    action: 'release',
    mutates: true,
    parse: (body) => releaseRequest.parse(body),
    handle: async (r, cube, request) => ({
      partitions: await r.get(cube).release(request.partitions, request.stopOffsets),
    }),
  }),
  cubeRoute({
    method: 'POST',
    action: 'drain',
    mutates: true,
    parse: (body) => drainRequest.parse(body),
    handle: (r, cube, request) => r.get(cube).drain(request.stopOffsets, request.timeoutMs),
  }),
  cubeRoute({
    method: 'POST',
    action: 'seal',
    mutates: true,
    parse: (body) => sealRequest.parse(body ?? {}),
    handle: (r, cube, request) => r.get(cube).seal(request.waitMs),
  }),
  cubeRoute({
    method: 'POST',
    action: 'fence',
    mutates: true,
    parse: (body) => fenceRequest.parse(body),
    handle: (r, cube, request) => r.fence(cube, request),
  }),
  cubeRoute({
    method: 'POST',
    action: 'query',
    mutates: false,
    parse: (body) => queryRequest.parse(body),
    handle: (r, cube, request) => r.get(cube).query(request),
  }),
];

/** What a path and method resolve to: a route, a path without that method, or nothing. */
type Resolved =
  | { kind: 'receiver'; route: ReceiverRoute; name: string }
  | { kind: 'cube'; route: CubeRoute; name: string; cube: ParsedCubePath }
  | { kind: 'method not allowed' }
  | { kind: 'no route' };

function resolveRoute(method: string, pathname: string): Resolved {
  const own = receiverRoutes.filter((r) => r.path === pathname);
  if (own.length > 0) {
    const route = own.find((r) => r.method === method);
    return route ? { kind: 'receiver', route, name: route.path } : { kind: 'method not allowed' };
  }
  let cube: ParsedCubePath | undefined;
  try {
    cube = parseCubePath(pathname);
  } catch {
    return { kind: 'no route' };
  }
  const candidates = cube ? cubeRoutes.filter((r) => r.action === cube.action) : [];
  if (!cube || candidates.length === 0) return { kind: 'no route' };
  const route = candidates.find((r) => r.method === method);
  return route ? { kind: 'cube', route, name: cube.route, cube } : { kind: 'method not allowed' };
}

function send(
  res: ServerResponse,
  status: number,
  body: unknown,
  contentType = 'application/json',
): void {
  const text = contentType === 'application/json' ? JSON.stringify(body) : String(body);
  closeIfBodyUnread(res);
  res.writeHead(status, { 'content-type': contentType, 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function errorBody(error: string, reason: string, field?: string): ErrorResponse {
  return field === undefined ? { error, reason } : { error, reason, field };
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const body = await readBoundedBody(req, maxBodyBytes);
  if (body === tooLarge)
    throw new ChannelError('TooLarge', `request body is larger than ${maxBodyBytes} bytes`);
  if (body.length === 0) return undefined;
  try {
    return JSON.parse(body.toString('utf8'));
  } catch (error) {
    throw new ChannelError(
      'Invalid',
      `request body is not valid JSON: ${(error as Error).message}`,
    );
  }
}

/**
 * Answers /healthz, /readyz and /metrics (no token: probes and scrapers have none) and returns the
 * route's name; undefined, answering nothing, for any other request.
 */
async function answerProbe(
  receiver: Receiver,
  req: IncomingMessage,
  res: ServerResponse,
  url: URL,
): Promise<string | undefined> {
  if (req.method !== 'GET') return undefined;
  switch (url.pathname) {
    case '/healthz':
      send(res, 200, 'ok', 'text/plain');
      return url.pathname;
    case '/readyz':
      if (receiver.isReady()) send(res, 200, 'ok', 'text/plain');
      else send(res, 503, 'starting', 'text/plain');
      return url.pathname;
    case '/metrics': {
      const { registry } = receiver.metrics;
      send(res, 200, await registry.metrics(), registry.contentType);
      return url.pathname;
    }
    default:
      return undefined;
  }
}

/**
 * The metrics port's server (`--metrics-port`): /metrics, /healthz and /readyz only, so that a
 * NetworkPolicy can open it to Prometheus while the admin port stays the operator's.
 */
export function createReceiverMetricsServer(
  receiver: Receiver,
  logger: Logger,
  limits?: ServerLimits,
): Server {
  return createGuardedServer(
    async (req, res, url) => {
      if ((await answerProbe(receiver, req, res, url)) === undefined)
        send(
          res,
          404,
          errorBody('not found', `the metrics port serves /metrics, /healthz and /readyz`),
        );
    },
    {
      logger,
      ...(limits ? { limits } : {}),
      onUnexpectedError: () => receiver.metrics.unexpectedErrors.inc(),
    },
  );
}

/**
 * `tokens`: the bearer tokens /v1 accepts now, by role (during a rotation, the new and the old):
 * the admin tokens for every call, the read tokens for those that change nothing.
 * `limits`: the server's timeouts and connection cap (defaults when absent).
 */
export function createReceiverServer(
  receiver: Receiver,
  logger: Logger,
  tokens: RoleTokens,
  limits?: ServerLimits,
  tls?: { cert: string; key: string },
): Server {
  const { metrics } = receiver;
  const handle = async (req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> => {
    const started = process.hrtime.bigint();
    let routeName = 'unmatched';
    res.on('finish', () => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      metrics.adminSeconds.observe(
        { method: req.method ?? '', route: routeName, status: String(res.statusCode) },
        seconds,
      );
    });
    try {
      const probe = await answerProbe(receiver, req, res, url);
      if (probe !== undefined) {
        routeName = probe;
        return;
      }
      if (!url.pathname.startsWith('/v1/'))
        return send(res, 404, errorBody('not found', `no route ${url.pathname}`));
      const auth = authorize(req, tokens);
      if (auth === 401 || auth === 403) {
        routeName = '/v1 (unauthorized)';
        return send(
          res,
          auth,
          errorBody(
            auth === 401 ? 'unauthenticated' : 'forbidden',
            auth === 401
              ? 'an Authorization: Bearer token is required'
              : 'the bearer token is not valid for this receiver',
          ),
        );
      }
      const resolved = resolveRoute(req.method ?? '', url.pathname);
      if (resolved.kind === 'method not allowed')
        return send(
          res,
          405,
          errorBody('method not allowed', `${req.method} is not allowed on ${url.pathname}`),
        );
      if (resolved.kind === 'no route')
        return send(res, 404, errorBody('not found', `no route ${url.pathname}`));
      routeName = resolved.name;
      if (resolved.kind === 'cube' && resolved.route.mutates && auth !== 'admin')
        return send(
          res,
          403,
          errorBody(
            'forbidden',
            `${req.method} ${resolved.name} changes the receiver: it needs the admin token, not the read token`,
          ),
        );
      if (resolved.kind === 'receiver')
        return send(res, 200, await resolved.route.handle(receiver));
      const { route } = resolved;
      const cube: CubeKey = { namespace: resolved.cube.namespace, name: resolved.cube.name };
      for (const [field, value] of [
        ['namespace', cube.namespace],
        ['cube', cube.name],
      ] as const) {
        if (!cubeName.safeParse(value).success) {
          return send(
            res,
            400,
            errorBody('invalid request', `${field} name '${value}' must be a DNS label`, field),
          );
        }
      }
      const body =
        req.method === 'GET' || req.method === 'DELETE' ? undefined : await readJson(req);
      const request = route.parse(body);
      await route.precheck?.(receiver, cube, request as never);
      if (route.mutates) {
        const header = req.headers[leaderTermHeader];
        const term = header === undefined ? 0 : leaderTerm.safeParse(header);
        if (typeof term !== 'number' && !term.success) {
          return send(
            res,
            400,
            errorBody('invalid request', `${leaderTermHeader} must be a decimal integer ≥ 0`),
          );
        }
        const at = typeof term === 'number' ? term : term.data;
        // A term is raised only by a valid call for a cube this receiver holds or is given, and
        // only as far as the bound allows (the Lease): any other call is refused when stale, but
        // leaves the cube's floor where it is.
        const highest = receiver.leaderTerms.check(cube, at);
        if (at > highest && (route.method === 'PUT' || receiver.holds(cube))) {
          await receiver.leaderTermBound.allowRaise(cube, at, highest);
          receiver.leaderTerms.admit(cube, at);
        }
      }
      const result = await route.handle(receiver, cube, request as never, url);
      return send(res, 200, result);
    } catch (error) {
      if (error instanceof z.ZodError) {
        const issue = error.issues[0];
        return send(
          res,
          400,
          errorBody(
            'invalid request',
            issue?.message ?? 'invalid',
            issue?.path.join('.') || undefined,
          ),
        );
      }
      if (error instanceof ChannelError && error.reason === 'StaleLeader') {
        const { status, error: word } = httpOf.StaleLeader;
        return send(res, status, {
          error: word,
          reason: staleLeaderReason,
          message: error.message,
        });
      }
      if (error instanceof ChannelError) {
        const { status, error: word } = httpOf[error.reason];
        return send(res, status, errorBody(word, error.message, error.field));
      }
      // Unexpected: the guarded server logs it under a request id and answers a generic 500
      // (the message may hold paths or storage keys a caller has no business seeing).
      throw error;
    }
  };
  return createGuardedServer(handle, {
    logger,
    ...(limits ? { limits } : {}),
    ...(tls ? { tls } : {}),
    onUnexpectedError: () => metrics.unexpectedErrors.inc(),
  });
}
