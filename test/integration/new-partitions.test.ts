// Partitions added to a topic under load: the operator finds them in its metadata refresh, plans
// them onto the replica sets by the cube's strategy, and the receivers read them from their log
// start, also for a cube with `startingOffsets: latest` (which applies to the partitions the cube
// started with only; KYLIN-4683 was this case getting it wrong). Afterwards the status lists every
// partition, each partition's offsets are tiled from where the cube started it, and the totals
// equal what was produced from there.
import type { Producer } from 'kafkajs';
import type { CubeAssignment } from '../../src/api/cube-assignment.ts';
import { tilingProblems } from '../../src/receiver/offset-ranges.ts';
import {
  type TestEvent,
  createTopic,
  highWatermarks,
  makeEvents,
  produce,
  totalsOf,
} from '../support/events.ts';
import { SteadyLoad } from '../support/load.ts';
import { conditionOf, cubeApi } from '../support/cluster.ts';
import { heldByReplica } from '../support/cube-audit.ts';
import { useOperatorStack } from '../support/operator-stack.ts';
import { expectTotals, waitForPositions } from '../support/receiver-checks.ts';
import { waitFor } from '../support/wait.ts';

const stack = useOperatorStack({ name: 'newparts', replicaSets: ['rs-a', 'rs-b'] });
const producers: Producer[] = [];

async function connectedProducer(): Promise<Producer> {
  const producer = stack.kafka.producer();
  await producer.connect();
  producers.push(producer);
  return producer;
}

afterAll(async () => {
  for (const p of producers) await p.disconnect();
});

const heldPartitions = (c: CubeAssignment): number[] =>
  Object.values(c.status?.assignment ?? {})
    .flat()
    .sort((a, b) => a - b);

test.each(['latest', 'earliest'] as const)(
  'partitions added under load to a %s cube are read from their log start: exact totals',
  async (startingOffsets) => {
    const { kc, namespace, kafka, admin } = stack;
    const cube = `grow-${startingOffsets}`;
    const topic = await createTopic(admin, 2);
    // Written before the cube exists: read by an earliest cube, skipped by a latest one.
    const before = new Map<number, TestEvent[]>();
    const first = await connectedProducer();
    for (const p of [0, 1]) {
      before.set(p, makeEvents(p, 30, Date.UTC(2026, 0, 1), 1000, 999));
      await produce(first, topic, p, before.get(p)!);
    }
    const api = cubeApi(kc);
    await stack.createCube(cube, topic, {
      source: { brokers: [stack.env.kafka.bootstrap], topic, startingOffsets },
      replicaSets: ['rs-a', 'rs-b'],
      strategy: 'sticky',
    });
    await stack.waitForSettled(cube, (c) => heldPartitions(c).join() === '0,1');

    const load = new SteadyLoad(first, topic, 2);
    load.start(Date.UTC(2026, 0, 1, 0, 10));
    await waitFor('load under way', () => Promise.resolve(load.rounds >= 5 || undefined));

    // Two partitions more, written to by the load before the operator can plan them: the cube is
    // suspended meanwhile (at the default resync of 10 s, a topic gains events that long anyway).
    await api.patchSpec(namespace, cube, { suspend: true });
    await stack.waitForCube(
      cube,
      'suspended',
      (c) => conditionOf(c, 'Ready')?.reason === 'Suspended',
    );
    await admin.createPartitions({ topicPartitions: [{ topic, count: 4 }] });
    await waitFor('partitions added', async () => (await highWatermarks(kafka, topic)).size === 4);
    load.grow(4, await connectedProducer());
    await waitFor('events on the new partitions', async () => {
      const hw = await highWatermarks(kafka, topic);
      return (hw.get(2) ?? 0n) > 0n && (hw.get(3) ?? 0n) > 0n;
    });
    await api.patchSpec(namespace, cube, { suspend: false });

    const settled = await stack.waitForSettled(cube, (c) => heldPartitions(c).join() === '0,1,2,3');
    // Balanced by the sticky strategy: the old partitions stay, each replica set takes a new one.
    expect(Object.values(settled.status?.assignment ?? {}).map((ps) => ps.length)).toEqual([2, 2]);
    await waitFor('rounds on the new partitions', async () => {
      const hw = await highWatermarks(kafka, topic);
      return (hw.get(2) ?? 0n) > 100n && (hw.get(3) ?? 0n) > 100n;
    });
    await load.stop();

    const hw = await highWatermarks(kafka, topic);
    for (const [rs, partitions] of Object.entries(settled.status?.assignment ?? {})) {
      const ends = Object.fromEntries(partitions.map((p) => [p, hw.get(p)!]));
      await waitForPositions(stack.receivers[rs]!.client, cube, ends);
    }

    // The status lists every partition with its owner, position and lag.
    const rows = await waitFor('status rows of four partitions at the end', async () => {
      const c = await api.get(namespace, cube);
      const list = c.status?.partitions ?? [];
      return list.length === 4 && list.every((r) => r.lag === '0') ? list : undefined;
    });
    expect(rows.map((r) => r.partition)).toEqual([0, 1, 2, 3]);

    // Where each partition started: the old ones by the spec, the added ones at their log start.
    const start = new Map<number, bigint>([
      [0, startingOffsets === 'latest' ? 30n : 0n],
      [1, startingOffsets === 'latest' ? 30n : 0n],
      [2, 0n],
      [3, 0n],
    ]);
    const expected = [
      ...load.all(),
      ...(startingOffsets === 'earliest' ? [...before.values()].flat() : []),
    ];
    const held = await heldByReplica(
      {
        cube,
        deepStorageDir: stack.deepStorageDir,
        replicaSets: { 'rs-a': [stack.receivers['rs-a']!], 'rs-b': [stack.receivers['rs-b']!] },
        highWatermarks: hw,
        expected: totalsOf(expected),
      },
      0,
    );
    const problems: Record<string, string[]> = {};
    for (const [p, end] of hw) {
      const found = tilingProblems(held.ranges.get(p) ?? [], start.get(p)!, end);
      if (found.length > 0)
        problems[`partition ${p}`] = found.map((x) => `${x.kind} [${x.from}, ${x.to})`);
    }
    expect(problems).toEqual({});
    expect(load.produced.get(2)!.length).toBeGreaterThan(0);
    expectTotals(held.totals, totalsOf(expected));
  },
  180_000,
);
