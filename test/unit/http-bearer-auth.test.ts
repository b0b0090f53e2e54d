// Tokens by role: the admin token may do everything, the read token only what changes nothing.
import type { IncomingMessage } from 'node:http';
import { authorize, checkBearer } from '../../src/http/bearer-auth.ts';
import { parseReceiverConfig } from '../../src/receiver/config.ts';

const request = (authorization?: string): IncomingMessage =>
  ({ headers: authorization === undefined ? {} : { authorization } }) as IncomingMessage;

const admin = 'admin-token-0123456789';
const read = 'read-token-0123456789';

test.each([
  ['no header', undefined, 401],
  ['another scheme', `Basic ${admin}`, 401],
  ['the admin token', `Bearer ${admin}`, 'admin'],
  ['the read token', `Bearer ${read}`, 'read'],
  ['a wrong token', 'Bearer not-a-token-at-all', 403],
  ['the admin token with a byte more', `Bearer ${admin}x`, 403],
  ['an empty token', 'Bearer ', 403],
])('%s → %s', (_name, header, expected) => {
  expect(authorize(request(header), { admin: () => [admin], read: () => [read] })).toBe(expected);
});

test('without read tokens, only an admin token is accepted', () => {
  expect(authorize(request(`Bearer ${read}`), { admin: () => [admin] })).toBe(403);
  expect(authorize(request(`Bearer ${admin}`), { admin: () => [admin] })).toBe('admin');
});

test('one token given both roles is admin', () => {
  expect(authorize(request(`Bearer ${admin}`), { admin: () => [admin], read: () => [admin] })).toBe(
    'admin',
  );
});

test('during a rotation the replaced token of each role keeps its role', () => {
  const tokens = { admin: () => [`${admin}-new`, admin], read: () => [`${read}-new`, read] };
  expect(authorize(request(`Bearer ${admin}`), tokens)).toBe('admin');
  expect(authorize(request(`Bearer ${read}`), tokens)).toBe('read');
});

test('checkBearer: one role, as the query server uses it', () => {
  expect(checkBearer(request(`Bearer ${read}`), [read])).toBe(true);
  expect(checkBearer(request(`Bearer ${admin}`), [read])).toBe(403);
  expect(checkBearer(request(), [read])).toBe(401);
});

test('the receiver takes --read-token-file or STREAMCUBE_READ_TOKEN_FILE, and none by default', () => {
  const base = [
    '--replica-set=rs-a',
    '--data-dir=/d',
    '--deep-storage-dir=/s',
    '--admin-token-file=/a',
  ];
  expect(parseReceiverConfig(base, {}).readTokenFile).toBeUndefined();
  expect(parseReceiverConfig([...base, '--read-token-file=/r'], {}).readTokenFile).toBe('/r');
  expect(parseReceiverConfig(base, { STREAMCUBE_READ_TOKEN_FILE: '/e' }).readTokenFile).toBe('/e');
});
