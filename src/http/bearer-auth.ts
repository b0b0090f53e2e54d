// Bearer-token authentication of the /v1 APIs (receiver, query server): the presented token
// against those valid now (during a rotation, the new and the old), in constant time per token.
// A receiver knows two roles: the admin token may do everything, the read token only what
// changes nothing (status, cube status, query), so that a query service or a dashboard holding
// it cannot assign, unassign, fence or raise a leader term.
import { timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { BearerTokens } from '../protocol/token-file.ts';

/** What a token may do: `admin` everything, `read` only calls that change nothing. */
export type Role = 'admin' | 'read';

/** The tokens of each role valid now; without `read`, only admin tokens are accepted. */
export interface RoleTokens {
  admin: BearerTokens;
  read?: BearerTokens;
}

function presented(req: IncomingMessage): Buffer | undefined {
  const header = req.headers.authorization;
  return header?.startsWith('Bearer ') ? Buffer.from(header.slice('Bearer '.length)) : undefined;
}

function matches(given: Buffer, tokens: readonly string[]): boolean {
  // Every token is compared, so the time taken does not tell which one (or whether any) matched.
  let found = false;
  for (const token of tokens) {
    const expected = Buffer.from(token);
    if (given.length === expected.length && timingSafeEqual(given, expected)) found = true;
  }
  return found;
}

/** `true`, or the status to answer: 401 without a bearer token, 403 with a wrong one. */
export function checkBearer(req: IncomingMessage, tokens: readonly string[]): true | 401 | 403 {
  const given = presented(req);
  if (given === undefined) return 401;
  return matches(given, tokens) ? true : 403;
}

/**
 * The role of the presented token (admin first, when one token is both), or the status to
 * answer: 401 without a bearer token, 403 with one of neither role.
 */
export function authorize(req: IncomingMessage, tokens: RoleTokens): Role | 401 | 403 {
  const given = presented(req);
  if (given === undefined) return 401;
  if (matches(given, tokens.admin())) return 'admin';
  if (tokens.read && matches(given, tokens.read())) return 'read';
  return 403;
}
