// The stop fence of a move (issue 9): a source replica that misses the move (down through it, its
// pod NotReady) comes back consuming the moved partition under the old epoch, past the stop offset
// its set released it at, and seals and hands off a window holding that excess before the
// operator reaches it. Its commit of that copy is refused (`fenced`): the operator fenced the
// source set from the stop offsets on, in deep storage, before the new owner started. Without the
// fence the commit lands whenever the new owner has not committed the window yet, and the two
// sets' committed data overlap from the stop offset on: events counted twice.
//
// On real receivers, two replicas per set, hour windows (nothing seals while the load runs), a
// short phase timeout (the move waits that long for the missing replica in Pausing and Sealing).
// While the returning replica seals, every operator is stopped (nothing converges it) and the new
// owner's receivers are frozen (SIGSTOP: a commit of theirs first would make its copy `stale`
// instead, hiding the hole). At the end every event is counted once and every partition's log
// tiled, by each replica index and by the committed view.
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import type { SegmentStatus } from '../../src/protocol/admin-api.ts';
import type { FenceRecord } from '../../src/receiver/hand-off-commit.ts';
import { rangesFromJson } from '../../src/receiver/offset-ranges.ts';
import { cubeApi, cubeEvents, waitForCube } from '../support/cluster.ts';
import { type CubeAudit, auditFigures, expectExactAndTiled } from '../support/cube-audit.ts';
import { highWatermarks, totalsOf } from '../support/events.ts';
import { committedBy, fenceDir } from '../support/hand-offs.ts';
import { assigned, loadedCube, useLoads } from '../support/loaded-cube.ts';
import { bringBack, takeDown, useOperatorStack } from '../support/operator-stack.ts';
import { cubeOn, metricValue, waitForPositions } from '../support/receiver-checks.ts';
import type { ReceiverProcess } from '../support/receiver-process.ts';
import { waitFor } from '../support/wait.ts';

const phaseTimeoutS = 8;

const stack = useOperatorStack({
  name: 'stop-fence',
  replicaSets: ['rs-a', 'rs-b'],
  replicas: 2,
  receiver: { idleTimeout: '10s' },
  operatorArgs: [`--phase-timeout=${phaseTimeoutS}s`],
});

const suite = useLoads(stack);

// A test that failed with receivers frozen leaves them frozen: continued, so that they stop.
afterEach(() => {
  for (const r of Object.values(stack.replicas).flat()) if (r.running) r.child!.kill('SIGCONT');
});

/** Commits of a window `r` made, by outcome, as its metrics count them. */
async function commits(r: ReceiverProcess, cube: string, outcome: string): Promise<number> {
  const text = await (await fetch(`${r.baseUrl}/metrics`)).text();
  return (
    metricValue(text, 'streamcube_receiver_window_commits_total', {
      namespace: stack.namespace,
      cube,
      outcome,
    }) ?? 0
  );
}

const describeSegments = (segments: SegmentStatus[]): string =>
  JSON.stringify(
    segments.map((s) => [s.windowStart, s.generation ?? 0, s.state, s.handOff?.commit?.outcome]),
  );

test('a source replica that missed a move and ran past the stop offset has its copy fenced: nothing committed twice, totals exact', async () => {
  const cube = 'stop-fenced';
  const api = cubeApi(stack.kc);
  const { topic, load } = await loadedCube(stack, suite, cube, Date.UTC(2026, 4, 1));
  const [, a1] = stack.replicas['rs-a']!;
  const rsB = stack.replicas['rs-b']!;

  // rs-a-1 has read and checkpointed data of partition 1 (it comes back from there), then dies.
  await waitFor('rs-a-1 checkpointed a position of partition 1', () => {
    const held = a1!.checkpoint(cube)?.partitions.find((p) => p.partition === 1);
    return Promise.resolve(held !== undefined && BigInt(held.position) > 0n);
  });
  await takeDown(stack, a1!);

  // Partition 1 moves to rs-b, rs-a-1 down throughout: Pausing waits for it up to the phase
  // timeout and goes on without it; rs-a-0 is drained and released at the stop offset.
  const movedAt = Date.now();
  await api.patchSpec(stack.namespace, cube, { pins: { 'rs-a': [0], 'rs-b': [1, 2, 3] } });
  const moved = await waitForCube(
    stack.kc,
    stack.namespace,
    cube,
    'the move of partition 1 to rs-b done',
    (c) =>
      !c.status?.reassign &&
      c.status?.observedGeneration === c.metadata?.generation &&
      assigned({ 'rs-a': [0], 'rs-b': [1, 2, 3] })(c),
    90_000,
  );
  const moveMs = Date.now() - movedAt;
  expect(moved.status?.epochs).toEqual({ '0': 1, '1': 2, '2': 1, '3': 1 });
  const stop = BigInt(moved.status!.epochStarts!['1']!);

  // From here nothing converges rs-a-1 (no operator), and rs-b cannot commit anything (frozen).
  await stack.operator.kill('SIGTERM');
  for (const r of rsB) r.child!.kill('SIGSTOP');

  // rs-a-1 comes back on its volume and consumes partition 1 on under epoch 1, past the stop.
  await bringBack(stack, a1!);
  const seenAt = await waitFor(
    `rs-a-1 consuming partition 1 under epoch 1 past the stop offset ${stop}`,
    async () => {
      const held = (await a1!.client.cubeStatus(cube)).partitions.find((p) => p.partition === 1);
      if (held?.state === 'consuming' && held.epoch === 1 && BigInt(held.position) > stop + 100n)
        return BigInt(held.position);
      throw new Error(`partition 1 on rs-a-1: ${JSON.stringify(held)}`);
    },
    30_000,
    200,
  );
  await load.stop();
  const hw = await highWatermarks(stack.kafka, topic);

  // Once the load has stopped every window seals after the idle timeout: rs-a-1 hands off its copy
  // holding partition 1 past the stop offset and tries to commit it, rs-b still frozen.
  const excess = await waitFor(
    'rs-a-1 sealed and handed off its copy of partition 1 past the stop offset, its commit decided',
    async () => {
      const segments = (await a1!.client.cubeStatus(cube)).segments;
      const past = segments.filter((s) =>
        rangesFromJson(s.offsetRanges['1'] ?? []).some((x) => x.to > stop),
      );
      if (past.length > 0 && past.every((s) => s.state === 'HANDED_OFF' && s.handOff?.commit))
        return past;
      throw new Error(`rs-a-1's segments ${describeSegments(segments)}`);
    },
    60_000,
    250,
  );
  const excessOutcomes = excess.map((s) => s.handOff!.commit!.outcome);
  const fencedOnA1 = await commits(a1!, cube, 'fenced');

  // rs-b thaws and an operator runs again: it brings rs-a-1 to its set's state (partition 1
  // released at the stop offset). Every owner reads to the end and hands off what it sealed.
  for (const r of rsB) r.child!.kill('SIGCONT');
  stack.operator = await stack.startOperator();
  await waitFor('rs-a-1 released partition 1', async () => {
    const held = (await a1!.client.cubeStatus(cube)).partitions.find((p) => p.partition === 1);
    if (held === undefined || held.state === 'released') return true;
    throw new Error(`partition 1 on rs-a-1: ${JSON.stringify(held)}`);
  });
  const owned: Record<string, number[]> = { 'rs-a': [0], 'rs-b': [1, 2, 3] };
  for (const [rs, partitions] of Object.entries(owned)) {
    const ends = Object.fromEntries(partitions.map((p) => [p, hw.get(p)!]));
    for (const r of stack.replicas[rs]!) await waitForPositions(r.client, cube, ends);
  }
  for (const r of Object.values(stack.replicas).flat())
    await waitFor(
      `${r.options.id}: every window sealed, handed off and its commit decided`,
      async () => {
        const segments = (await cubeOn(r, cube))?.segments ?? [];
        if (
          segments.every(
            (s) =>
              (s.state === 'ACTIVE' && s.rowCount === 0) ||
              (s.state === 'HANDED_OFF' && s.handOff?.commit),
          )
        )
          return true;
        throw new Error(`segments ${describeSegments(segments)}`);
      },
      60_000,
      250,
    );

  // The consequence first (what a reader of the cube gets), the mechanism after. rs-a's replicas
  // are audited by their set's committed view: rs-a-1's own copy holds the excess, fenced.
  const audit: CubeAudit = {
    cube,
    deepStorageDir: stack.deepStorageDir,
    replicaSets: stack.replicas,
    highWatermarks: hw,
    expected: totalsOf(load.all()),
    committedSets: ['rs-a'],
  };
  const figures = await auditFigures(audit);
  const rsA = (await committedBy(stack.deepStorageDir, cube, 'rs-a')).get(1) ?? [];
  console.log(
    `${cube}: ${load.all().length} events produced; held by replica 0 and 1 of the sets: ${figures.events.join(', ')}, lost ${figures.lost}, counted twice ${figures.twice}; committed view (${figures.committed.records} records): ${figures.committed.events} events, lost ${figures.committed.lost}, counted twice ${figures.committed.twice}; move ${moveMs} ms, stop offset of partition 1 ${stop}, rs-a-1 seen past it at ${seenAt}, high watermark ${hw.get(1)}; rs-a-1's copies past the stop: ${excessOutcomes.join(', ')} (fenced commits counted ${fencedOnA1}); rs-a committed of partition 1 ${JSON.stringify(rsA.map((r) => [String(r.from), String(r.to)]))}`,
  );
  // Every event once, every partition's log tiled across the sets, by replica 0 and by replica 1
  // of rs-b with rs-a's committed data, and by the committed view of both sets.
  await expectExactAndTiled(audit);
  // rs-a committed nothing of partition 1 at or past the stop offset: that is rs-b's.
  expect(rsA.filter((r) => r.to > stop).map((r) => `[${r.from}, ${r.to})`)).toEqual([]);

  // rs-a-1's copy past the stop offset was refused as fenced, and counted so.
  expect(excessOutcomes).toEqual(excess.map(() => 'fenced'));
  expect(fencedOnA1).toBeGreaterThanOrEqual(1);

  // The move told that it went on without rs-a-1 and that it fenced rs-a from the stop offset.
  const events = await cubeEvents(stack.kc, stack.namespace, cube);
  // One series (an Event of one reason is counted again, its message the latest): the move went
  // on without rs-a-1 in Pausing and again in Sealing.
  const missed = events.filter((e) => e.reason === 'ReplicaMissedMove');
  expect(missed.map((e) => [e.type, e.count])).toEqual([['Warning', 2]]);
  const journalId = /^reassign (\S+) goes on in (?:Pausing|Sealing) without receiver rs-a-1,/.exec(
    missed[0]!.message ?? '',
  )?.[1];
  expect(journalId).toBeDefined();
  const stopFenced = events.filter((e) => e.reason === 'StopFenced');
  expect(stopFenced).toEqual([expect.objectContaining({ type: 'Warning' })]);
  expect(stopFenced[0]!.message).toContain('rs-a-1');
  expect(stopFenced[0]!.message).toContain(`1 at ${stop}`);
  // The convergence released partition 1 on rs-a-1 at the stop offset: rs-a's one repair since.
  const repairs = await stack.operator.metrics();
  expect(
    metricValue(repairs, 'streamcube_operator_replica_repairs_total', {
      cube,
      replica_set: 'rs-a',
      repair: 'release',
    }),
  ).toBe(1);
  expect(events.filter((e) => e.reason === 'ReplicaRepaired').map((e) => e.message)).toEqual([
    `receiver rs-a-1 (rs-a) brought to its replica set's state: released partition 1 at the offsets their owners start from (1 at ${stop})`,
  ]);

  // The fence record: rs-a's partition 1 under epoch 1, from the stop offset on.
  const fences = fenceDir(stack.deepStorageDir, stack.namespace, cube, 'rs-a');
  expect(existsSync(fences) ? readdirSync(fences) : []).toEqual([`${journalId}-stop.json`]);
  const fence = JSON.parse(
    readFileSync(join(fences, `${journalId}-stop.json`), 'utf8'),
  ) as FenceRecord;
  expect(fence).toMatchObject({
    replicaSet: 'rs-a',
    partitions: { '1': 1 },
    from: { '1': String(stop) },
  });
}, 180_000);
