// Typed client of the receiver admin API, for the operator and for tests. Failures throw
// ReceiverApiError carrying the status and the receiver's reason. Every call takes an optional
// AbortSignal (the operator's: lease lost, shutdown), combined with the call's own timeout.
import type {
  AssignCubeRequest,
  CubeStatus,
  DrainRequest,
  DrainResponse,
  ErrorResponse,
  PartitionStatus,
  QueryRequest,
  QueryResponse,
  ReceiverStatus,
} from './admin-api.ts';
import type { BearerTokens } from './token-file.ts';

export class ReceiverApiError extends Error {
  readonly status: number;
  readonly body: ErrorResponse | undefined;
  constructor(status: number, message: string, body?: ErrorResponse) {
    super(message);
    this.status = status;
    this.body = body;
  }
}

export class ReceiverClient {
  readonly baseUrl: string;
  private readonly tokens: BearerTokens;
  private readonly timeoutMs: number;

  /**
   * `token`: one token, or the tokens valid now, newest first; a call the receiver refuses (403)
   * with the newest is made again with the next, for a receiver that has not seen a rotation yet.
   */
  constructor(baseUrl: string, token: string | BearerTokens, timeoutMs = 60_000) {
    this.baseUrl = baseUrl.replace(/\/$/, '');
    this.tokens = typeof token === 'string' ? () => [token] : token;
    this.timeoutMs = timeoutMs;
  }

  private async call<T>(
    method: string,
    path: string,
    body?: unknown,
    signal?: AbortSignal,
    timeoutMs = this.timeoutMs,
  ): Promise<T> {
    const timeout = AbortSignal.timeout(timeoutMs);
    const send = (token: string | undefined): Promise<Response> =>
      fetch(`${this.baseUrl}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${token}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
      });
    const [newest, ...older] = this.tokens();
    let response = await send(newest);
    for (const token of older) {
      if (response.status !== 403) break;
      await response.body?.cancel();
      response = await send(token);
    }
    const text = await response.text();
    const parsed: unknown =
      text.length > 0 && response.headers.get('content-type')?.includes('json')
        ? JSON.parse(text)
        : text;
    if (!response.ok) {
      const err = parsed as ErrorResponse;
      throw new ReceiverApiError(
        response.status,
        `${method} ${this.baseUrl}${path}: ${response.status} ${err.reason ?? text}${err.field ? ` (field ${err.field})` : ''}`,
        err,
      );
    }
    return parsed as T;
  }

  status = (signal?: AbortSignal): Promise<ReceiverStatus> =>
    this.call('GET', '/v1/status', undefined, signal);
  cubeStatus = (cube: string, signal?: AbortSignal): Promise<CubeStatus> =>
    this.call('GET', `/v1/cubes/${cube}`, undefined, signal);
  assign = (cube: string, request: AssignCubeRequest, signal?: AbortSignal): Promise<CubeStatus> =>
    this.call('PUT', `/v1/cubes/${cube}`, request, signal);
  /** POST /v1/cubes/:cube/<action> with a list of partitions; answers their states. */
  private partitionsCall =
    (action: 'pause' | 'resume' | 'release') =>
    (
      cube: string,
      partitions: number[],
      signal?: AbortSignal,
    ): Promise<{ partitions: PartitionStatus[] }> =>
      this.call('POST', `/v1/cubes/${cube}/${action}`, { partitions }, signal);

  pause = this.partitionsCall('pause');
  resume = this.partitionsCall('resume');
  release = this.partitionsCall('release');
  /** Long-polls up to `request.timeoutMs`; `done: false` with the positions when not finished. */
  drain = (cube: string, request: DrainRequest, signal?: AbortSignal): Promise<DrainResponse> =>
    this.call(
      'POST',
      `/v1/cubes/${cube}/drain`,
      request,
      signal,
      (request.timeoutMs ?? 30_000) + this.timeoutMs,
    );
  /** Seals and starts the hand-off; waits for it up to `waitMs` (0: answers at once). */
  seal = (cube: string, waitMs = 0, signal?: AbortSignal): Promise<CubeStatus> =>
    this.call('POST', `/v1/cubes/${cube}/seal`, { waitMs }, signal, waitMs + this.timeoutMs);
  unassign = (cube: string, force = false, signal?: AbortSignal): Promise<unknown> =>
    this.call('DELETE', `/v1/cubes/${cube}${force ? '?force=true' : ''}`, undefined, signal);
  query = (cube: string, request: QueryRequest, signal?: AbortSignal): Promise<QueryResponse> =>
    this.call('POST', `/v1/cubes/${cube}/query`, request, signal);
}
