// Issue 29's `offset-reset`: a cube of three partitions on one replica set of two receivers, fed
// without pause by Kafka's Java producer, has its offsets reset four times with the
// streamcube.io/reset-offsets annotation — to the earliest offsets (the operator killed between
// the two receivers' restarts, a fresh one finishing it), to the latest, to a time a few seconds
// back, and to given offsets (one partition back, one forward) — and two bad requests are refused
// with nothing changed. Each reset is journaled like a move, recorded in status.resets and told
// by an OffsetsReset Event. At the end the query service's answer, held against the producer's
// ledger, counts every offset each epoch read: the skipped ranges said skipped, the re-read ones
// re-read, none missing; and the operator's tiling check finds nothing.
import type { CubeAssignment } from '../../src/api/cube-assignment.ts';
import { resetAnnotation, type ResetPartition } from '../../src/api/offset-reset.ts';
import { formatUnits } from '../../src/api/scaled-sum.ts';
import type { CubeAnswer } from '../../src/query/service.ts';
import { applyCrd, conditionOf, cubeApi } from '../support/cluster.ts';
import { createTopic, highWatermarks, testSchema } from '../support/events.ts';
import {
  type JavaProducer,
  produceOnSchedule,
  startJavaProducer,
} from '../support/java-producer.ts';
import { eventAt } from '../support/loaded-cube.ts';
import { OffsetLedger } from '../support/offset-ledger.ts';
import { useOperatorStack } from '../support/operator-stack.ts';
import { QueryServerProcess } from '../support/query-server-process.ts';
import { waitForPositions } from '../support/receiver-checks.ts';
import { waitFor } from '../support/wait.ts';

const stack = useOperatorStack({
  name: 'offset-reset',
  replicaSets: ['rs-a'],
  replicas: 2,
  operator: false,
  receiver: { flushInterval: '1s' },
});
const cube = 'orders';
const partitions = [0, 1, 2];
// Revenue exact in cents; one 1h window, whose event times stay inside it (below): what a reset
// reads again is never too late for its window.
const schema = {
  ...testSchema,
  measures: testSchema.measures
    .filter((m) => m.name === 'events' || m.name === 'revenue')
    .map((m) => (m.name === 'revenue' ? { ...m, scale: 2 } : m)),
};
const eventTimeBase = Date.UTC(2026, 2, 1);
const server = new QueryServerProcess(stack);
const stopProducing = new AbortController();
let java: JavaProducer | undefined;

afterAll(async () => {
  stopProducing.abort();
  java?.kill();
  await server.stop();
});

const api = () => cubeApi(stack.kc);
const get = (): Promise<CubeAssignment> => api().get(stack.namespace, cube);

/**
 * Sets the reset annotation, this checkout's CRD applied first: the API server is shared with
 * other checkouts' suites, and one that lacks status.resets and reassign.reset prunes them.
 */
async function requestReset(request: object): Promise<void> {
  await applyCrd();
  await api().annotate(stack.namespace, cube, { [resetAnnotation]: JSON.stringify(request) });
}

/** The reset `id` once applied and the cube settled again. */
async function applied(id: string): Promise<ResetPartition[]> {
  const settled = await stack.waitForSettled(cube, (c) =>
    (c.status?.resets ?? []).some((r) => r.id === id && r.result === 'Applied'),
  );
  return settled.status!.resets!.find((r) => r.id === id)!.partitions!;
}

async function eventOf(id: string): Promise<string> {
  return waitFor(`the OffsetsReset Event of ${id}`, async () => {
    const events = await stack.cubeEvents(cube);
    return events.find((e) => e.reason === 'OffsetsReset' && e.message?.includes(`reset ${id} `))
      ?.message;
  });
}

/** The owner's positions as status last wrote them. */
async function positions(): Promise<Map<number, bigint>> {
  const c = await get();
  return new Map((c.status?.partitions ?? []).map((p) => [p.partition, BigInt(p.position ?? 0)]));
}

/** Waits until every partition's position in status passed `past` (traffic read since). */
async function readOn(past: Map<number, bigint>, by = 20n): Promise<void> {
  await waitFor(
    'the cube read on',
    async () => {
      const now = await positions();
      return partitions.every((p) => (now.get(p) ?? 0n) >= (past.get(p) ?? 0n) + by);
    },
    60_000,
    250,
  );
}

test('four resets under continuous traffic, one resumed by a new operator: answers count what each epoch read, skipped and re-read ranges said so', async () => {
  const topic = await createTopic(stack.admin, partitions.length);
  const first = await stack.startOperator();
  await stack.createCube(cube, topic, { schema, replicaSets: ['rs-a'] });
  java = await startJavaProducer({ topic, compression: 'lz4', lingerMs: 20 });
  const t0 = Date.now();
  const production = produceOnSchedule(
    java,
    {
      spans: [40, 20, 10].map((perSecond, partition) => ({
        partition,
        fromMs: 0,
        toMs: 3_600_000,
        perSecond,
      })),
    },
    (p, i, now) => eventAt(p, i, eventTimeBase + (now - t0)),
    stopProducing.signal,
  );
  production.catch(() => undefined);
  await stack.waitForSettled(cube, (c) => (c.status?.assignment?.['rs-a'] ?? []).length === 3);
  await Promise.all([server.start(), readOn(new Map())]);

  // 1. To the earliest offsets, the operator killed once the first replica restarted there.
  await first.kill('SIGTERM');
  const doomed = await stack.startOperator({
    STREAMCUBE_FAULT: 'reassign-Starting-target-partial',
  });
  const before = await get();
  await requestReset({ id: 'replay-all', to: 'earliest' });
  await doomed.waitForExit();
  expect(doomed.exitSignal).toBe('SIGKILL');
  const crashed = await get();
  expect(crashed.status?.reassign).toMatchObject({
    phase: 'Starting',
    reset: { id: 'replay-all', to: 'earliest', targets: { '0': '0', '1': '0', '2': '0' } },
    moves: partitions.map((partition) => ({ partition, from: 'rs-a', to: 'rs-a' })),
  });
  expect(conditionOf(crashed, 'Progressing')).toMatchObject({
    status: 'True',
    reason: 'Resetting',
  });
  await stack.startOperator();
  const earliest = await applied('replay-all');
  for (const p of earliest) {
    expect(p.to).toBe('0');
    expect(BigInt(p.from)).toBeGreaterThan(0n);
    expect(p.epoch).toBe(before.status!.epochs![String(p.partition)]! + 1);
  }
  expect(await eventOf('replay-all')).toMatch(/partition 0 \d+→0 \(\d+ re-read\)/);
  await readOn(await positions());

  // 2. To the latest offsets: what was not read yet is skipped.
  await requestReset({ id: 'skip-ahead', to: 'latest' });
  await applied('skip-ahead');
  await eventOf('skip-ahead');
  await readOn(await positions());

  // 3. To a time three seconds of traffic back: read again.
  const at = eventTimeBase + (Date.now() - t0) - 3_000;
  await requestReset({ id: 'back-3s', to: { timestamp: at }, partitions: [0, 1] });
  const byTime = await applied('back-3s');
  expect(byTime.map((p) => p.partition)).toEqual([0, 1]);
  for (const p of byTime) expect(BigInt(p.to)).toBeLessThan(BigInt(p.from));
  await readOn(await positions());

  // Refused, nothing changed: an offset past the high watermark, a partition the topic lacks.
  const still = await get();
  await requestReset({ id: 'too-far', to: { offsets: { '0': '99999999' } } });
  const refused = await stack.waitForCube(cube, 'too-far refused', (c) =>
    (c.status?.resets ?? []).some((r) => r.id === 'too-far'),
  );
  expect(refused.status?.resets?.at(-1)).toMatchObject({ id: 'too-far', result: 'Refused' });
  expect(refused.status?.resets?.at(-1)?.message).toMatch(
    /partition 0: offset 99999999 is outside what the brokers hold, \[0, \d+\]/,
  );
  await stack.waitForCube(
    cube,
    'Degraded OffsetResetRefused',
    (c) => conditionOf(c, 'Degraded')?.reason === 'OffsetResetRefused',
  );
  await requestReset({ id: 'no-such', to: 'earliest', partitions: [7] });
  const unknown = await stack.waitForCube(cube, 'no-such refused', (c) =>
    (c.status?.resets ?? []).some((r) => r.id === 'no-such'),
  );
  expect(unknown.status?.resets?.at(-1)?.message).toContain(
    `partition 7 is not a partition of topic ${topic}`,
  );
  expect(unknown.status?.epochs).toEqual(still.status?.epochs);
  expect((await stack.cubeEvents(cube)).map((e) => e.reason)).toContain('OffsetResetRefused');

  // 4. Given offsets: partition 0 back to half its position, partition 1 forward to its end.
  const now = await positions();
  const hw = await highWatermarks(stack.kafka, topic);
  const half = (now.get(0)! / 2n).toString();
  await requestReset({ id: 'given', to: { offsets: { '0': half, '1': hw.get(1)!.toString() } } });
  const given = await applied('given');
  expect(given.map((p) => [p.partition, p.to])).toEqual([
    [0, half],
    [1, hw.get(1)!.toString()],
  ]);
  await readOn(await positions(), 10n);

  // The producer stops; every replica reads to the end.
  stopProducing.abort();
  await production;
  await java.close();
  const end = await highWatermarks(stack.kafka, topic);
  for (const r of stack.replicas['rs-a']!)
    await waitForPositions(r.client, cube, Object.fromEntries(end));
  // The refused request's annotation removed: the cube is not Degraded, its replicas tile.
  await api().annotate(stack.namespace, cube, { [resetAnnotation]: null });
  const final = await stack.waitForCube(
    cube,
    'Degraded False',
    (c) =>
      conditionOf(c, 'Degraded')?.status === 'False' &&
      (c.status?.partitions ?? []).every((p) => p.position === end.get(p.partition)?.toString()),
  );
  const warnings = (await stack.cubeEvents(cube)).filter(
    (e) => e.reason === 'OffsetsNotTiled' || e.reason === 'OffsetsLost',
  );
  expect(warnings.map((e) => `${e.reason}: ${e.message}`)).toEqual([]);

  // What each epoch read, by the ledger: from where it began to where the next reset drained it.
  const ledger = new OffsetLedger(java.visibleRecords());
  const resets = (final.status?.resets ?? []).filter((r) => r.result === 'Applied');
  let events = 0;
  let cents = 0n;
  const expectedResets = new Map<number, { from: string; to: string; reason: string }[]>();
  for (const p of partitions) {
    let start = 0n;
    for (const r of resets) {
      const x = r.partitions?.find((q) => q.partition === p);
      if (!x) continue;
      const figures = ledger.within(p, [[start.toString(), x.from]]);
      events += figures.events;
      cents += figures.cents;
      const [from, to] = [BigInt(x.from), BigInt(x.to)];
      if (from !== to)
        (expectedResets.get(p) ?? expectedResets.set(p, []).get(p)!).push(
          from < to
            ? { from: x.from, to: x.to, reason: `skipped by reset ${r.id}` }
            : { from: x.to, to: x.from, reason: `re-read after reset ${r.id}` },
        );
      start = to;
    }
    const figures = ledger.within(p, [[start.toString(), end.get(p)!.toString()]]);
    events += figures.events;
    cents += figures.cents;
  }

  let last: unknown;
  const answer = await waitFor(
    'a complete answer at the high watermarks',
    async () => {
      const { status, body } = await server.post(cube, { measures: ['events', 'revenue'] });
      last = body;
      const a = body as CubeAnswer;
      return status === 200 &&
        a.complete &&
        a.partitions.every((p) => BigInt(p.to) === end.get(p.partition))
        ? a
        : undefined;
    },
    20_000,
    250,
  ).catch((error: unknown) => {
    throw new Error(`${(error as Error).message}; the last answer: ${JSON.stringify(last)}`);
  });
  for (const p of answer.partitions) {
    expect(p.missing).toEqual([]);
    expect(p.resets ?? []).toEqual(expectedResets.get(p.partition) ?? []);
  }
  const [counted = 0, revenue = '0.00'] = (answer.rows[0] ?? []) as [number?, string?];
  expect({ events: counted, revenue }).toEqual({ events, revenue: formatUnits(cents, 2) });
  // Offsets read twice on purpose were met (resets 1, 3 and 4 go back). Whether a reset forward
  // skipped any depends on how far behind its owner was: a caught-up owner skips nothing (seen
  // with the suite beside another, on 2 cores); each skip recorded is checked above all the same.
  const kinds = [...expectedResets.values()].flat().map((r) => r.reason.split(' ')[0]);
  expect(kinds).toContain('re-read');
});
