// Each caller can do its job and no more, against the real API server, broker and receivers: the
// read token changes nothing; the operator calls receivers over TLS and refuses one whose
// certificate another CA signed or that names someone else; a leader term the Lease cannot
// explain (or, without a Lease, a jump) is refused; an assign naming other Secrets or brokers than
// the cube's CubeAssignment is refused. The receivers run with the chart's narrow rights: `get` on
// the cube's Secrets, its CubeAssignment and the operator's Lease.
import { readFileSync } from 'node:fs';
import { CoordinationV1Api, CoreV1Api } from '@kubernetes/client-node';
import { conditionOf, createNamespace, cubeApi, waitForCube } from '../support/cluster.ts';
import { createTopic, testSchema } from '../support/events.ts';
import { useOperatorStack } from '../support/operator-stack.ts';
import { makeReceiverCertificates } from '../support/receiver-certificates.ts';
import { metricValue } from '../support/receiver-checks.ts';
import { receiverKubeconfig, receiverRules } from '../support/receiver-kubeconfig.ts';
import { ReceiverProcess } from '../support/receiver-process.ts';
import { tempDir } from '../support/scratch-dirs.ts';

const certificates = await makeReceiverCertificates(tempDir('tokens-tls'));
const leaseName = 'streamcube-operator';
const plainCube = 'plain';
const securedCube = 'secured';

const stack = useOperatorStack({
  name: 'tokens-tls',
  replicaSets: ['rs-a'],
  receiver: { tls: certificates },
  operatorArgs: [`--receiver-ca-file=${certificates.caFile}`],
  prepare: async (s) => {
    const core = s.kc.makeApiClient(CoreV1Api);
    const auth = s.env.kafka.auth!;
    for (const [name, stringData] of [
      ['kafka-ca', { 'ca.crt': readFileSync(auth.caFile, 'utf8') }],
      ['scram512', { ...auth.users['scram-sha-512'] }],
      ['plain-user', { ...auth.users.plain }],
    ] as const)
      await core.createNamespacedSecret({
        namespace: s.namespace,
        body: { metadata: { name }, stringData },
      });
    const kubeconfig = await receiverKubeconfig(
      s.kc,
      s.namespace,
      receiverRules({
        secrets: ['kafka-ca', 'scram512', 'plain-user'],
        cubeAssignments: [plainCube, securedCube],
        lease: leaseName,
      }),
    );
    return { KUBECONFIG: kubeconfig, STREAMCUBE_LEADER_LEASE: `${s.namespace}/${leaseName}` };
  },
});
const { kc, env } = stack;
const receiver = () => stack.receivers['rs-a']!;

/** A call to the receiver's admin API by hand: status, and the error body's reason and field. */
async function call(
  method: string,
  path: string,
  o: { token: string; term?: number; body?: unknown },
): Promise<{ status: number; reason?: string; field?: string }> {
  const r = receiver();
  const response = await r.transport.fetch(`${r.baseUrl}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${o.token}`,
      'content-type': 'application/json',
      ...(o.term === undefined ? {} : { 'x-streamcube-term': String(o.term) }),
    },
    ...(o.body === undefined ? {} : { body: JSON.stringify(o.body) }),
  });
  const body = (await response.json()) as { reason?: string; field?: string; message?: string };
  return {
    status: response.status,
    ...(body.reason !== undefined ? { reason: body.message ?? body.reason } : {}),
    ...(body.field !== undefined ? { field: body.field } : {}),
  };
}

const cubePath = (cube: string) => `/v1/namespaces/${stack.namespace}/cubes/${cube}`;

/** The Lease's leaseTransitions now: the operator's term. */
async function leaseTransitions(): Promise<number> {
  const lease = await kc
    .makeApiClient(CoordinationV1Api)
    .readNamespacedLease({ namespace: stack.namespace, name: leaseName });
  return lease.spec?.leaseTransitions ?? 0;
}

async function leaderTermMetric(cube: string): Promise<number | undefined> {
  const r = receiver();
  const text = await (await r.transport.fetch(`${r.baseUrl}/metrics`)).text();
  return metricValue(text, 'streamcube_receiver_leader_term', {
    namespace: stack.namespace,
    cube,
  });
}

beforeAll(async () => {
  await stack.createCube(plainCube, await createTopic(stack.admin, 2), {
    replicaSets: ['rs-a'],
    strategy: 'range',
  });
  await stack.waitForSettled(plainCube, (c) => c.status?.assignment?.['rs-a']?.join() === '0,1');
});

test('the read token reads but changes nothing: every mutating call is 403', async () => {
  const { readToken } = receiver();
  const assign = (await cubeApi(kc).get(stack.namespace, plainCube)).spec;
  const mutations: [string, string, unknown][] = [
    [
      'PUT',
      cubePath(plainCube),
      { source: assign.source, schema: assign.schema, replicaSet: 'rs-a', partitions: [] },
    ],
    ['DELETE', `${cubePath(plainCube)}?force=true`, undefined],
    ['POST', `${cubePath(plainCube)}/pause`, { partitions: [0, 1] }],
    ['POST', `${cubePath(plainCube)}/release`, { partitions: [0] }],
    ['POST', `${cubePath(plainCube)}/seal`, {}],
    ['POST', `${cubePath(plainCube)}/fence`, { replicaSet: 'rs-b', id: 'f1', partitions: [0] }],
  ];
  for (const [method, path, body] of mutations) {
    const answer = await call(method, path, { token: readToken, body });
    expect({ method, path, status: answer.status }).toEqual({ method, path, status: 403 });
  }
  // Reads pass, and the cube is as the operator left it: both partitions consuming.
  expect((await call('GET', '/v1/status', { token: readToken })).status).toBe(200);
  const status = await receiver().client.cubeStatus(plainCube);
  expect(status.partitions.map((p) => [p.partition, p.state])).toEqual([
    [0, 'consuming'],
    [1, 'consuming'],
  ]);
});

test('a leader term above the Lease is refused naming it, and the operator keeps leading', async () => {
  const { token } = receiver();
  const term = await leaseTransitions();
  expect(await leaderTermMetric(plainCube)).toBe(term);
  const refused = await call('POST', `${cubePath(plainCube)}/resume`, {
    token,
    term: term + 1,
    body: { partitions: [0] },
  });
  expect(refused).toMatchObject({ status: 409, field: 'x-streamcube-term' });
  expect(refused.reason).toContain(
    `above Lease ${stack.namespace}/${leaseName}'s leaseTransitions (${term})`,
  );
  expect(await leaderTermMetric(plainCube)).toBe(term);
  // The operator's own calls still pass: a new partition of work is placed at its term.
  const next = 'after-refusal';
  await stack.createCube(next, await createTopic(stack.admin, 1), { replicaSets: ['rs-a'] });
  const settled = await stack.waitForSettled(
    next,
    (c) => c.status?.assignment?.['rs-a']?.join() === '0',
  );
  expect(conditionOf(settled, 'Degraded')?.status).toBe('False');
  expect(stack.operator.child?.exitCode).toBeNull();
});

test('without a Lease, a term may rise only by a bounded jump (the first one a cube gets is free)', async () => {
  const alone = new ReceiverProcess({
    id: 'no-lease-0',
    replicaSet: 'rs-a',
    deepStorageDir: tempDir('tokens-tls-no-lease'),
  });
  await alone.start({ STREAMCUBE_MAX_LEADER_TERM_JUMP: '10' });
  try {
    const put = async (term: number) => {
      const response = await fetch(`${alone.baseUrl}/v1/cubes/jumps`, {
        method: 'PUT',
        headers: {
          authorization: `Bearer ${alone.token}`,
          'content-type': 'application/json',
          'x-streamcube-term': String(term),
        },
        body: JSON.stringify({
          source: { brokers: [env.kafka.bootstrap], topic: 'jumps', startingOffsets: 'earliest' },
          schema: testSchema,
          replicaSet: 'rs-a',
          partitions: [],
        }),
      });
      return response.status;
    };
    expect(await put(500)).toBe(200);
    expect(await put(511)).toBe(409);
    expect(await put(510)).toBe(200);
    expect(alone.checkpoint('jumps')).toBeDefined();
  } finally {
    await alone.stop();
  }
});

describe('credentials only from the Secrets the CubeAssignment names', () => {
  const securedSource = (topic: string) => ({
    brokers: [env.kafka.auth!.bootstrap],
    topic,
    startingOffsets: 'earliest' as const,
    tls: { secretRef: 'kafka-ca' },
    sasl: { mechanism: 'scram-sha-512' as const, secretRef: 'scram512' },
  });
  let topic: string;

  beforeAll(async () => {
    topic = await createTopic(stack.admin, 1);
    await stack.createCube(securedCube, topic, {
      source: securedSource(topic),
      replicaSets: ['rs-a'],
    });
  });

  test('the operator assigns the secured cube: the receiver read its CubeAssignment and Secrets', async () => {
    const settled = await stack.waitForSettled(
      securedCube,
      (c) => c.status?.assignment?.['rs-a']?.join() === '0',
    );
    expect(conditionOf(settled, 'Degraded')?.status).toBe('False');
  });

  test.each<[string, (s: ReturnType<typeof securedSource>) => object, string]>([
    [
      'another Secret the receiver may read',
      (s) => ({ ...s, sasl: { mechanism: 'plain', secretRef: 'plain-user' } }),
      'source.sasl.secretRef',
    ],
    [
      'brokers of the caller’s choosing',
      (s) => ({ ...s, brokers: ['evil:9093'] }),
      'source.brokers',
    ],
  ])('a PUT naming %s is refused (409 naming the field)', async (_what, change, field) => {
    const { token } = receiver();
    const answer = await call('PUT', cubePath(securedCube), {
      token,
      term: await leaseTransitions(),
      body: {
        source: change(securedSource(topic)),
        schema: testSchema,
        replicaSet: 'rs-a',
        partitions: [],
      },
    });
    expect(answer).toMatchObject({ status: 409, field });
    expect(answer.reason).toContain(`CubeAssignment ${stack.namespace}/${securedCube} says`);
  });
});

describe('the operator refuses a receiver whose certificate does not match', () => {
  test.each([
    ['another CA', () => [`--receiver-ca-file=${certificates.otherCaFile}`]],
    ['another name', () => ['--receiver-server-name=not-the-receiver']],
  ])('%s: the cube is never assigned there, and says why', async (what, args) => {
    const namespace = await createNamespace(kc, 'tokens-tls-cert');
    const cube = 'refused';
    await stack.startOperator({}, namespace, args());
    await cubeApi(kc).create(namespace, cube, {
      source: {
        brokers: [env.kafka.bootstrap],
        topic: await createTopic(stack.admin, 1),
        startingOffsets: 'earliest',
      },
      schema: testSchema,
      replicaSets: ['rs-a'],
    });
    const degraded = await waitForCube(
      kc,
      namespace,
      cube,
      `Degraded: the receiver's certificate (${what})`,
      (c) => conditionOf(c, 'Degraded')?.status === 'True',
    );
    expect(degraded.status?.assignment?.['rs-a'] ?? []).toEqual([]);
    expect(conditionOf(degraded, 'Degraded')?.message).toMatch(/rs-a-0/);
    const held = await call('GET', `/v1/namespaces/${namespace}/cubes/${cube}`, {
      token: receiver().token,
    });
    expect(held.status).toBe(404);
  });
});
