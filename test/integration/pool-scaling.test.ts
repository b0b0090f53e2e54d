// Issue 28's `pool-scaling`: a cube on a ReceiverPool (spec.pool) under traffic at mixed rates from
// Kafka's Java producer, while the pool is scaled 2 → 4 → 2 sets by hand. No node runs:
// a stand-in for the StatefulSet controller and the kubelet (pool-kubelet.ts) runs each set's
// receivers as processes and stops them with SIGTERM when the operator deletes the set. Each move
// settles; scaling out moves half the partitions, not all (sticky); a set scaled in goes only once
// it holds nothing uncommitted (what its receivers held when the StatefulSet went, and the
// committed view in deep storage); at the end the query server and an audit of every replica
// (deep storage and live segments) count exactly the producer's ledger, each offset once. Then
// a pool scaled back in while its scale-out is still moving partitions, and a pool scaled 2 → 4 → 2
// by its autoscaler (spec.autoscale) through a lag burst, with the same checks. The helpers here
// (traffic, a cube on a pool, the final audit) and the stand-in serve any further test of a pool.
import { setTimeout as sleep } from 'node:timers/promises';
import type { CubeAssignment } from '../../src/api/cube-assignment.ts';
import type { ReceiverPoolSpecInput } from '../../src/api/receiver-pool.ts';
import type { CubeAnswer } from '../../src/query/service.ts';
import { cubeApi } from '../support/cluster.ts';
import { expectExactAndTiled } from '../support/cube-audit.ts';
import {
  type TestEvent,
  createTopic,
  highWatermarks,
  testSchema,
  totalsOf,
} from '../support/events.ts';
import {
  type JavaProducer,
  type Schedule,
  produceOnSchedule,
  startJavaProducer,
} from '../support/java-producer.ts';
import { eventAt } from '../support/loaded-cube.ts';
import { OffsetLedger } from '../support/offset-ledger.ts';
import { useOperatorStack } from '../support/operator-stack.ts';
import { type SetDeparture, usePoolKubelet } from '../support/pool-kubelet.ts';
import { QueryServerProcess } from '../support/query-server-process.ts';
import { waitForPositions } from '../support/receiver-checks.ts';
import {
  createPool,
  expectAutoscaleInCrd,
  getPool,
  movedPartitions,
  placementOf,
  poolCondition,
  poolEvents,
  poolSeries,
  poolSpec,
  scalePool,
  waitForPool,
  waitForPoolSettled,
} from '../support/receiver-pools.ts';
import { waitFor } from '../support/wait.ts';

const stack = useOperatorStack({
  name: 'pool-scaling',
  replicaSets: [],
  // A stable pool is looked at again every 2 s: a set no cube uses any more goes soon after.
  operatorArgs: ['--resync=2s'],
});
// The receivers' default idle timeout, as production runs them: a partition silent for 30 s has
// its open windows sealed and handed off.
const kubelet = usePoolKubelet(stack, { receiver: { flushInterval: '1s', idleTimeout: '30s' } });
const server = new QueryServerProcess(stack);
/** The query server, started once by the first audit. */
let serverStarted: Promise<void> | undefined;
const producers: JavaProducer[] = [];
const stopProducing: AbortController[] = [];

afterAll(async () => {
  // A receiver left frozen would never stop.
  for (const r of [...kubelet.started.values()].flat()) if (r.running) r.child!.kill('SIGCONT');
  for (const c of stopProducing) c.abort();
  for (const p of producers) p.kill();
  await server.stop();
});

const partitions = 8;
const replicasPerSet = 2;
// Windows of 15 s with 3 s of lateness: windows seal, hand off and commit all through the run, so
// a set leaving holds sealed and open windows of every partition it had.
const schema = { ...testSchema, window: '15s', allowedLateness: '3s' };

/**
 * Records a second by partition, from a trickle to a steady stream (7 silent but for bursts);
 * bursts on top, on partitions that move, as the pool is scaled out (15 s) and in (45 s): they
 * may move with a backlog behind them.
 */
const perSecond = [40, 20, 10, 5, 2, 1, 0.5, 0];
const bursts: [partition: number, atS: number, records: number][] = [
  [7, 8, 1500],
  [6, 15, 2000],
  [3, 30, 2000],
  [7, 45, 2500],
  [4, 45, 1500],
  [0, 60, 2000],
];

/**
 * Traffic on the topic until stopped: the mixed rates above and `withBursts` on top, events
 * stamped now.
 */
function startTraffic(
  java: JavaProducer,
  withBursts: typeof bursts,
): { stop: () => Promise<void>; startedAt: number } {
  const stop = new AbortController();
  stopProducing.push(stop);
  const schedule: Schedule = {
    spans: perSecond.map((rate, partition) => ({
      partition,
      fromMs: 0,
      toMs: 3_600_000,
      perSecond: rate,
    })),
    bursts: withBursts.map(([partition, atS, count]) => ({
      partition,
      atMs: atS * 1000,
      count,
    })),
  };
  const startedAt = Date.now();
  const production = produceOnSchedule(java, schedule, eventAt, stop.signal);
  production.catch(() => undefined); // awaited by stop(); a test failing before is no second failure
  return {
    startedAt,
    stop: async () => {
      stop.abort();
      await production;
      await java.close();
    },
  };
}

/** Sets `<pool>-0` to `<pool>-<n - 1>`. */
const setsOf = (pool: string, n: number): string[] =>
  Array.from({ length: n }, (_, i) => `${pool}-${i}`);

/**
 * Pool `pool` of `spec` at rest on its 2 sets, and a cube on it, sticky, over a new topic, placed
 * on both, with Kafka's Java producer (lz4) on the topic.
 */
async function cubeOnNewPool(
  cube: string,
  pool: string,
  spec: ReceiverPoolSpecInput,
): Promise<{ topic: string; java: JavaProducer; onTwo: Record<string, number[]> }> {
  await createPool(stack, pool, spec);
  await waitForPoolSettled(stack, pool, 2);
  const topic = await createTopic(stack.admin, partitions);
  await stack.createCube(cube, topic, { pool, strategy: 'sticky', schema });
  const java = await startJavaProducer({ topic, compression: 'lz4', lingerMs: 20 });
  producers.push(java);
  return { topic, java, onTwo: placementOf(await waitForPlacedOn(cube, setsOf(pool, 2))) };
}

/** The cube at rest on exactly the sets `sets`, every partition placed. */
function waitForPlacedOn(cube: string, sets: string[]): Promise<CubeAssignment> {
  return stack.waitForSettled(
    cube,
    (c) => {
      const placement = placementOf(c);
      return (
        Object.keys(placement).join() === [...sets].sort().join() &&
        Object.values(placement).flat().length === partitions
      );
    },
    180_000,
  );
}

/**
 * Once the StatefulSets of `removed` (sets of `pool` scaled in) went: their receivers all answered
 * and exited on SIGTERM, holding no data of any cube that was not handed off and committed.
 */
async function expectLeftClean(pool: string, removed: string[]): Promise<SetDeparture[]> {
  const departed = () => kubelet.departures.filter((d) => d.set.startsWith(`${pool}-`));
  await waitFor(
    `the StatefulSets of ${removed.join(' and ')} gone`,
    () => Promise.resolve(departed().length >= removed.length),
    180_000,
    200,
  );
  expect(
    departed()
      .map((d) => d.set)
      .sort(),
  ).toEqual(removed);
  for (const d of departed()) {
    expect([d.set, d.unanswered, d.graceful]).toEqual([d.set, [], true]);
    expect(d.held.filter((h) => h.uncommitted.length > 0)).toEqual([]);
  }
  return departed();
}

const figuresOf = (answer: CubeAnswer): { events: number; revenue: number } => {
  const [events = 0, revenue = 0] = (answer.rows[0] ?? []) as [number?, number?];
  return { events, revenue };
};

/**
 * Once the traffic stopped: every receiver of the cube's sets at the end of its partitions; then
 * the query server (the committed view in deep storage and the live segments) answers complete at
 * the high watermarks with exactly the ledger's events and revenue, and every replica index of
 * every set of `pool` the stand-in ran (a removed set by its hand-offs alone) tiles each
 * partition's log once and adds up to the ledger, as does the committed view of every set.
 * A set removed and made again has receivers of the same names: not audited here yet.
 */
async function expectCubeExact(
  cube: string,
  pool: string,
  topic: string,
  java: JavaProducer,
): Promise<void> {
  const hw = await highWatermarks(stack.kafka, topic);
  const settled = await stack.waitForSettled(cube);
  for (const [rs, owned] of Object.entries(placementOf(settled)))
    for (const r of kubelet.receiversOf(rs))
      await waitForPositions(r.client, cube, Object.fromEntries(owned.map((p) => [p, hw.get(p)!])));

  // Every offset of every partition is a record the Java producer wrote and was acknowledged.
  const ledger = new OffsetLedger(java.visibleRecords());
  expect(
    Object.fromEntries([...ledger.spans()].map(([p, x]) => [p, [x.from, x.to, x.records]])),
  ).toEqual(Object.fromEntries([...hw].map(([p, end]) => [p, [0n, end, Number(end)]])));
  const total = ledger.total();

  serverStarted ??= server.start();
  await serverStarted;
  const answer = await waitFor(
    'a complete answer of the query server at the high watermarks',
    async () => {
      const { status, body } = await server.post(cube, { measures: ['events', 'revenue'] });
      const a = body as CubeAnswer;
      return status === 200 &&
        a.complete &&
        a.partitions.every((p) => BigInt(p.to) === hw.get(p.partition))
        ? a
        : undefined;
    },
    90_000,
    500,
  );
  expect(
    answer.partitions
      .map((p) => [p.partition, p.covered])
      .sort(([a], [b]) => Number(a) - Number(b)),
  ).toEqual([...hw].sort(([a], [b]) => a - b).map(([p, end]) => [p, [['0', end.toString()]]]));
  expect(figuresOf(answer).events).toBe(total.events);
  expect(figuresOf(answer).revenue).toBeCloseTo(Number(total.cents) / 100, 4);

  const events = java.visibleRecords().map((r) => JSON.parse(r.value) as TestEvent);
  const ofPool = [...kubelet.started].filter(([set]) => set.startsWith(`${pool}-`));
  await expectExactAndTiled({
    cube,
    deepStorageDir: stack.deepStorageDir,
    replicaSets: Object.fromEntries(ofPool),
    highWatermarks: hw,
    expected: totalsOf(events),
    removedSets: ofPool
      .filter(([set]) => kubelet.receiversOf(set).length === 0)
      .map(([set]) => set),
  });
  // The operator's own report agrees: no OffsetsNotTiled, and once the windows sealed idle every
  // partition handed off to its high watermark, through what sets since removed committed. (A
  // partition whose owner keeps nothing of it, all its data consumed on a set since removed, has
  // no figure: nothing reports it.)
  const reported = await waitFor(
    'the operator reporting every partition handed off to its high watermark',
    async () => {
      const c = await cubeApi(stack.kc).get(stack.namespace, cube);
      const rows = c.status?.partitions ?? [];
      const notTiled = c.status?.conditions?.find((x) => x.reason === 'OffsetsNotTiled');
      const short = rows.filter(
        (r) => r.handedOffTo !== undefined && BigInt(r.handedOffTo) !== hw.get(r.partition),
      );
      if (rows.length === partitions && short.length === 0 && !notTiled) return c;
      throw new Error(
        `handed off to ${JSON.stringify(rows.map((r) => [r.partition, r.handedOffTo ?? null]))} of ${JSON.stringify([...hw].map(([p, end]) => [p, end.toString()]))}${notTiled ? `; ${notTiled.message}` : ''}`,
      );
    },
    120_000,
    500,
  );
  expect(reported.status?.conditions?.find((c) => c.type === 'Ready')?.status).toBe('True');
}

test('scaled 2 → 4 → 2 sets by hand under traffic: each move settles, half the partitions move, the sets scaled in leave nothing uncommitted, totals exact', async () => {
  const t0 = Date.now();
  const pool = 'hand';
  const cube = 'orders';
  const sets = (n: number): string[] => setsOf(pool, n);
  const { topic, java, onTwo } = await cubeOnNewPool(cube, pool, poolSpec(2, replicasPerSet));
  const traffic = startTraffic(java, bursts);
  const at = (s: number) => sleep(Math.max(0, traffic.startedAt + s * 1000 - Date.now()));

  // Out, under traffic: the new sets' receivers start, and half the partitions move to them.
  await at(15);
  const outAt = Date.now();
  await scalePool(stack, pool, 4);
  const onFour = placementOf(await waitForPlacedOn(cube, sets(4)));
  await waitForPoolSettled(stack, pool, 4);
  const outSeconds = (Date.now() - outAt) / 1000;

  // In, under traffic: the partitions of sets 2 and 3 move back; then the sets go. Their
  // receivers held no data of any cube that was not handed off and committed when their
  // StatefulSet went, and exited on SIGTERM.
  await at(45);
  const inAt = Date.now();
  await scalePool(stack, pool, 2);
  const departed = await expectLeftClean(pool, [`${pool}-2`, `${pool}-3`]);
  const backOnTwo = placementOf(await waitForPlacedOn(cube, sets(2)));
  const settledPool = await waitForPoolSettled(stack, pool, 2);
  const inSeconds = (Date.now() - inAt) / 1000;

  await at(65);
  await traffic.stop();
  const producedSeconds = (Date.now() - traffic.startedAt) / 1000;
  await expectCubeExact(cube, pool, topic, java);

  console.log(
    [
      `pool-scaling by hand: ${java.records.length} events over ${Math.round(producedSeconds)} s;`,
      `2 → 4 settled in ${outSeconds.toFixed(1)} s, moving ${movedPartitions(onTwo, onFour).length}`,
      `of ${partitions} partitions (${JSON.stringify(onTwo)} → ${JSON.stringify(onFour)});`,
      `4 → 2 settled with both sets gone in ${inSeconds.toFixed(1)} s`,
      `(→ ${JSON.stringify(backOnTwo)}); their receivers held ${departed
        .map((d) => d.held.length)
        .join(' and ')} cubes`,
      `as their StatefulSets went; wall ${Math.round((Date.now() - t0) / 1000)} s`,
    ].join(' '),
  );
  if (kubelet.errors.length > 0) console.warn(`the stand-in retried: ${kubelet.errors.join('; ')}`);

  // Sticky: going 2 → 4 moved one partition in two, each to a new set; going back moved only the
  // partitions of the sets scaled in, to sets that kept their own.
  const movedOut = movedPartitions(onTwo, onFour);
  expect(movedOut).toHaveLength(partitions / 2);
  expect(movedOut.every((p) => onFour[`${pool}-2`]!.concat(onFour[`${pool}-3`]!).includes(p))).toBe(
    true,
  );
  expect(movedPartitions(onFour, backOnTwo)).toEqual(
    [...onFour[`${pool}-2`]!, ...onFour[`${pool}-3`]!].sort((a, b) => a - b),
  );

  // One Event series per reason (events.ts); the sets one pass removes are named in one Event:
  // both at once (count 1), or one pass each (count 2, the message the last one's).
  const setRemoved = (await stack.cubeEvents(pool)).filter((e) => e.reason === 'SetRemoved');
  expect(setRemoved).toHaveLength(1);
  const removedTogether = setRemoved[0]!.count === 1;
  expect(setRemoved[0]!.message).toMatch(
    new RegExp(
      removedTogether
        ? `^sets ${pool}-2, ${pool}-3 removed: no CubeAssignment uses them; their data claims were deleted \\(${2 * replicasPerSet}\\) \\(spec.storage.retainOnScaleIn: Delete\\)$`
        : `^set ${pool}-[23] removed: no CubeAssignment uses it; its data claims were deleted \\(${replicasPerSet}\\) \\(spec.storage.retainOnScaleIn: Delete\\)$`,
    ),
  );
  if (!removedTogether) expect(setRemoved[0]!.count).toBe(2);
  const metrics = await (await fetch(`http://127.0.0.1:${stack.operator.port}/metrics`)).text();
  expect(metrics).toContain(
    `streamcube_pool_sets_removed_total{namespace="${stack.namespace}",pool="${pool}"} 2`,
  );
  expect(settledPool.status?.sets?.map((s) => [s.name, s.state, s.readyReplicas])).toEqual([
    [`${pool}-0`, 'Active', replicasPerSet],
    [`${pool}-1`, 'Active', replicasPerSet],
  ]);
  expect(poolCondition(await getPool(stack, pool), 'Degraded')?.status).toBe('False');
}, 420_000);

test('scaled back in while the scale-out is moving partitions: the move settles on the sets that stay, the sets go with nothing uncommitted, totals exact', async () => {
  const pool = 'flap';
  const cube = 'flapping';
  const sets = (n: number): string[] => setsOf(pool, n);
  const { topic, java } = await cubeOnNewPool(cube, pool, poolSpec(2, replicasPerSet));
  const traffic = startTraffic(java, bursts);
  const at = (s: number) => sleep(Math.max(0, traffic.startedAt + s * 1000 - Date.now()));
  await at(5);
  await scalePool(stack, pool, 4);
  // Back to 2 as soon as a partition is on its way to a new set (or, on a machine too slow to see
  // the move, there already).
  const toNewSet = (rs: string | undefined): boolean => rs === `${pool}-2` || rs === `${pool}-3`;
  const seen = await waitFor(
    'a partition moving or moved to a new set',
    async () => {
      const c = await cubeApi(stack.kc).get(stack.namespace, cube);
      const moving = c.status?.reassign?.moves.filter((m) => toNewSet(m.to)) ?? [];
      if (moving.length > 0)
        return `during ${c.status!.reassign!.phase} of ${JSON.stringify(moving)}`;
      return Object.keys(placementOf(c)).some(toNewSet) ? 'after the move' : undefined;
    },
    120_000,
    20,
  );
  await scalePool(stack, pool, 2);
  await expectLeftClean(pool, [`${pool}-2`, `${pool}-3`]);
  await waitForPlacedOn(cube, sets(2));
  await waitForPoolSettled(stack, pool, 2);
  await at(30);
  await traffic.stop();
  console.log(
    `pool-scaling, back in during the scale-out: scaled in ${seen}; ${java.records.length} events`,
  );
  await expectCubeExact(cube, pool, topic, java);
}, 300_000);

test('scaled by the autoscaler under traffic: a lag burst takes the pool 2 → 4 (ScaledOut with its figures), the partitions move with the backlog, and once it is consumed 4 → 2 after scaleInAfter (ScaledIn), once each; the sets scaled in leave nothing uncommitted, totals exact', async () => {
  const pool = 'auto';
  const cube = 'surge';
  const sets = (n: number): string[] => setsOf(pool, n);
  const target = 2_000;
  // Steady traffic is a few hundred events behind at most (one --resync of it): well under the
  // target. Short durations (the operator looks every 2 s), but a cooldown that outlasts the
  // scale-out's moves (seconds, up to about 20 s on a loaded machine): the sets scaled in are
  // sets the cube used, not sets it was still moving to.
  const autoscale = {
    minSets: 2,
    maxSets: 4,
    targetLagPerSet: target,
    scaleOutAfter: '4s',
    scaleInAfter: '6s',
    cooldown: '25s',
  };
  await expectAutoscaleInCrd();
  const { topic, java, onTwo } = await cubeOnNewPool(
    cube,
    pool,
    poolSpec(2, replicasPerSet, { autoscale }),
  );
  // The lag burst: 2,000 events on every partition at once, 8 times the target per set at 2 sets.
  const burstAtS = 12;
  const perPartitionBurst = 2_000;
  const traffic = startTraffic(
    java,
    Array.from({ length: partitions }, (_, p): (typeof bursts)[number] => [
      p,
      burstAtS,
      perPartitionBurst,
    ]),
  );
  const at = (s: number) => sleep(Math.max(0, traffic.startedAt + s * 1000 - Date.now()));
  await at(burstAtS - 2);
  const calm = await getPool(stack, pool);
  expect([calm.spec.sets, calm.status?.autoscale?.lastDecision.reason]).toEqual([
    2,
    'WithinTarget',
  ]);

  // Receivers read at hundreds of thousands of events a second, far faster than one producer
  // writes: to fall behind for scaleOutAfter, the sets' receivers are frozen (SIGSTOP) from just
  // before the burst until the pool has scaled out, as receivers starved of CPU would be.
  const frozen = sets(2).flatMap((set) => kubelet.receiversOf(set));
  const before = await highWatermarks(stack.kafka, topic);
  let burstEnd: Map<number, bigint>;
  let burstProducedS: number;
  for (const r of frozen) r.child!.kill('SIGSTOP');
  try {
    burstEnd = await waitFor(
      'the burst written',
      async () => {
        const hw = await highWatermarks(stack.kafka, topic);
        return [...before].every(([p, end]) => hw.get(p)! >= end + BigInt(perPartitionBurst))
          ? hw
          : undefined;
      },
      60_000,
      100,
    );
    burstProducedS = (Date.now() - traffic.startedAt) / 1000 - burstAtS;
    await waitForPool(stack, pool, 'scaled out', (p) => p.spec.sets > 2, 60_000);
  } finally {
    for (const r of frozen) r.child!.kill('SIGCONT');
  }
  const burstAt = traffic.startedAt + burstAtS * 1000;

  // As many sets as the lag asks for at the target, within maxSets, with the figures that decided.
  const out = await waitForPool(
    stack,
    pool,
    'status.autoscale.lastScale of the scale-out',
    (p) => p.status?.autoscale?.lastScale?.action === 'ScaleOut',
  );
  expect(out.spec.sets).toBe(4);
  // When the operator wrote spec.sets (its clock is this machine's).
  const outAt = Date.parse(out.status!.autoscale!.lastScale!.time);
  const scaledOut = await waitFor('a ScaledOut Event', async () =>
    (await poolEvents(stack, pool)).find((e) => e.reason === 'ScaledOut'),
  );
  expect(scaledOut.message).toMatch(
    new RegExp(
      `^scaled out from 2 to 4 sets: \\d+ events behind over 2 sets \\(\\d+ per set\\), above the target ${target} per set for \\d+s \\(scaleOutAfter 4s\\)$`,
    ),
  );
  // More than 3 targets behind (4 sets at once), for at least scaleOutAfter.
  const [, lagAtOut, aboveForS] = /: (\d+) events behind .* for (\d+)s /.exec(scaledOut.message!)!;
  expect(Number(lagAtOut)).toBeGreaterThan(3 * target);
  expect(Number(aboveForS)).toBeGreaterThanOrEqual(4);
  expect(out.status?.autoscale).toMatchObject({
    desiredSets: 4,
    targetLagPerSet: target,
    lastScale: { fromSets: 2, toSets: 4, message: scaledOut.message },
  });

  // The new sets' receivers start and half the partitions move to them, each with its backlog;
  // then every partition reads past the burst.
  const onFour = placementOf(await waitForPlacedOn(cube, sets(4)));
  const placedAt = Date.now();
  await stack.waitForCube(
    cube,
    'past the burst',
    (c) =>
      c.status?.partitions?.length === partitions &&
      c.status.partitions.every(
        (r) => r.position !== undefined && BigInt(r.position) >= burstEnd.get(r.partition)!,
      ),
    120_000,
  );
  const consumedS = (Date.now() - burstAt) / 1000;

  // Caught up: after the cooldown and scaleInAfter below the threshold, back to minSets in one
  // step, and the sets scaled in go by the usual path.
  const back = await waitForPool(
    stack,
    pool,
    'scaled back in',
    (p) => p.status?.autoscale?.lastScale?.action === 'ScaleIn',
    120_000,
  );
  const inAt = Date.parse(back.status!.autoscale!.lastScale!.time);
  expect([back.spec.sets, back.status?.autoscale?.lastScale?.toSets]).toEqual([2, 2]);
  const scaledIn = await waitFor('the ScaledIn Event', async () =>
    (await poolEvents(stack, pool)).find((e) => e.reason === 'ScaledIn'),
  );
  expect(scaledIn.message).toMatch(
    new RegExp(
      `^scaled in from 4 to 2 sets: \\d+ events behind over 4 sets \\(\\d+ per set\\), \\d+ per set with one set fewer, below 50% of the target ${target} \\(${target / 2}\\) for \\d+s \\(scaleInAfter 6s\\)$`,
    ),
  );
  expect(back.status?.autoscale?.lastScale?.message).toBe(scaledIn.message);
  const [, belowForS] = / for (\d+)s \(scaleInAfter/.exec(scaledIn.message!)!;
  expect(Number(belowForS)).toBeGreaterThanOrEqual(6);
  expect(inAt - outAt).toBeGreaterThanOrEqual(25_000); // the cooldown
  expect(inAt).toBeGreaterThan(placedAt);
  const departed = await expectLeftClean(pool, [`${pool}-2`, `${pool}-3`]);
  const backOnTwo = placementOf(await waitForPlacedOn(cube, sets(2)));
  await waitForPoolSettled(stack, pool, 2);
  const goneS = (Date.now() - inAt) / 1000;

  // The steady traffic goes on at 2 sets: no flapping.
  await sleep(6_000);
  await traffic.stop();
  const producedSeconds = (Date.now() - traffic.startedAt) / 1000;
  await expectCubeExact(cube, pool, topic, java);

  const moved = movedPartitions(onTwo, onFour);
  console.log(
    [
      `pool-scaling by the autoscaler: ${java.records.length} events over ${Math.round(producedSeconds)} s,`,
      `a burst of ${partitions * perPartitionBurst} written in ${burstProducedS.toFixed(1)} s;`,
      `ScaledOut ${((outAt - burstAt) / 1000).toFixed(1)} s after the burst: "${scaledOut.message}";`,
      `placed on 4 sets ${((placedAt - outAt) / 1000).toFixed(1)} s later, moving ${JSON.stringify(moved)};`,
      `the burst consumed ${consumedS.toFixed(1)} s after it began;`,
      `ScaledIn ${((inAt - burstAt) / 1000).toFixed(1)} s after the burst: "${scaledIn.message}";`,
      `the sets gone and the pool settled ${goneS.toFixed(1)} s later (→ ${JSON.stringify(backOnTwo)}),`,
      `their receivers holding ${departed.map((d) => d.held.length).join(' and ')} cubes as they went`,
    ].join(' '),
  );
  expect(moved).toHaveLength(partitions / 2);
  expect(moved.every((p) => [...onFour[`${pool}-2`]!, ...onFour[`${pool}-3`]!].includes(p))).toBe(
    true,
  );
  // Once each: one ScaledOut, one ScaledIn, nothing clamped; at rest within the target.
  const events = await poolEvents(stack, pool);
  expect(
    events
      .filter((e) => ['ScaledOut', 'ScaledIn', 'SetsClamped'].includes(e.reason ?? ''))
      .map((e) => [e.reason, e.count]),
  ).toEqual([
    ['ScaledOut', 1],
    ['ScaledIn', 1],
  ]);
  expect(
    await poolSeries(stack, stack.operator.port, pool, 'streamcube_pool_autoscale_decisions_total'),
  ).toEqual([
    `streamcube_pool_autoscale_decisions_total{pool="${pool}",direction="out"} 1`,
    `streamcube_pool_autoscale_decisions_total{pool="${pool}",direction="in"} 1`,
    `streamcube_pool_autoscale_decisions_total{pool="${pool}",direction="clamp"} 0`,
  ]);
  const atRest = await getPool(stack, pool);
  expect([atRest.spec.sets, atRest.status?.autoscale?.lastDecision.reason]).toEqual([
    2,
    'WithinTarget',
  ]);
}, 300_000);
