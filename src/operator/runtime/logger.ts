// The logging the runtime needs, shaped so that a winston logger can be passed as it is.
import { ApiException } from '@kubernetes/client-node';

export interface RuntimeLogger {
  debug(message: string, meta?: Record<string, unknown>): void;
  info(message: string, meta?: Record<string, unknown>): void;
  warn(message: string, meta?: Record<string, unknown>): void;
  error(message: string, meta?: Record<string, unknown>): void;
}

export const silentLogger: RuntimeLogger = {
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
};

/**
 * An error as a log field: for the API server's errors the status and its message (not the
 * headers and raw body client-node puts into `message`), for network errors also their cause.
 */
export function describeError(error: unknown): string {
  if (error instanceof ApiException) {
    const reason = statusMessage(error.body);
    return `HTTP ${error.code}${reason === undefined ? '' : `: ${reason}`}`;
  }
  if (!(error instanceof Error)) return String(error);
  // undici reports "fetch failed" / "terminated" and keeps the reason (ECONNRESET...) in `cause`.
  const cause = error.cause instanceof Error ? `: ${error.cause.message}` : '';
  return `${error.message}${cause}`;
}

function statusMessage(body: unknown): string | undefined {
  let status = body;
  if (typeof body === 'string') {
    try {
      status = JSON.parse(body);
    } catch {
      return body.slice(0, 200) || undefined;
    }
  }
  const message = (status as { message?: unknown } | null)?.message;
  return typeof message === 'string' ? message : undefined;
}
