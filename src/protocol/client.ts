// Typed client of the receiver admin API, for the operator and for tests. Failures throw
// ReceiverApiError carrying the status and the receiver's reason; an answer that does not match
// its zod definition throws InvalidReceiverResponse naming the field. Every call takes an optional
// AbortSignal (the operator's: lease lost, shutdown), combined with the call's own timeout.
import type { z } from 'zod';
import {
  cubeStatus,
  cubeSummaryAnswer,
  cubeSummaries,
  drainResponse,
  errorResponse,
  fenceResponse,
  leaderTermHeader,
  partitionsResponse,
  queryResponse,
  receiverStatus,
  unassignResponse,
  type AssignCubeRequest,
  type CubeStatus,
  type CubeSummary,
  type CubeSummaries,
  type DrainRequest,
  type DrainResponse,
  type ErrorResponse,
  type FenceRequest,
  type FenceResponse,
  type PartitionsResponse,
  type QueryRequest,
  type QueryResponse,
  type ReceiverStatus,
  type UnassignResponse,
  staleLeaderReason,
} from './admin-api.ts';
import type { BearerTokens } from './token-file.ts';
import { type CubeAction, type CubeKey, cubePath, defaultCubeNamespace } from './cube-paths.ts';

export class ReceiverApiError extends Error {
  readonly status: number;
  readonly body: ErrorResponse | undefined;
  constructor(status: number, message: string, body?: ErrorResponse) {
    super(message);
    this.status = status;
    this.body = body;
  }
}

/**
 * The receiver refused a mutating call (409 StaleLeader): it has seen a higher leader term for the
 * cube, so the operator that made the call is no longer the leader and must stop acting.
 */
export class StaleLeaderError extends ReceiverApiError {
  override readonly name = 'StaleLeaderError';
}

export const isStaleLeader = (error: unknown): error is StaleLeaderError =>
  error instanceof StaleLeaderError ||
  (error instanceof Error && error.cause !== undefined && isStaleLeader(error.cause));

/** The receiver answered 2xx with a body its admin API does not define (a wrong version, a bug). */
export class InvalidReceiverResponse extends Error {
  /** The dotted path of the first field at fault ('' for the whole body). */
  readonly field: string;
  constructor(message: string, field: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'InvalidReceiverResponse';
    this.field = field;
  }
}

export interface ReceiverClientOptions {
  /**
   * Called after every call that may change the receiver's state (not GET, not query), with the
   * cube it was about (undefined: any of the receiver's).
   */
  onMutation?: (cube?: CubeKey) => void;
  /**
   * The caller's leader term, sent with every mutating call (header x-streamcube-term);
   * undefined sends none (a call at term 0, as before fencing).
   */
  term?: () => number | undefined;
  /** Called when a receiver refuses a call as coming from a stale leader (before it throws). */
  onStaleLeader?: (error: StaleLeaderError) => void;
  /** The namespace of the cubes this client names (default: `default`); see `inNamespace`. */
  namespace?: string;
  /**
   * The largest answer read (bytes, default 64 MiB): a larger one is cut off and refused, so a
   * broken or hostile receiver cannot run the caller out of memory.
   */
  maxResponseBytes?: number;
  /** The fetch calls go through: HTTPS trusting the receivers' CA (src/http/tls.ts); global fetch by default. */
  fetch?: typeof fetch;
}

export const defaultMaxResponseBytes = 64 * 1024 * 1024;

/** The body as text, or undefined (the body cancelled) once it passes `maxBytes`. */
async function readBounded(response: Response, maxBytes: number): Promise<string | undefined> {
  const declared = Number(response.headers.get('content-length') ?? NaN);
  if (declared > maxBytes) {
    await response.body?.cancel();
    return undefined;
  }
  if (!response.body) return '';
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of response.body as AsyncIterable<Uint8Array>) {
    size += chunk.byteLength;
    if (size > maxBytes) {
      await response.body.cancel().catch(() => undefined);
      return undefined;
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** fetch failed because the peer closed the connection before answering (not a refusal). */
function closedByPeer(error: unknown): boolean {
  const code = (error as { cause?: { code?: unknown } } | undefined)?.cause?.code;
  return code === 'UND_ERR_SOCKET' || code === 'ECONNRESET';
}

/**
 * A receiver's admin API, for the cubes of one namespace: a cube is named by its namespace and
 * name, and `inNamespace` gives the same client for the cubes of another.
 */
export class ReceiverClient {
  readonly baseUrl: string;
  readonly namespace: string;
  private readonly options: ReceiverClientOptions | undefined;
  private readonly tokens: BearerTokens;
  private readonly timeoutMs: number;
  private readonly onMutation: ((cube?: CubeKey) => void) | undefined;
  private readonly term: (() => number | undefined) | undefined;
  private readonly onStaleLeader: ((error: StaleLeaderError) => void) | undefined;

  /**
   * `token`: one token, or the tokens valid now, newest first; a call the receiver refuses (403)
   * with the newest is made again with the next, for a receiver that has not seen a rotation yet.
   */
  constructor(
    baseUrl: string,
    token: string | BearerTokens,
    timeoutMs = 60_000,
    options?: ReceiverClientOptions,
  ) {
    this.baseUrl = baseUrl.replace(/\/$/, '');
    this.tokens = typeof token === 'string' ? () => [token] : token;
    this.timeoutMs = timeoutMs;
    this.onMutation = options?.onMutation;
    this.term = options?.term;
    this.onStaleLeader = options?.onStaleLeader;
    this.options = options;
    this.namespace = options?.namespace ?? defaultCubeNamespace;
  }

  /** This client, for the cubes of `namespace` (same receiver, tokens, term and callbacks). */
  inNamespace(namespace: string): ReceiverClient {
    if (namespace === this.namespace) return this;
    return new ReceiverClient(this.baseUrl, this.tokens, this.timeoutMs, {
      ...this.options,
      namespace,
    });
  }

  private path(cube: string, action?: CubeAction): string {
    return cubePath({ namespace: this.namespace, name: cube }, action);
  }

  private async call<T>(
    method: string,
    path: string,
    schema: z.ZodType<T>,
    options: {
      body?: unknown;
      signal?: AbortSignal;
      timeoutMs?: number;
      mutates?: boolean;
      /** The cube the call is about: told to onMutation. */
      cube?: string;
    } = {},
  ): Promise<T> {
    const { body, signal, timeoutMs = this.timeoutMs, mutates = method !== 'GET', cube } = options;
    const timeout = AbortSignal.timeout(timeoutMs);
    const where = `${method} ${this.baseUrl}${path}`;
    const term = mutates ? this.term?.() : undefined;
    const send = (token: string | undefined): Promise<Response> =>
      (this.options?.fetch ?? fetch)(`${this.baseUrl}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${token}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          ...(term === undefined ? {} : { [leaderTermHeader]: String(term) }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
      });
    let response: Response;
    try {
      const [newest, ...older] = this.tokens();
      response = await send(newest).catch((error: unknown) => {
        // A kept-alive connection the receiver closed while idle (its keep-alive ran out while
        // this process was paused or busy) fails the first request written on it. Every admin
        // call is idempotent: it is sent once more, on a new connection.
        if (signal?.aborted || timeout.aborted || !closedByPeer(error)) throw error;
        return send(newest);
      });
      for (const token of older) {
        if (response.status !== 403) break;
        await response.body?.cancel();
        response = await send(token);
      }
    } finally {
      // Sent or not, the receiver may have acted on it: what was read of it before is stale.
      if (mutates)
        this.onMutation?.(
          cube === undefined ? undefined : { namespace: this.namespace, name: cube },
        );
    }
    const maxBytes = this.options?.maxResponseBytes ?? defaultMaxResponseBytes;
    const text = await readBounded(response, maxBytes);
    if (text === undefined)
      throw new InvalidReceiverResponse(
        `${where}: the answer is larger than ${maxBytes} bytes; not read`,
        '',
      );
    let parsed: unknown = text;
    if (text.length > 0 && response.headers.get('content-type')?.includes('json')) {
      try {
        parsed = JSON.parse(text);
      } catch (error) {
        throw new InvalidReceiverResponse(`${where}: the answer is not valid JSON`, '', {
          cause: error,
        });
      }
    }
    if (!response.ok) {
      const err = errorResponse.safeParse(parsed);
      const reason = err.success ? err.data.reason : text;
      const message = err.success && err.data.message ? `: ${err.data.message}` : '';
      const field = err.success && err.data.field ? ` (field ${err.data.field})` : '';
      const description = `${where}: ${response.status} ${reason}${message}${field}`;
      if (response.status === 409 && err.success && err.data.reason === staleLeaderReason) {
        const stale = new StaleLeaderError(response.status, description, err.data);
        this.onStaleLeader?.(stale);
        throw stale;
      }
      throw new ReceiverApiError(response.status, description, err.success ? err.data : undefined);
    }
    const answer = schema.safeParse(parsed);
    if (!answer.success) {
      const issue = answer.error.issues[0];
      const field = issue?.path.join('.') ?? '';
      throw new InvalidReceiverResponse(
        `${where}: the receiver's answer does not match the admin API: ${field || 'body'}: ${issue?.message ?? 'invalid'}`,
        field,
        { cause: answer.error },
      );
    }
    return answer.data;
  }

  status = (signal?: AbortSignal): Promise<ReceiverStatus> =>
    this.call('GET', '/v1/status', receiverStatus, { signal });
  /** Every cube of the receiver, summarised (segments counted by state): one call for all. */
  cubes = (signal?: AbortSignal): Promise<CubeSummaries> =>
    this.call('GET', '/v1/cubes', cubeSummaries, { signal });
  cubeStatus = (cube: string, signal?: AbortSignal): Promise<CubeStatus> =>
    this.call('GET', this.path(cube), cubeStatus, { signal });
  /**
   * The cube's status with its segments counted, not listed (`?view=summary`): its partitions
   * and coverage at a fraction of the full status's cost, on the receiver and here.
   */
  cubeSummary = (cube: string, signal?: AbortSignal): Promise<CubeSummary> =>
    this.call('GET', `${this.path(cube)}?view=summary`, cubeSummaryAnswer, { signal });
  assign = (cube: string, request: AssignCubeRequest, signal?: AbortSignal): Promise<CubeStatus> =>
    this.call('PUT', this.path(cube), cubeStatus, { body: request, signal, cube });
  /** POST /v1/namespaces/:ns/cubes/:cube/<action> with a list of partitions; answers their states. */
  private partitionsCall =
    (action: 'pause' | 'resume') =>
    (cube: string, partitions: number[], signal?: AbortSignal): Promise<PartitionsResponse> =>
      this.call('POST', this.path(cube, action), partitionsResponse, {
        body: { partitions },
        signal,
        cube,
      });

  pause = this.partitionsCall('pause');
  resume = this.partitionsCall('resume');
  /**
   * With `stopOffsets` (partition → the offset its next owner starts from): a partition short of
   * it is refused (409), one past it released with the excess fenced.
   */
  release = (
    cube: string,
    partitions: number[],
    signal?: AbortSignal,
    stopOffsets?: Record<string, string>,
  ): Promise<PartitionsResponse> =>
    this.call('POST', this.path(cube, 'release'), partitionsResponse, {
      body: { partitions, ...(stopOffsets ? { stopOffsets } : {}) },
      signal,
      cube,
    });
  /** Long-polls up to `request.timeoutMs`; `done: false` with the positions when not finished. */
  drain = (cube: string, request: DrainRequest, signal?: AbortSignal): Promise<DrainResponse> =>
    this.call('POST', this.path(cube, 'drain'), drainResponse, {
      body: request,
      signal,
      cube,
      timeoutMs: (request.timeoutMs ?? 30_000) + this.timeoutMs,
    });
  /** Seals and starts the hand-off; waits for it up to `waitMs` (0: answers at once). */
  seal = (cube: string, waitMs = 0, signal?: AbortSignal): Promise<CubeStatus> =>
    this.call('POST', this.path(cube, 'seal'), cubeStatus, {
      body: { waitMs },
      signal,
      cube,
      timeoutMs: waitMs + this.timeoutMs,
    });
  /** Fences a lost replica set's copies of a cube and answers what it had committed. */
  fence = (cube: string, request: FenceRequest, signal?: AbortSignal): Promise<FenceResponse> =>
    this.call('POST', this.path(cube, 'fence'), fenceResponse, {
      body: request,
      signal,
      cube,
      timeoutMs: (request.graceMs ?? 5_000) + this.timeoutMs,
    });
  unassign = (cube: string, force = false, signal?: AbortSignal): Promise<UnassignResponse> =>
    this.call('DELETE', `${this.path(cube)}${force ? '?force=true' : ''}`, unassignResponse, {
      signal,
      cube,
    });
  query = (cube: string, request: QueryRequest, signal?: AbortSignal): Promise<QueryResponse> =>
    this.call('POST', this.path(cube, 'query'), queryResponse, {
      body: request,
      signal,
      mutates: false,
    });
}
