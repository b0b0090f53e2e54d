// ReceiverClient checks every answer against the admin API's zod definition: a receiver that
// answers garbage is an error naming the field, not a cast that fails later somewhere else. It
// tells the operator of every call that may have changed the receiver, sends its leader term with
// each, and makes a call once more when a kept-alive connection was closed under it.
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  InvalidReceiverResponse,
  ReceiverApiError,
  ReceiverClient,
  StaleLeaderError,
  isStaleLeader,
} from '../../src/protocol/client.ts';

/** A receiver that answers every request with `answers[path]` (JSON, 200). */
async function fakeReceiver(answers: Record<string, unknown>): Promise<Server> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0]!;
    const body = JSON.stringify(answers[path] ?? { error: 'not found', reason: `no ${path}` });
    res.writeHead(path in answers ? 200 : 404, { 'content-type': 'application/json' });
    res.end(body);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return server;
}

const partition = {
  partition: 0,
  state: 'consuming',
  epoch: 1,
  position: '42',
  highWatermark: '50',
  lag: '8',
  stopOffset: null,
  watermark: null,
};
const summary = {
  namespace: 'default',
  cube: 'orders',
  replicaSet: 'rs-a',
  receiver: 'rs-a-0',
  topic: 'orders',
  specDigest: 'abc',
  partitions: [partition],
  segments: { active: 1, immutable: 0, handedOff: 2 },
  ingested: 10,
  rejected: {},
  consumer: { state: 'running', failures: 0 },
};

let server: Server;
let client: ReceiverClient;
const mutations: string[] = [];
beforeAll(async () => {
  server = await fakeReceiver({
    '/v1/cubes': { receiver: 'rs-a-0', replicaSet: 'rs-a', cubes: [summary] },
    '/v1/namespaces/default/cubes/orders/pause': { partitions: [{ ...partition, position: 42 }] },
    '/v1/namespaces/default/cubes/orders/resume': {
      partitions: [{ ...partition, state: 'resting' }],
    },
    '/v1/namespaces/default/cubes/orders/release': { partitions: [partition] },
    // A receiver of before ?view=summary answers the full status, its segments listed.
    '/v1/namespaces/default/cubes/orders': {
      ...summary,
      segments: ['ACTIVE', 'HANDED_OFF', 'HANDED_OFF'].map((state, n) => ({
        windowStart: n * 60_000,
        windowEnd: (n + 1) * 60_000,
        state,
        rowCount: 1,
        offsetRanges: { '0': [[String(n), String(n + 1)]] },
        epochs: { '0': 1 },
      })),
    },
    '/v1/namespaces/shop/cubes/orders': { ...summary, namespace: 'shop' },
    '/v1/namespaces/default/cubes/orders/query': {
      columns: [],
      rows: [],
      offsetRanges: {},
      segments: 0,
    },
  });
  const { port } = server.address() as AddressInfo;
  client = new ReceiverClient(`http://127.0.0.1:${port}`, 'token', 5_000, {
    onMutation: (cube) => mutations.push(cube ? `${cube.namespace}/${cube.name}` : 'any'),
  });
});
afterAll(() => server.close());
beforeEach(() => mutations.splice(0));

test('a valid answer is returned as parsed', async () => {
  expect((await client.cubes()).cubes[0]?.partitions[0]?.position).toBe('42');
});

test("a cube's summary is read as the receiver summarised it, or summarised here from a receiver's full status", async () => {
  expect(await client.inNamespace('shop').cubeSummary('orders')).toEqual({
    ...summary,
    namespace: 'shop',
  });
  expect(await client.cubeSummary('orders')).toEqual(summary);
});

test.each<[string, () => Promise<unknown>, string, string]>([
  [
    'an offset as a JSON number',
    () => client.pause('orders', [0]),
    'partitions.0.position',
    'Invalid input: expected string, received number',
  ],
  [
    'a state the API does not define',
    () => client.resume('orders', [0]),
    'partitions.0.state',
    'Invalid option',
  ],
])('%s: InvalidReceiverResponse naming the field', async (_, call, field, text) => {
  const error = await call().catch((e: unknown) => e);
  expect(error).toBeInstanceOf(InvalidReceiverResponse);
  expect((error as InvalidReceiverResponse).field).toBe(field);
  expect((error as Error).message).toContain(`${field}: ${text}`);
  expect((error as Error).message).toContain('/v1/namespaces/default/cubes/orders/');
});

test('mutating calls are reported with their cube, reads and queries are not', async () => {
  await client.cubes();
  await client.query('orders', {});
  expect(mutations).toEqual([]);
  await client.release('orders', [0]);
  await client.pause('orders', [0]).catch(() => undefined);
  await client
    .inNamespace('shop')
    .pause('orders', [0])
    .catch(() => undefined);
  expect(mutations).toEqual(['default/orders', 'default/orders', 'shop/orders']);
});

test('every mutating call carries the term header, reads do not; a 409 StaleLeader is thrown as StaleLeaderError and reported', async () => {
  const seen: string[] = [];
  const fencing = createServer((req, res) => {
    const term = String(req.headers['x-streamcube-term'] ?? '-');
    seen.push(`${req.method} ${req.url} ${term}`);
    const stale = req.method !== 'GET' && term === '2';
    res.writeHead(stale ? 409 : 200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify(
        stale
          ? { error: 'stale leader', reason: 'StaleLeader', message: 'term 3 seen; this is 2' }
          : req.method === 'GET'
            ? { receiver: 'rs-a-0', replicaSet: 'rs-a', cubes: [] }
            : { partitions: [partition] },
      ),
    );
  });
  fencing.listen(0, '127.0.0.1');
  await once(fencing, 'listening');
  const { port } = fencing.address() as AddressInfo;
  let term = 3;
  const refusals: string[] = [];
  const fenced = new ReceiverClient(`http://127.0.0.1:${port}`, 'token', 5_000, {
    term: () => term,
    onStaleLeader: (e) => refusals.push(e.message),
  });
  try {
    await fenced.cubes();
    await fenced.release('orders', [0]);
    term = 2;
    // The same client for another namespace's cubes: same term, same callbacks.
    const error = await fenced
      .inNamespace('team-a')
      .pause('orders', [0])
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StaleLeaderError);
    expect(error).toBeInstanceOf(ReceiverApiError);
    expect(isStaleLeader(new Error('wrapped', { cause: error }))).toBe(true);
    expect(refusals).toEqual([
      `POST http://127.0.0.1:${port}/v1/namespaces/team-a/cubes/orders/pause: 409 StaleLeader: term 3 seen; this is 2`,
    ]);
    expect(seen).toEqual([
      'GET /v1/cubes -',
      'POST /v1/namespaces/default/cubes/orders/release 3',
      'POST /v1/namespaces/team-a/cubes/orders/pause 2',
    ]);
  } finally {
    fencing.closeAllConnections();
    fencing.close();
  }
});

test('a kept-alive connection the receiver closed without answering: the call is sent once more, on a new connection', async () => {
  let requests = 0;
  const flaky = createServer((req, res) => {
    requests += 1;
    // The first request meets a connection closed under it, as after an idle keep-alive ran out.
    if (requests === 1) return req.socket.destroy();
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ partitions: [partition] }));
  });
  flaky.listen(0, '127.0.0.1');
  await once(flaky, 'listening');
  const { port } = flaky.address() as AddressInfo;
  try {
    const answer = await new ReceiverClient(`http://127.0.0.1:${port}`, 'token').release(
      'orders',
      [0],
    );
    expect(answer.partitions[0]?.position).toBe('42');
    expect(requests).toBe(2);
    // Once only: a receiver that keeps closing the connection is an error.
    requests = 0;
    const again = createServer((req) => req.socket.destroy());
    again.listen(0, '127.0.0.1');
    await once(again, 'listening');
    const other = (again.address() as AddressInfo).port;
    const error = await new ReceiverClient(`http://127.0.0.1:${other}`, 'token')
      .release('orders', [0])
      .catch((e: unknown) => e);
    again.close();
    expect((error as Error).message).toBe('fetch failed');
  } finally {
    flaky.closeAllConnections();
    flaky.close();
  }
});

test.each([
  ['declared by its length', false],
  ['streamed without a length', true],
])(
  'an answer larger than maxResponseBytes (%s) is cut off and refused, not read',
  async (_name, chunked) => {
    const huge = createServer((_req, res) => {
      const body = JSON.stringify({ receiver: 'x'.repeat(10_000), replicaSet: 'rs-a', cubes: [] });
      res.writeHead(200, {
        'content-type': 'application/json',
        ...(chunked ? {} : { 'content-length': Buffer.byteLength(body) }),
      });
      if (chunked) for (let i = 0; i < body.length; i += 1000) res.write(body.slice(i, i + 1000));
      res.end(chunked ? '' : body);
    });
    huge.listen(0, '127.0.0.1');
    await once(huge, 'listening');
    const { port } = huge.address() as AddressInfo;
    const at = (maxResponseBytes: number) =>
      new ReceiverClient(`http://127.0.0.1:${port}`, 'token', 5_000, { maxResponseBytes });
    await expect(at(4_096).cubes()).rejects.toThrow(InvalidReceiverResponse);
    await expect(at(4_096).cubes()).rejects.toThrow(/larger than 4096 bytes; not read/);
    expect((await at(1_000_000).cubes()).replicaSet).toBe('rs-a');
    huge.closeAllConnections();
    huge.close();
  },
);
