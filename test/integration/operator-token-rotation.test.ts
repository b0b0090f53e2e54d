// Rotating the admin token of a running operator and its receivers without restarting either,
// in the order a changed Secret may reach their pods: the operator first (its calls fall back to
// the old token the receivers still hold), then the receivers (the old token expires after the
// grace); a reassign completes at each stage.
import { writeFileSync } from 'node:fs';
import { testSchema, createTopic } from '../support/events.ts';
import { cubeApi, waitForSettled } from '../support/cluster.ts';
import { useOperatorStack } from '../support/operator-stack.ts';
import { waitFor } from '../support/wait.ts';
import type { CubeAssignment } from '../../src/api/cube-assignment.ts';

const graceMs = 2_000;
const stack = useOperatorStack({
  name: 'token-rotation',
  replicaSets: ['rs-a', 'rs-b'],
  receiver: { env: { STREAMCUBE_ADMIN_TOKEN_GRACE: `${graceMs}ms` } },
});
const cube = 'orders';

const heldBy = (replicaSet: string) => (c: CubeAssignment) =>
  Object.keys(c.status?.assignment ?? {}).join() === replicaSet;

async function moveTo(replicaSet: string): Promise<void> {
  await cubeApi(stack.kc).patchSpec(stack.namespace, cube, { replicaSets: [replicaSet] });
  await waitForSettled(stack.kc, stack.namespace, cube, heldBy(replicaSet));
}

/** GET /v1/status on a receiver with `token`: its status code. */
async function statusWith(replicaSet: string, token: string): Promise<number> {
  const response = await fetch(`${stack.receivers[replicaSet]!.baseUrl}/v1/status`, {
    headers: { authorization: `Bearer ${token}` },
  });
  await response.body?.cancel();
  return response.status;
}

test('a reassign completes while only the operator has the new token, and after the receivers have it too', async () => {
  const topic = await createTopic(stack.admin, 4);
  await cubeApi(stack.kc).create(stack.namespace, cube, {
    source: { brokers: [stack.env.kafka.bootstrap], topic, startingOffsets: 'earliest' },
    schema: testSchema,
    replicaSets: ['rs-a'],
    strategy: 'range',
  });
  await waitForSettled(stack.kc, stack.namespace, cube, heldBy('rs-a'));
  const rotated = `rotated-${stack.token}`;

  // The operator's pod sees the new Secret first: the receivers refuse its new token, so its
  // calls go through with the old one.
  writeFileSync(stack.operator.tokenFile, `${rotated}\n`);
  await new Promise((r) => setTimeout(r, 3_000)); // the operator reads its file every 2 s
  expect(await statusWith('rs-a', rotated)).toBe(403);
  await moveTo('rs-b');

  // Then the receivers' pods: the old token is refused once the grace is over, and the operator
  // works with the new one alone.
  for (const r of Object.values(stack.receivers)) writeFileSync(r.tokenFile, `${rotated}\n`);
  await waitFor(
    'the receivers to refuse the old token',
    async () =>
      (await statusWith('rs-a', stack.token)) === 403 &&
      (await statusWith('rs-b', stack.token)) === 403,
    15_000,
  );
  expect(await statusWith('rs-a', rotated)).toBe(200);
  await moveTo('rs-a');
});
