// What a settled cube costs (issue 8): the operator reads each receiver once per resync for all
// its cubes, never per cube, and writes a cube's status only when something a user reads
// changed — a stable cube not at all between resyncs, a cube under load at most once per resync.
// Its own writes do not wake it. Counted from the API server's watch and the receivers' metrics.
import { setTimeout as sleep } from 'node:timers/promises';
import { createTopic, testSchema } from '../support/events.ts';
import { SteadyLoad } from '../support/load.ts';
import { cubeApi, recordVersions, waitForSettled } from '../support/cluster.ts';
import { useOperatorStack } from '../support/operator-stack.ts';

const stack = useOperatorStack({ name: 'status-writes', replicaSets: ['rs-a', 'rs-b'] });
/** The operator's --resync in the fixture. */
const resyncMs = 1_000;
const cubes = ['quiet-1', 'quiet-2', 'quiet-3'];

async function createCube(name: string, topic: string): Promise<void> {
  await cubeApi(stack.kc).create(stack.namespace, name, {
    source: { brokers: [stack.env.kafka.bootstrap], topic, startingOffsets: 'earliest' },
    schema: testSchema,
    replicaSets: ['rs-a', 'rs-b'],
    strategy: 'range',
  });
}

/** The resourceVersions the cube's object takes (MODIFIED watch events) over `ms` from `since`. */
async function versionsOver(name: string, since: string, ms: number): Promise<string[]> {
  const recorder = await recordVersions(stack.kc, stack.namespace, name, since);
  await sleep(ms);
  recorder.stop();
  return recorder.versions
    .filter((v) => v.type === 'MODIFIED')
    .map((v) => v.cube.metadata?.resourceVersion ?? '?');
}

/** Admin requests a receiver answered, by route (its own metrics). */
async function adminRequests(baseUrl: string): Promise<Record<string, number>> {
  const text = await (await fetch(`${baseUrl}/metrics`)).text();
  const out: Record<string, number> = {};
  for (const [, method, route, n] of text.matchAll(
    /^streamcube_receiver_admin_request_duration_seconds_count\{method="(\w+)",route="([^"]+)",status="\d+"\} (\d+)$/gm,
  )) {
    const key = `${method} ${route}`;
    out[key] = (out[key] ?? 0) + Number(n);
  }
  return out;
}

test('settled cubes without traffic: no status write over three resyncs, one status call per receiver per resync', async () => {
  const topic = await createTopic(stack.admin, 4);
  for (const name of cubes) await createCube(name, topic);
  const settled = await Promise.all(
    cubes.map((name) => waitForSettled(stack.kc, stack.namespace, name)),
  );
  // The first resync after Done writes positions once; after that nothing moves.
  await sleep(2 * resyncMs);
  const before = await Promise.all(
    Object.values(stack.receivers).map((r) => adminRequests(r.baseUrl)),
  );
  const current = await Promise.all(
    settled.map((c) => cubeApi(stack.kc).get(stack.namespace, c.metadata.name!)),
  );
  const windowMs = 3 * resyncMs + 500;
  const writes = await Promise.all(
    current.map((c) => versionsOver(c.metadata.name!, c.metadata.resourceVersion!, windowMs)),
  );
  expect(Object.fromEntries(cubes.map((name, i) => [name, writes[i]]))).toEqual(
    Object.fromEntries(cubes.map((name) => [name, []])),
  );

  const after = await Promise.all(
    Object.values(stack.receivers).map((r) => adminRequests(r.baseUrl)),
  );
  for (const [i, counts] of after.entries()) {
    const calls = (route: string): number => (counts[route] ?? 0) - (before[i]![route] ?? 0);
    // Three cubes, about four resyncs: one call each, not one per cube.
    expect(calls('GET /v1/cubes')).toBeGreaterThanOrEqual(2);
    expect(calls('GET /v1/cubes')).toBeLessThanOrEqual(6);
    expect(calls('GET /v1/namespaces/:namespace/cubes/:cube')).toBe(0);
    expect(calls('GET /v1/cubes/:cube')).toBe(0);
  }
});

test('a cube under steady load: positions written at most once per resync', async () => {
  const topic = await createTopic(stack.admin, 4);
  const load = new SteadyLoad(stack.producer, topic, 4, 10, 100);
  load.start(Date.now());
  try {
    await createCube('busy', topic);
    await waitForSettled(stack.kc, stack.namespace, 'busy');
    await sleep(resyncMs);
    const current = await cubeApi(stack.kc).get(stack.namespace, 'busy');
    const windowMs = 4 * resyncMs;
    const writes = await versionsOver('busy', current.metadata.resourceVersion!, windowMs);
    // Once per resync (a reconcile takes some time, so fewer rather than more), and some: the
    // positions a user reads do move.
    expect(writes.length).toBeGreaterThanOrEqual(1);
    expect(writes.length).toBeLessThanOrEqual(windowMs / resyncMs + 1);
  } finally {
    await load.stop();
  }
});
