// Typed client of the receiver admin API, for the operator and for tests. Failures throw
// ReceiverApiError carrying the status and the receiver's reason.
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
  private readonly token: string;
  private readonly timeoutMs: number;

  constructor(baseUrl: string, token: string, timeoutMs = 60_000) {
    this.baseUrl = baseUrl.replace(/\/$/, '');
    this.token = token;
    this.timeoutMs = timeoutMs;
  }

  private async call<T>(
    method: string,
    path: string,
    body?: unknown,
    timeoutMs = this.timeoutMs,
  ): Promise<T> {
    const response = await fetch(`${this.baseUrl}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${this.token}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(timeoutMs),
    });
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

  status = (): Promise<ReceiverStatus> => this.call('GET', '/v1/status');
  cubeStatus = (cube: string): Promise<CubeStatus> => this.call('GET', `/v1/cubes/${cube}`);
  assign = (cube: string, request: AssignCubeRequest): Promise<CubeStatus> =>
    this.call('PUT', `/v1/cubes/${cube}`, request);
  pause = (cube: string, partitions: number[]): Promise<{ partitions: PartitionStatus[] }> =>
    this.call('POST', `/v1/cubes/${cube}/pause`, { partitions });
  resume = (cube: string, partitions: number[]): Promise<{ partitions: PartitionStatus[] }> =>
    this.call('POST', `/v1/cubes/${cube}/resume`, { partitions });
  release = (cube: string, partitions: number[]): Promise<{ partitions: PartitionStatus[] }> =>
    this.call('POST', `/v1/cubes/${cube}/release`, { partitions });
  drain = (cube: string, request: DrainRequest): Promise<DrainResponse> =>
    this.call(
      'POST',
      `/v1/cubes/${cube}/drain`,
      request,
      (request.timeoutMs ?? 30_000) + this.timeoutMs,
    );
  seal = (cube: string, waitMs = 0): Promise<CubeStatus> =>
    this.call('POST', `/v1/cubes/${cube}/seal`, { waitMs }, waitMs + this.timeoutMs);
  unassign = (cube: string, force = false): Promise<unknown> =>
    this.call('DELETE', `/v1/cubes/${cube}${force ? '?force=true' : ''}`);
  query = (cube: string, request: QueryRequest): Promise<QueryResponse> =>
    this.call('POST', `/v1/cubes/${cube}/query`, request);
}
