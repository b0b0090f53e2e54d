// Fencing by leader term on the receiver: the highest term per cube (namespace and name) is kept
// on disk and outlives a restart and an unassign; a lower one is refused. Then through the real
// HTTP server and client: every mutating call carries the term header, reads and queries are not
// fenced, a refusal is a 409 StaleLeader that the client throws as StaleLeaderError and reports,
// and the receiver counts it; paths name the cube's namespace.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ChannelError } from '../../src/receiver/channel-error.ts';
import { LeaderTerms } from '../../src/receiver/leader-terms.ts';
import { Receiver } from '../../src/receiver/receiver.ts';
import { ReceiverApiError, ReceiverClient, StaleLeaderError } from '../../src/protocol/client.ts';
import { testSchema } from '../support/events.ts';
import { useInProcessReceiver } from '../support/in-process-receiver.ts';
import { metricValue } from '../support/receiver-checks.ts';
import { scratchDirs } from '../support/scratch-dirs.ts';

const scratch = scratchDirs();

const dataDir = (): string => scratch('streamcube-terms-');
const clicks = { namespace: 'team-a', name: 'clicks' };
const orders = { namespace: 'team-a', name: 'orders' };

describe('LeaderTerms', () => {
  test('a fresh cube is at term 0 and takes calls without a term; a higher term is kept on disk before it acts', () => {
    const dir = dataDir();
    const terms = new LeaderTerms({ dataDir: dir });
    expect(terms.highestFor(clicks)).toBe(0);
    terms.admit(clicks, 0);
    expect(existsSync(join(dir, 'leader-terms', 'team-a', 'clicks.json'))).toBe(false);
    terms.admit(clicks, 3);
    expect(
      JSON.parse(readFileSync(join(dir, 'leader-terms', 'team-a', 'clicks.json'), 'utf8')),
    ).toEqual({
      term: 3,
    });
    terms.admit(clicks, 3);
    expect(terms.highestFor(clicks)).toBe(3);
  });

  test('a lower term is refused (StaleLeader) and counted, per cube; the refusal survives a restart', () => {
    const dir = dataDir();
    const stale: string[] = [];
    const terms = new LeaderTerms({ dataDir: dir, onStale: (cube) => stale.push(cube.name) });
    terms.admit(clicks, 5);
    let refused: unknown;
    try {
      terms.admit(clicks, 4);
    } catch (error) {
      refused = error;
    }
    expect(refused).toBeInstanceOf(ChannelError);
    expect((refused as ChannelError).reason).toBe('StaleLeader');
    expect((refused as ChannelError).message).toMatch(/term 5 on; this call carries term 4/);
    // Another cube has its own term.
    terms.admit(orders, 1);
    expect(stale).toEqual(['clicks']);

    const restarted = new LeaderTerms({ dataDir: dir, onStale: (cube) => stale.push(cube.name) });
    expect(() => restarted.admit(clicks, 0)).toThrow(ChannelError);
    expect(restarted.highestFor(orders)).toBe(1);
    expect(stale).toEqual(['clicks', 'clicks']);
  });
});

test('cubes of one name in two namespaces keep their own terms; a term kept before namespaces is the floor of both', () => {
  const dir = dataDir();
  mkdirSync(join(dir, 'leader-terms'));
  writeFileSync(join(dir, 'leader-terms', 'clicks.json'), JSON.stringify({ term: 4 }));
  const terms = new LeaderTerms({ dataDir: dir });
  const otherClicks = { namespace: 'team-b', name: 'clicks' };
  expect(terms.highestFor(clicks)).toBe(4);
  expect(terms.highestFor(otherClicks)).toBe(4);
  expect(() => terms.admit(otherClicks, 3)).toThrow(ChannelError);
  terms.admit(clicks, 9);
  // team-b's operator (another Lease, a lower term) is not fenced by team-a's.
  terms.admit(otherClicks, 5);
  expect(() => terms.admit(clicks, 5)).toThrow(ChannelError);
  const restarted = new LeaderTerms({ dataDir: dir });
  expect([restarted.highestFor(clicks), restarted.highestFor(otherClicks)]).toEqual([9, 5]);
  expect(
    JSON.parse(readFileSync(join(dir, 'leader-terms', 'team-b', 'clicks.json'), 'utf8')),
  ).toEqual({
    term: 5,
  });
});

describe('the admin API fenced by leader term', () => {
  const token = 'terms-token';
  const served = useInProcessReceiver({ token });
  let receiver: Receiver;
  let baseUrl: string;

  beforeAll(() => {
    ({ receiver, baseUrl } = served);
  });

  /** A pause of cube clicks sent by hand, with the term header `term` and the body `partitions`. */
  const pauseWithTerm = (term: string, partitions: unknown[]): Promise<Response> =>
    fetch(`${baseUrl}/v1/cubes/clicks/pause`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${token}`,
        'content-type': 'application/json',
        'x-streamcube-term': term,
      },
      body: JSON.stringify({ partitions }),
    });

  const clientAt = (term: number | undefined, refusals: string[] = []): ReceiverClient =>
    new ReceiverClient(baseUrl, token, 5_000, {
      term: () => term,
      onStaleLeader: (error) => refusals.push(error.message),
    });

  /** The call's HTTP status: 404 means it passed the fence and found no such cube. */
  const statusOf = async (call: Promise<unknown>): Promise<number> => {
    try {
      await call;
      return 200;
    } catch (error) {
      if (error instanceof ReceiverApiError) return error.status;
      throw error;
    }
  };

  test('every mutating call at a lower term is refused with 409 StaleLeader; reads and queries are not fenced', async () => {
    // A call for a cube not held takes no term (below); the leader's term is given directly.
    expect(await statusOf(clientAt(7).pause('clicks', [0]))).toBe(404);
    expect(receiver.leaderTerms.highestFor({ namespace: 'default', name: 'clicks' })).toBe(0);
    receiver.leaderTerms.admit({ namespace: 'default', name: 'clicks' }, 7);

    const refusals: string[] = [];
    const deposed = clientAt(6, refusals);
    const calls: [string, () => Promise<unknown>][] = [
      ['pause', () => deposed.pause('clicks', [0])],
      ['resume', () => deposed.resume('clicks', [0])],
      ['release', () => deposed.release('clicks', [0])],
      ['drain', () => deposed.drain('clicks', { stopOffsets: { '0': '5' }, timeoutMs: 0 })],
      ['seal', () => deposed.seal('clicks')],
      ['unassign', () => deposed.unassign('clicks', true)],
      [
        'assign',
        () =>
          deposed.assign('clicks', {
            source: { brokers: ['127.0.0.1:1'], topic: 'clicks', startingOffsets: 'earliest' },
            schema: testSchema,
            replicaSet: 'rs-a',
            partitions: [],
          }),
      ],
    ];
    for (const [name, call] of calls) {
      const error = await call().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect([name, error]).toEqual([name, expect.any(StaleLeaderError)]);
      expect((error as StaleLeaderError).status).toBe(409);
      expect((error as StaleLeaderError).body?.reason).toBe('StaleLeader');
    }
    expect(refusals).toHaveLength(calls.length);
    expect(refusals[0]).toMatch(
      /409 StaleLeader: cube default\/clicks takes calls from leader term 7 on/,
    );

    // A call without a term is a call at term 0: refused too, once a term was seen.
    expect(
      await clientAt(undefined)
        .pause('clicks', [0])
        .catch((e: unknown) => e),
    ).toBeInstanceOf(StaleLeaderError);
    // Reads and queries are not fenced: they find no cube.
    expect(await statusOf(deposed.cubeStatus('clicks'))).toBe(404);
    expect(await statusOf(deposed.query('clicks', {}))).toBe(404);
    // Another cube knows no term yet, and a call for it, not held here, takes none.
    expect(await statusOf(deposed.pause('orders', [0]))).toBe(404);

    const metrics = await receiver.metrics.registry.metrics();
    expect(
      metricValue(metrics, 'streamcube_receiver_stale_leader_requests_total', {
        namespace: 'default',
        cube: 'clicks',
      }),
    ).toBe(calls.length + 1);
    expect(
      metricValue(metrics, 'streamcube_receiver_leader_term', {
        namespace: 'default',
        cube: 'clicks',
      }),
    ).toBe(7);
    expect(
      metricValue(metrics, 'streamcube_receiver_leader_term', {
        namespace: 'default',
        cube: 'orders',
      }),
    ).toBe(0);
  });

  test('an invalid call raises no term', async () => {
    const cube = { namespace: 'default', name: 'clicks' };
    const floor = receiver.leaderTerms.highestFor(cube);
    // 10^15 - 1 with a body that is not valid: a 400 naming the field, the floor unchanged.
    const invalid = await pauseWithTerm('999999999999999', ['x']);
    expect([invalid.status, ((await invalid.json()) as { field?: string }).field]).toEqual([
      400,
      'partitions.0',
    ]);
    expect(receiver.leaderTerms.highestFor(cube)).toBe(floor);
  });

  test('paths name the namespace: the route of before is `default`, a cube of the name elsewhere has its own term, bad names and a body naming another namespace are 400s naming the field', async () => {
    const call = (method: string, path: string, body?: unknown, term?: number) =>
      fetch(`${baseUrl}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${token}`,
          'content-type': 'application/json',
          ...(term === undefined ? {} : { 'x-streamcube-term': String(term) }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    const answer = async (response: Response) => ({
      status: response.status,
      field: ((await response.json()) as { field?: string }).field,
    });
    const pause = { partitions: [0] };
    // default/clicks took term 7 above, through both spellings of its path.
    expect((await call('POST', '/v1/cubes/clicks/pause', pause, 6)).status).toBe(409);
    expect((await call('POST', '/v1/namespaces/default/cubes/clicks/pause', pause, 6)).status).toBe(
      409,
    );
    // team-a's clicks is fenced on its own: term 6 passes, and finds no such cube.
    expect((await call('POST', '/v1/namespaces/team-a/cubes/clicks/pause', pause, 6)).status).toBe(
      404,
    );
    expect(await answer(await call('GET', '/v1/namespaces/Team_A/cubes/clicks'))).toEqual({
      status: 400,
      field: 'namespace',
    });
    expect(await answer(await call('GET', '/v1/namespaces/team-a/cubes/Clicks'))).toEqual({
      status: 400,
      field: 'cube',
    });
    expect((await call('POST', '/v1/namespaces/team-a/cubes/clicks/bogus', pause)).status).toBe(
      404,
    );
    expect((await call('DELETE', '/v1/namespaces/team-a/cubes/clicks/pause')).status).toBe(405);
    const assign = {
      namespace: 'team-b',
      source: { brokers: ['127.0.0.1:1'], topic: 'clicks', startingOffsets: 'earliest' },
      schema: testSchema,
      replicaSet: 'rs-a',
      partitions: [],
    };
    expect(
      await answer(await call('PUT', '/v1/namespaces/team-a/cubes/clicks', assign, 7)),
    ).toEqual({ status: 400, field: 'namespace' });
    expect(await answer(await call('PUT', '/v1/cubes/clicks', assign, 7))).toEqual({
      status: 400,
      field: 'namespace',
    });
  });

  test('a term header that is not a decimal integer is a 400', async () => {
    const response = await pauseWithTerm('-1', [0]);
    expect(response.status).toBe(400);
    expect(((await response.json()) as { reason: string }).reason).toMatch(/x-streamcube-term/);
  });
});
