// Bytes sent as they are over a plain socket, for requests no HTTP client would send (a request
// target that is not a URL); resolves with everything the server answered before it closed.
import { once } from 'node:events';
import { connect } from 'node:net';

export async function rawHttp(port: number, head: string): Promise<string> {
  const socket = connect(port, '127.0.0.1');
  await once(socket, 'connect');
  let text = '';
  socket.on('data', (chunk: Buffer) => (text += chunk.toString('latin1')));
  socket.end(head);
  await once(socket, 'close');
  return text;
}
