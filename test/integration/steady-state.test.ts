// Steady state as production runs it: the real operator, two replica sets of receivers, and
// Kafka's own Java producer writing for three minutes at mixed rates — trickles of a few events a
// second, bursts of thousands, one partition silent for over a minute — with event time = wall
// clock, one-minute windows, 10 s lateness and the receivers' default idle timeout, so that
// windows seal and hand off during the run; two reassigns under load, and a few events sent
// deliberately too late. Afterwards an independent reader (pyarrow over the hand-offs, plus the
// live query for what is not handed off yet, split by offset ranges) equals the ground truth, per
// dimension values; exactly the late events were rejected; every offset is covered once.
import { setTimeout as sleep } from 'node:timers/promises';
import type { CubeAssignment } from '../../src/api/cube-assignment.ts';
import type { QueryResponse } from '../../src/protocol/admin-api.ts';
import {
  type OffsetRange,
  addRange,
  rangesFromJson,
  tilingProblems,
} from '../../src/receiver/offset-ranges.ts';
import { type TestEvent, highWatermarks, windowedSchema } from '../support/events.ts';
import { type ModelRow, mergeRows, modelCube } from '../support/cube-model.ts';
import { type ArrowHandOff, readCommittedWithPyarrow } from '../support/pyarrow-reader.ts';
import { expectRowsEqual, waitForPositions } from '../support/receiver-checks.ts';
import { cubeApi, waitForSettled, waitForTilingReported } from '../support/cluster.ts';
import { useOperatorStack } from '../support/operator-stack.ts';
import { type JavaProducer, produceOnSchedule } from '../support/java-producer.ts';
import { waitFor } from '../support/wait.ts';
import { eventAt, javaProducedCube } from '../support/loaded-cube.ts';

const stack = useOperatorStack({
  name: 'steady',
  replicaSets: ['rs-a', 'rs-b'],
  // The receivers' default idle timeout, as production runs them.
  receiver: { idleTimeout: '30s', flushInterval: '1s' },
});
const { kc, kafka, receivers } = stack;
const cube = 'orders';
const schema = windowedSchema; // 1-minute windows, 10 s allowed lateness
const runMs = 180_000;
const partitions = 6;
const producers: JavaProducer[] = [];

afterAll(() => {
  for (const p of producers) p.kill();
});

/** What the receivers hold at one moment: live query rows and ranges, and the hand-offs. */
interface Held {
  answers: QueryResponse[];
  handOffs: ArrowHandOff[];
}

async function readHeld(): Promise<Held> {
  const answers = await Promise.all(
    Object.values(receivers).map((r) =>
      r.client.query(cube, { groupBy: schema.dimensions }).catch(() => undefined),
    ),
  );
  const handOffs = (await readCommittedWithPyarrow(stack.deepStorageDir, schema)).filter(
    (h) => h.manifest.cube === cube && !h.dir.endsWith('.tmp'),
  );
  return { answers: answers.filter((a) => a !== undefined), handOffs };
}

/** Gaps and overlaps of the held offsets against [0, high watermark) of every partition. */
function tilingOf(held: Held, hw: Map<number, bigint>): Record<string, string[]> {
  const problems: Record<string, string[]> = {};
  for (const [p, end] of hw) {
    const ranges = [
      ...held.answers.flatMap((a) => rangesFromJson(a.offsetRanges[String(p)] ?? [])),
      ...held.handOffs.flatMap((h) => rangesFromJson(h.manifest.offsetRanges[String(p)] ?? [])),
    ];
    const found = tilingProblems(ranges, 0n, end).map((x) => `${x.kind} [${x.from}, ${x.to})`);
    if (found.length > 0) problems[`partition ${p} of [0, ${end})`] = found;
  }
  return problems;
}

test('three minutes of mixed-rate production with two reassigns: exact, tiled, only the late events rejected', async () => {
  const t0 = Date.now();
  const { topic, java } = await javaProducedCube(stack, producers, cube, partitions);
  const api = cubeApi(kc);
  const { namespace } = stack;

  const s = 1000;
  const schedule = {
    spans: [
      { partition: 0, fromMs: 0, toMs: runMs, perSecond: 5 },
      { partition: 1, fromMs: 0, toMs: runMs, perSecond: 3 },
      { partition: 2, fromMs: 0, toMs: runMs, perSecond: 2 },
      // Silent for 70 s (past the idle timeout), then active again.
      { partition: 3, fromMs: 0, toMs: 50 * s, perSecond: 4 },
      { partition: 3, fromMs: 120 * s, toMs: runMs, perSecond: 4 },
      { partition: 4, fromMs: 0, toMs: runMs, perSecond: 1 },
      { partition: 5, fromMs: 0, toMs: runMs, perSecond: 2 },
    ],
    bursts: [
      { partition: 4, atMs: 30 * s, count: 3000 },
      { partition: 5, atMs: 65 * s, count: 2000 },
      { partition: 4, atMs: 100 * s, count: 3000 },
      { partition: 5, atMs: 150 * s, count: 2500 },
    ],
  };
  const event = eventAt;
  const produceStart = Date.now();
  const production = produceOnSchedule(java, schedule, event);

  // Deliberately late: event time 150 s behind the partition's own (≈ now), more than the window
  // plus lateness (70 s), so each must be rejected `too_late`, whichever receiver owns it.
  const lateAt: [number, number][] = [
    [75 * s, 0],
    [76 * s, 0],
    [105 * s, 2],
    [140 * s, 4],
    [160 * s, 1],
  ];
  const late = (async () => {
    for (const [at, p] of lateAt) {
      await sleep(produceStart + at - Date.now());
      await java.send(p, [{ ...event(p, 1_000_000 + at, Date.now()), ts: Date.now() - 150 * s }]);
    }
  })();

  // Two reassigns under load: partition 0 moves to rs-b; later the silent partition 3 (while
  // silent) and the bursty 4 move to rs-a, and 0 back.
  const assigned = (c: CubeAssignment, expected: Record<string, number[]>): boolean =>
    JSON.stringify(c.status?.assignment) === JSON.stringify(expected);
  const reassigns = (async () => {
    const initial = (await api.get(namespace, cube)).status?.assignment;
    await sleep(produceStart + 45 * s - Date.now());
    const first = { 'rs-a': [1, 2], 'rs-b': [0, 3, 4, 5] };
    await api.patchSpec(namespace, cube, { pins: first });
    await waitForSettled(kc, namespace, cube, (c) => assigned(c, first));
    await sleep(produceStart + 100 * s - Date.now());
    const second = { 'rs-a': [0, 1, 3, 4], 'rs-b': [2, 5] };
    await api.patchSpec(namespace, cube, { pins: second });
    await waitForSettled(kc, namespace, cube, (c) => assigned(c, second));
    return initial;
  })();

  const [initial] = await Promise.all([reassigns, production, late]);
  await java.close();
  const produced = Date.now() - produceStart;

  // Quiescence: every owner has consumed to the end of its partitions.
  const hw = await highWatermarks(kafka, topic);
  const finalCube = await waitForSettled(kc, namespace, cube);
  for (const [rs, owned] of Object.entries(finalCube.status?.assignment ?? {}))
    await waitForPositions(
      receivers[rs]!.client,
      cube,
      Object.fromEntries(owned.map((p) => [p, hw.get(p)!])),
    );

  // The ground truth, from what the Java producer says it wrote, replayed by the design's rules.
  const byPartition = new Map<number, TestEvent[]>();
  for (const r of [...java.records].sort((a, b) => (a.offset < b.offset ? -1 : 1)))
    (byPartition.get(r.partition) ?? byPartition.set(r.partition, []).get(r.partition)!).push(
      JSON.parse(r.value) as TestEvent,
    );
  const model = modelCube(schema, byPartition);
  expect(model.rejected).toEqual({ too_late: lateAt.length });

  // A consistent read: a segment handed off between the query and the read of deep storage shows
  // as an overlap of offsets, and the read is taken again.
  const held = await waitFor(
    'a read of the receivers that tiles every partition once',
    async () => {
      const h = await readHeld();
      return Object.keys(tilingOf(h, hw)).length === 0 ? h : undefined;
    },
    30_000,
    500,
  ).catch(async () => readHeld());
  const rejected: Record<string, number> = {};
  for (const r of Object.values(receivers)) {
    const status = await r.client.cubeStatus(cube).catch(() => undefined);
    for (const [reason, n] of Object.entries(status?.rejected ?? {}))
      rejected[reason] = (rejected[reason] ?? 0) + n;
  }
  const sealedWindows = new Set(held.handOffs.map((h) => h.manifest.windowStart));
  console.log(
    [
      `steady state: ${java.records.length} events produced over ${Math.round(produced / 1000)} s`,
      `(${lateAt.length} deliberately late), ${model.windows.size} windows,`,
      `${sealedWindows.size} sealed and handed off (${held.handOffs.length} hand-offs read with pyarrow),`,
      `${held.answers.reduce((n, a) => n + a.segments, 0)} segments answered live;`,
      `2 reassigns (${JSON.stringify(initial)} → ${JSON.stringify(finalCube.status?.assignment)});`,
      `rejected ${JSON.stringify(rejected)}; wall ${Math.round((Date.now() - t0) / 1000)} s`,
    ].join(' '),
  );

  // Nothing sealed early (no window_sealed), and exactly the deliberately late events too late.
  expect(rejected).toEqual({ too_late: lateAt.length });
  expect(tilingOf(held, hw)).toEqual({});
  const expectedRows = mergeRows(schema, [...model.windows.values()].flat());
  const heldRows = mergeRows(schema, [
    ...held.answers.flatMap((a) => a.rows as ModelRow[]),
    ...held.handOffs.flatMap((h) => h.rows),
  ]);
  expectRowsEqual(heldRows, expectedRows, schema);
  expect(sealedWindows.size).toBeGreaterThanOrEqual(2);
  const ready = finalCube.status?.conditions?.find((c) => c.type === 'Ready')?.status;
  expect(ready).toBe('True');
  // The operator's own tiling check agrees, and what it says is handed off is in deep storage:
  // per partition, the run of offsets from 0 that pyarrow read in the hand-offs reaches it.
  const reported = await waitForTilingReported(kc, namespace, cube);
  const handedOff = new Map<number, OffsetRange[]>();
  for (const h of (await readHeld()).handOffs)
    for (const [p, ranges] of Object.entries(h.manifest.offsetRanges))
      for (const r of rangesFromJson(ranges)) {
        const into = handedOff.get(Number(p)) ?? [];
        addRange(into, r.from, r.to);
        handedOff.set(Number(p), into);
      }
  for (const row of reported.status?.partitions ?? []) {
    const run = handedOff.get(row.partition)?.[0];
    const reach = run?.from === 0n ? run.to : 0n;
    expect([row.partition, BigInt(row.handedOffTo!) <= reach]).toEqual([row.partition, true]);
  }
  expect(
    (reported.status?.partitions ?? []).filter((p) => BigInt(p.handedOffTo!) > 0n).length,
  ).toBeGreaterThan(0);
}, 300_000);
