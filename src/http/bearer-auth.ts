// Bearer-token authentication of the /v1 APIs (receiver, query server): the presented token
// against those valid now (during a rotation, the new and the old), in constant time per token.
import { timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

/** `true`, or the status to answer: 401 without a bearer token, 403 with a wrong one. */
export function checkBearer(req: IncomingMessage, tokens: readonly string[]): true | 401 | 403 {
  const header = req.headers.authorization;
  if (!header?.startsWith('Bearer ')) return 401;
  const given = Buffer.from(header.slice('Bearer '.length));
  return tokens.some((token) => {
    const expected = Buffer.from(token);
    return given.length === expected.length && timingSafeEqual(given, expected);
  })
    ? true
    : 403;
}
