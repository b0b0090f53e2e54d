// A test's server on a free loopback port, and its stop.
import { once } from 'node:events';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** Listens on 127.0.0.1 at a free port; resolves with the port once listening. */
export async function listenOnLoopback(server: Server): Promise<number> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return (server.address() as AddressInfo).port;
}

/** Closes `server` and every connection still open on it. */
export function closeNow(server: Server): void {
  server.closeAllConnections();
  server.close();
}
