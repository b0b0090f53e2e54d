// A cube whose source is a SASL_SSL listener: the operator and the receivers read the CA and the
// credentials from the Secrets `spec.source.tls` and `spec.source.sasl` name, and read the topic
// over TLS with SCRAM-SHA-512 or PLAIN, totals exact. A refused password is Degraded
// SourceAuthFailed with the broker's message, an untrusted CA Degraded SourceTLSFailed; no
// password appears in a log, the status or an Event.
import { readFileSync } from 'node:fs';
import { CoreV1Api } from '@kubernetes/client-node';
import type { CubeAssignment } from '../../src/api/cube-assignment.ts';
import { receiverKubeconfig, receiverRules } from '../support/receiver-kubeconfig.ts';
import { createTopic, highWatermarks, makeEvents, produce } from '../support/events.ts';
import { conditionOf, cubeApi } from '../support/cluster.ts';
import { waitForPositions, expectQueriedTotals } from '../support/receiver-checks.ts';
import { setScramPassword } from '../support/scram-user.ts';
import { waitFor } from '../support/wait.ts';
import { useOperatorStack } from '../support/operator-stack.ts';

// Topics are made and written on the PLAINTEXT listener of the same broker (stack.kafka).
const stack = useOperatorStack({
  name: 'source-auth',
  replicaSets: ['rs-a'],
  prepare: async () => {
    await secret('kafka-ca', { 'ca.crt': readFileSync(auth.caFile, 'utf8') });
    await secret('other-ca', { 'ca.crt': readFileSync(auth.otherCaFile, 'utf8') });
    await secret('scram512', { ...auth.users['scram-sha-512'] });
    await secret('plain', { ...auth.users.plain });
    await secret('scram256-wrong', {
      username: auth.users['scram-sha-256'].username,
      password: wrongPassword,
    });
    // Secrets read again every second (30 s by default): the rotation test waits on it.
    // The receivers may read these Secrets and the CubeAssignments that name them, as the chart's
    // receiver Role allows, and nothing else.
    const kubeconfig = await receiverKubeconfig(
      kc,
      stack.namespace,
      receiverRules({ secrets: sourceSecrets, cubeAssignments: securedCubes }),
    );
    return { KUBECONFIG: kubeconfig, STREAMCUBE_SECRET_REFRESH: '1s' };
  },
});
const { kc, env, kafka } = stack;
const auth = env.kafka.auth!;
const core = kc.makeApiClient(CoreV1Api);
const wrongPassword = 'wrong-password-5b1e9c';
const rotatingPasswords = ['rotating-pass-1-8d2f', 'rotating-pass-2-a61c'] as const;

async function secret(name: string, stringData: Record<string, string>): Promise<void> {
  await core.createNamespacedSecret({
    namespace: stack.namespace,
    body: { metadata: { name }, stringData },
  });
}

type Mechanism = 'plain' | 'scram-sha-256' | 'scram-sha-512';

function source(topic: string, tlsSecret: string, mechanism: Mechanism, saslSecret: string) {
  return {
    brokers: [auth.bootstrap],
    topic,
    startingOffsets: 'earliest' as const,
    tls: { secretRef: tlsSecret },
    sasl: { mechanism, secretRef: saslSecret },
  };
}

const sourceSecrets = ['kafka-ca', 'other-ca', 'scram512', 'plain', 'scram256-wrong', 'rotating'];
/** The suite's cubes, all secured: the receivers read their CubeAssignments to check an assign. */
const securedCubes = [
  'auth-scram-sha-512',
  'auth-plain',
  'auth-wrong-password',
  'auth-wrong-ca',
  'auth-rotate-before',
  'auth-rotate-after',
];

/** Creates a cube over `src` on replica set rs-a. */
const createCube = (cube: string, src: ReturnType<typeof source>) =>
  stack.createCube(cube, src.topic, {
    source: src,
    replicaSets: ['rs-a'],
    strategy: 'range',
  });

/** Waits until the cube holds `partitions` (joined with commas) on rs-a and has settled. */
const settledOn = (cube: string, partitions: string) =>
  stack.waitForSettled(cube, (c) => c.status?.assignment?.['rs-a']?.join() === partitions);

const degradedWith = (c: CubeAssignment, reason: string): boolean =>
  conditionOf(c, 'Degraded')?.status === 'True' && conditionOf(c, 'Degraded')?.reason === reason;

test.each<[Mechanism, string]>([
  ['scram-sha-512', 'scram512'],
  ['plain', 'plain'],
])('a cube read over SASL_SSL with %s gets exact totals', async (mechanism, saslSecret) => {
  const cube = `auth-${mechanism}`;
  const topic = await createTopic(stack.admin, 2);
  const events = [
    ...makeEvents(0, 300, Date.UTC(2026, 2, 1), 500, 0),
    ...makeEvents(1, 300, Date.UTC(2026, 2, 1), 500, 1),
  ];
  await produce(stack.producer, topic, 0, events.slice(0, 300));
  await produce(stack.producer, topic, 1, events.slice(300));
  await createCube(cube, source(topic, 'kafka-ca', mechanism, saslSecret));
  await settledOn(cube, '0,1');
  const hw = Object.fromEntries(await highWatermarks(kafka, topic));
  await waitForPositions(stack.receivers['rs-a']!.client, cube, { 0: hw[0]!, 1: hw[1]! });
  await expectQueriedTotals([stack.receivers['rs-a']!.client], cube, events);
});

/** Creates a one-partition cube over `src` and waits until it is Degraded with `reason`. */
async function degradedCube(
  cube: string,
  src: (topic: string) => ReturnType<typeof source>,
  reason: string,
): Promise<{ topic: string; message: string }> {
  const topic = await createTopic(stack.admin, 1);
  await createCube(cube, src(topic));
  const degraded = await stack.waitForCube(cube, `Degraded ${reason}`, (c) =>
    degradedWith(c, reason),
  );
  await waitFor(`a Warning Event ${reason} on ${cube}`, async () =>
    (await stack.cubeEvents(cube)).find((e) => e.type === 'Warning' && e.reason === reason),
  );
  return { topic, message: conditionOf(degraded, 'Degraded')?.message ?? '' };
}

test('a refused password: Degraded SourceAuthFailed with the broker message; the right one in the Secret clears it', async () => {
  const cube = 'auth-wrong-password';
  const { topic, message } = await degradedCube(
    cube,
    (t) => source(t, 'kafka-ca', 'scram-sha-256', 'scram256-wrong'),
    'SourceAuthFailed',
  );
  expect(message).toMatch(
    /Authentication failed .*invalid credentials with SASL mechanism SCRAM-SHA-256/,
  );

  const events = makeEvents(0, 100, Date.UTC(2026, 2, 1), 500, 0);
  await produce(stack.producer, topic, 0, events);
  await core.replaceNamespacedSecret({
    namespace: stack.namespace,
    name: 'scram256-wrong',
    body: { metadata: { name: 'scram256-wrong' }, stringData: { ...auth.users['scram-sha-256'] } },
  });
  const fixed = await settledOn(cube, '0');
  expect(conditionOf(fixed, 'Degraded')).toMatchObject({ status: 'False' });
  const hw = Object.fromEntries(await highWatermarks(kafka, topic));
  await waitForPositions(stack.receivers['rs-a']!.client, cube, { 0: hw[0]! });
  await expectQueriedTotals([stack.receivers['rs-a']!.client], cube, events);
});

test('an untrusted CA: Degraded SourceTLSFailed', async () => {
  const { message } = await degradedCube(
    'auth-wrong-ca',
    (t) => source(t, 'other-ca', 'scram-sha-512', 'scram512'),
    'SourceTLSFailed',
  );
  expect(message).toMatch(/certificate/);
});

test('a password rotated in Kafka and in its Secret reaches a running receiver without a restart', async () => {
  const username = 'rotating-user';
  const [before, after] = rotatingPasswords;
  await setScramPassword('SCRAM-SHA-512', username, before);
  await secret('rotating', { username, password: before });
  const oneCube = async (cube: string, day: number): Promise<void> => {
    const topic = await createTopic(stack.admin, 1);
    const events = makeEvents(0, 200, Date.UTC(2026, 2, day), 500, 0);
    await produce(stack.producer, topic, 0, events);
    await createCube(cube, source(topic, 'kafka-ca', 'scram-sha-512', 'rotating'));
    const settled = await settledOn(cube, '0');
    expect(conditionOf(settled, 'Degraded')).toMatchObject({ status: 'False' });
    await waitForPositions(stack.receivers['rs-a']!.client, cube, { 0: 200n });
    await expectQueriedTotals([stack.receivers['rs-a']!.client], cube, events);
  };
  await oneCube('auth-rotate-before', 2);

  // The broker first (connections already authenticated stay open), then the Secret.
  await setScramPassword('SCRAM-SHA-512', username, after);
  await core.replaceNamespacedSecret({
    namespace: stack.namespace,
    name: 'rotating',
    body: { metadata: { name: 'rotating' }, stringData: { username, password: after } },
  });
  await waitFor('the receiver to read the rotated Secret', () =>
    Promise.resolve(
      readFileSync(stack.receivers['rs-a']!.logFile, 'utf8').includes('a source Secret changed'),
    ),
  );
  // A cube assigned now connects anew through the receiver's client of that Secret: with the
  // password it held at first, the broker would refuse it (SourceAuthFailed, for good).
  await oneCube('auth-rotate-after', 3);
});

test('no password in the logs, the statuses or the Events', async () => {
  const passwords = [
    auth.users['scram-sha-512'].password,
    auth.users.plain.password,
    auth.users['scram-sha-256'].password,
    wrongPassword,
    ...rotatingPasswords,
  ];
  const texts: [string, string][] = [
    ['operator log', readFileSync(stack.operator.logFile, 'utf8')],
    ['receiver log', readFileSync(stack.receivers['rs-a']!.logFile, 'utf8')],
  ];
  for (const cube of securedCubes) {
    const object = await cubeApi(kc).get(stack.namespace, cube);
    texts.push([`${cube} status`, JSON.stringify(object.status)]);
    texts.push([`${cube} Events`, JSON.stringify(await stack.cubeEvents(cube))]);
  }
  for (const [where, text] of texts) {
    expect(text.length).toBeGreaterThan(0);
    for (const p of passwords)
      expect({ where, leaks: text.includes(p) }).toEqual({ where, leaks: false });
  }
});
