// A receiver does only what the cube allows: a leader term rises only as far as the Lease (or,
// without one, a bounded jump) explains, and an assign naming Secrets is taken only when the
// CubeAssignment names the same Secrets and brokers. The rules alone, then through the real HTTP
// server with the API server's answers faked: a refused call stores no term.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { KafkaSource } from '../../src/api/cube.ts';
import { sourceMismatch } from '../../src/receiver/assigned-source.ts';
import { ChannelError } from '../../src/receiver/channel-error.ts';
import {
  jumpTermBound,
  leaseTermBound,
  maxLeaseTerm,
} from '../../src/receiver/leader-term-bound.ts';
import { Receiver, type ReceiverApiReads } from '../../src/receiver/receiver.ts';
import { testSchema } from '../support/events.ts';
import { useInProcessReceiver } from '../support/in-process-receiver.ts';

const clicks = { namespace: 'team-a', name: 'clicks' };

/** The refusal of `allowRaise`, or 'allowed'. */
const outcome = (promise: Promise<void>): Promise<string> =>
  promise.then(
    () => 'allowed',
    (error: unknown) => (error instanceof ChannelError ? error.reason : String(error)),
  );

describe('a term without a Lease rises by a bounded jump', () => {
  const bound = jumpTermBound(1_000);
  test.each([
    ['the first term of a cube, however high', 0, 900_000, 'allowed'],
    ['a first term no Lease can hold', 0, maxLeaseTerm + 1, 'Conflict'],
    ['a rise of exactly the jump', 5, 1_005, 'allowed'],
    ['a rise past the jump', 5, 1_006, 'Conflict'],
    ['the next takeover', 41, 42, 'allowed'],
  ])('%s: %d → %d is %s', async (_what, highest, term, expected) => {
    expect(await outcome(bound.allowRaise(clicks, term, highest))).toBe(expected);
  });
});

describe('a term with a Lease is at most its leaseTransitions', () => {
  function leaseOf(transitions: (number | undefined | Error)[]) {
    let time = 0;
    const reads: number[] = [];
    const bound = leaseTermBound({
      lease: 'ops/streamcube-operator',
      cacheMs: 5_000,
      now: () => time,
      read: () => {
        reads.push(time);
        const next = transitions.shift();
        return next instanceof Error ? Promise.reject(next) : Promise.resolve(next);
      },
    });
    return { bound, reads, advance: (ms: number) => (time += ms) };
  }

  test('a term the Lease explains is allowed; above it, refused naming the Lease and its value', async () => {
    const { bound } = leaseOf([3, 3]);
    expect(await outcome(bound.allowRaise(clicks, 3, 2))).toBe('allowed');
    const refused = await bound.allowRaise(clicks, 4, 3).catch((e: unknown) => e as ChannelError);
    expect(refused).toBeInstanceOf(ChannelError);
    expect((refused as ChannelError).reason).toBe('Conflict');
    expect((refused as ChannelError).field).toBe('x-streamcube-term');
    expect((refused as ChannelError).message).toMatch(
      /leader term 4 of cube team-a\/clicks is above Lease ops\/streamcube-operator's leaseTransitions \(3\)/,
    );
  });

  test('a value read answers lower terms for a while; a higher term reads the Lease again at once (a takeover)', async () => {
    const { bound, reads, advance } = leaseOf([3, 4, 4]);
    expect(await outcome(bound.allowRaise(clicks, 3, 0))).toBe('allowed');
    advance(1_000);
    expect(await outcome(bound.allowRaise(clicks, 2, 0))).toBe('allowed');
    expect(reads).toEqual([0]);
    // The operator that just took the Lease: the cache says 3, the Lease says 4 now.
    expect(await outcome(bound.allowRaise(clicks, 4, 3))).toBe('allowed');
    expect(reads).toEqual([0, 1_000]);
    advance(5_000);
    expect(await outcome(bound.allowRaise(clicks, 4, 3))).toBe('allowed');
    expect(reads).toEqual([0, 1_000, 6_000]);
  });

  test('no Lease refuses every rise; a Lease that cannot be read is Unavailable (retry)', async () => {
    const { bound } = leaseOf([undefined, new Error('HTTP 403 from the API server'), 9]);
    expect(await outcome(bound.allowRaise(clicks, 1, 0))).toBe('Conflict');
    expect(await outcome(bound.allowRaise(clicks, 1, 0))).toBe('Unavailable');
    expect(await outcome(bound.allowRaise(clicks, 1, 0))).toBe('allowed');
  });
});

describe('an assign source against the CubeAssignment', () => {
  const declared: KafkaSource = {
    brokers: ['kafka-0:9093', 'kafka-1:9093'],
    topic: 'clicks',
    startingOffsets: 'earliest',
    tls: { secretRef: 'kafka-ca' },
    sasl: { mechanism: 'scram-sha-512', secretRef: 'clicks-user' },
  };
  test.each<[string, Partial<KafkaSource>, string | undefined]>([
    ['the same source', {}, undefined],
    ['the brokers in another order', { brokers: ['kafka-1:9093', 'kafka-0:9093'] }, undefined],
    ['another broker', { brokers: ['evil:9093'] }, 'source.brokers'],
    ['another CA Secret', { tls: { secretRef: 'other-ca' } }, 'source.tls.secretRef'],
    ['no TLS', { tls: undefined }, 'source.tls'],
    [
      'another SASL Secret',
      { sasl: { mechanism: 'scram-sha-512', secretRef: 'admin-user' } },
      'source.sasl.secretRef',
    ],
    [
      'another mechanism',
      { sasl: { mechanism: 'plain', secretRef: 'clicks-user' } },
      'source.sasl.mechanism',
    ],
    ['another topic (no credential goes elsewhere)', { topic: 'other' }, undefined],
  ])('%s: %s', (_what, change, field) => {
    expect(sourceMismatch({ ...declared, ...change }, declared)?.field).toBe(field);
  });
});

describe('through the admin API', () => {
  const token = 'bounds-token';
  const leaseTransitions = { value: 4 as number | undefined };
  const assignedSources = new Map<string, unknown>();
  const reads: ReceiverApiReads = {
    leaseTransitions: () => Promise.resolve(leaseTransitions.value),
    assignedSource: (cube) =>
      Promise.resolve(assignedSources.get(`${cube.namespace}/${cube.name}`)),
  };
  const served = useInProcessReceiver({
    token,
    config: { leaderLease: { namespace: 'ops', name: 'streamcube-operator' } },
    apiReads: reads,
  });
  let receiver: Receiver;
  let baseUrl: string;
  let dir: string;

  beforeAll(() => {
    ({ receiver, baseUrl, dataDir: dir } = served);
  });

  const put = async (cube: string, source: KafkaSource, term: number) => {
    const response = await fetch(`${baseUrl}/v1/namespaces/team-a/cubes/${cube}`, {
      method: 'PUT',
      headers: {
        authorization: `Bearer ${token}`,
        'content-type': 'application/json',
        'x-streamcube-term': String(term),
      },
      body: JSON.stringify({ source, schema: testSchema, replicaSet: 'rs-a', partitions: [] }),
    });
    const body = (await response.json()) as { reason?: string; field?: string };
    return { status: response.status, field: body.field, reason: body.reason };
  };
  const termFile = (cube: string) => join(dir, 'leader-terms', 'team-a', `${cube}.json`);
  const plain: KafkaSource = {
    brokers: ['127.0.0.1:1'],
    topic: 'clicks',
    startingOffsets: 'earliest',
  };

  test('a term above the Lease is refused with 409 naming the header, and nothing is stored', async () => {
    const refused = await put('clicks', plain, 5);
    expect(refused).toMatchObject({ status: 409, field: 'x-streamcube-term' });
    expect(refused.reason).toMatch(/above Lease ops\/streamcube-operator's leaseTransitions \(4\)/);
    expect(existsSync(termFile('clicks'))).toBe(false);
    expect(receiver.holds({ namespace: 'team-a', name: 'clicks' })).toBe(false);
    // The Lease's own term passes the bound (the suite tokens-and-tls assigns at it for real).
    await expect(
      receiver.leaderTermBound.allowRaise({ namespace: 'team-a', name: 'clicks' }, 4, 0),
    ).resolves.toBeUndefined();
  });

  test('an assign naming Secrets the CubeAssignment does not name is refused before its term is stored', async () => {
    const secured: KafkaSource = {
      ...plain,
      topic: 'orders',
      tls: { secretRef: 'kafka-ca' },
      sasl: { mechanism: 'scram-sha-512', secretRef: 'orders-user' },
    };
    // No CubeAssignment at all.
    expect(await put('orders', secured, 4)).toMatchObject({ status: 409, field: 'source' });
    assignedSources.set('team-a/orders', {
      ...secured,
      sasl: { mechanism: 'scram-sha-512', secretRef: 'orders-reader' },
    });
    const refused = await put('orders', secured, 4);
    expect(refused).toMatchObject({ status: 409, field: 'source.sasl.secretRef' });
    expect(refused.reason).toMatch(/CubeAssignment team-a\/orders says "orders-reader"/);
    expect(existsSync(termFile('orders'))).toBe(false);
    expect(receiver.holds({ namespace: 'team-a', name: 'orders' })).toBe(false);
  });
});
