// Chaos (issue 9), on real parts: two replica sets of two receivers, two operators on one Lease,
// two cubes under produced load at different rates (4 partitions fast, 3 slow). Every few seconds
// each cube gets a random placement (replica-set list, strategy, pins), sometimes a second one
// mid-move, while a seeded fault schedule kill -9s an operator (any time) or a receiver (its pod
// NotReady; between moves, new ones held back until it is back, unless
// STREAMCUBE_CHAOS_RECEIVER_KILLS=any-time: see test/support/chaos.ts) and restarts it, or freezes
// the leader past its lease (SIGSTOP, then SIGCONT), freezes a receiver (SIGSTOP, pod Ready),
// restarts the broker or the API server, or kills every receiver of one set (between moves, or
// mid-move with any-time) so that its partitions fail over, and brings it back. Then everything settles and the audit reads
// every replica's live segments and hand-offs: each partition's log tiled exactly, totals equal to
// what was produced; and pyarrow, an independent reader, finds in every receiver's hand-off files
// the events the audit counted there. CI runs 2 minutes of chaos;
// `npm run chaos -- --minutes N [--seed S]` runs this test for longer, or replays a seed.
import { cubeApi, waitForSettled, waitForTilingReported } from '../support/cluster.ts';
import {
  type FaultKind,
  type ReceiverKills,
  faultKinds,
  newSeed,
  runChaos,
  waitForDropped,
} from '../support/chaos.ts';
import { auditFigures } from '../support/cube-audit.ts';
import { highWatermarks, testSchema, totalsOf } from '../support/events.ts';
import { committed, fencedReplicaSets, handOffTotals, handOffs } from '../support/hand-offs.ts';
import { expectLoadedCubeExact, loadedCube, useLoads } from '../support/loaded-cube.ts';
import { useOperatorStack } from '../support/operator-stack.ts';
import { readCommittedWithPyarrow, readHandOffsWithPyarrow } from '../support/pyarrow-reader.ts';

const minutes = Number(process.env.STREAMCUBE_CHAOS_MINUTES ?? '2');
const seed = process.env.STREAMCUBE_CHAOS_SEED
  ? Number(process.env.STREAMCUBE_CHAOS_SEED)
  : newSeed();
const faults: readonly FaultKind[] = faultKinds;
const receiverKills: ReceiverKills =
  process.env.STREAMCUBE_CHAOS_RECEIVER_KILLS === 'any-time' ? 'any-time' : 'at-rest';

const stack = useOperatorStack({
  name: 'chaos',
  replicaSets: ['rs-a', 'rs-b'],
  replicas: 2,
  // Its broker and API server are its own, restarted by faults while other suites run beside it.
  ownBroker: true,
  ownControlPlane: true,
});
const suite = useLoads(stack);

const say = (line: string): void => {
  process.stdout.write(`chaos ${line}\n`);
};

test(
  'reassigns every few seconds under random faults of receivers and operators: nothing lost, nothing counted twice',
  async () => {
    say(
      `seed ${seed}: replay with npm run chaos -- --minutes ${minutes} --seed ${seed} --receiver-kills ${receiverKills}`,
    );
    const start = Date.UTC(2026, 5, 1);
    const cubes = [
      { name: 'fast', partitions: 4, ...(await loadedCube(stack, suite, 'fast', start)) },
      {
        name: 'slow',
        partitions: 3,
        ...(await loadedCube(stack, suite, 'slow', start, {
          partitions: 3,
          perRound: 2,
          pauseMs: 400,
        })),
      },
    ];
    // A set whose receivers are all gone (replica-set-loss) fails over after 5 s; a receiver killed
    // alone never makes its set lost (its sibling stays Ready).
    for (const { name } of cubes) {
      await cubeApi(stack.kc).patchSpec(stack.namespace, name, { failoverAfter: '5s' });
      await waitForSettled(stack.kc, stack.namespace, name);
    }
    const summary = await runChaos({
      stack,
      cubes,
      durationMs: minutes * 60_000,
      seed,
      faults,
      receiverKills,
      say,
      loads: suite.loads,
    });

    const failures: unknown[] = [];
    const lines: string[] = [];
    /** The audit's figures of each cube, printed in its line and expected to be 0. */
    const miscounted: Record<
      string,
      Record<'lost' | 'twice' | 'committedLost' | 'committedTwice', bigint>
    > = {};
    for (const { name, topic, load } of cubes) {
      const settled = await waitForSettled(stack.kc, stack.namespace, name, () => true, 120_000);
      const owned = settled.status?.assignment ?? {};
      await waitForDropped(stack.replicas, name, owned);
      // A set failed over is audited by what its records hold at every replica index: its
      // replicas may have sealed a window at different offsets at a release just before the loss,
      // and the failover restarted from the record's copy (failover suite, released-then-lost).
      const committedSets = fencedReplicaSets(stack.deepStorageDir, name);
      await expectLoadedCubeExact(stack, {
        cube: name,
        topic,
        load,
        owned,
        committedSets,
      }).catch((error: unknown) => failures.push(error));
      // The operator's own tiling check agrees with the audit.
      await waitForTilingReported(stack.kc, stack.namespace, name).catch((error: unknown) =>
        failures.push(error),
      );
      const figures = await auditFigures({
        cube: name,
        deepStorageDir: stack.deepStorageDir,
        replicaSets: stack.replicas,
        highWatermarks: await highWatermarks(stack.kafka, topic),
        expected: totalsOf(load.all()),
        committedSets,
      });
      miscounted[name] = {
        lost: figures.lost,
        twice: figures.twice,
        committedLost: figures.committed.lost,
        committedTwice: figures.committed.twice,
      };
      const arrow = (await readHandOffsWithPyarrow(stack.deepStorageDir, testSchema)).filter(
        (h) => h.manifest.cube === name,
      );
      const eventsAt = testSchema.dimensions.length;
      for (const r of Object.values(stack.replicas).flat()) {
        const id = r.options.id;
        const byPyarrow = arrow
          .filter((h) => h.manifest.receiver === id)
          .flatMap((h) => h.rows.map((row) => Number(row[eventsAt])))
          .reduce((a, b) => a + b, 0);
        const own = handOffs(stack.deepStorageDir, name).filter((h) => h.manifest.receiver === id);
        const audited = handOffTotals(own).events;
        if (byPyarrow !== audited)
          failures.push(
            new Error(
              `${name} on ${id}: pyarrow reads ${byPyarrow} events handed off, the audit ${audited}`,
            ),
          );
      }
      // The reader of committed data (pyarrow over the copies commit records name) reads what
      // the audit's committed view counted.
      const committedByPyarrow = (await readCommittedWithPyarrow(stack.deepStorageDir, testSchema))
        .filter((h) => h.manifest.cube === name)
        .flatMap((h) => h.rows.map((row) => Number(row[eventsAt])))
        .reduce((a, b) => a + b, 0);
      const committedAudited = handOffTotals(
        (await committed(stack.deepStorageDir, name)).flatMap((c) => c.handOffs),
      ).events;
      if (committedByPyarrow !== committedAudited)
        failures.push(
          new Error(
            `${name}: pyarrow reads ${committedByPyarrow} committed events, the audit ${committedAudited}`,
          ),
        );
      lines.push(
        `${name}: ${load.all().length} events produced, held by replica 0 and 1 of the sets${committedSets.length > 0 ? ` (${committedSets.join(', ')} failed over: by their records)` : ''}: ${figures.events.join(', ')}; events lost ${figures.lost}, counted twice ${figures.twice}; committed view (one copy per window and set, ${figures.committed.records} commit records, ${committedByPyarrow} events in committed files read by pyarrow): ${figures.committed.events} events, lost ${figures.committed.lost}, counted twice ${figures.committed.twice}; ${arrow.length} hand-off files read by pyarrow; settled ${JSON.stringify(owned)}`,
      );
    }
    say(
      `summary (seed ${seed}, ${minutes} min, receiver kills ${receiverKills}): ${summary.placements} placements, ${summary.reassigns} reassigns completed; faults run of drawn: ${faultKinds.map((k) => `${k} ${summary.faults[k]}/${summary.drawn[k]}`).join(', ')}`,
    );
    for (const line of lines) say(line);
    // Every fault the schedule drew ran and did what it says: a run whose faults silently did
    // nothing would prove nothing.
    expect({ ran: summary.faults, notRun: summary.notRun }).toEqual({
      ran: summary.drawn,
      notRun: [],
    });
    // The lines' figures as expectations: nothing lost, nothing counted twice, in any replica's
    // data nor in the committed view.
    const none = { lost: 0n, twice: 0n, committedLost: 0n, committedTwice: 0n };
    expect(miscounted).toEqual(Object.fromEntries(cubes.map(({ name }) => [name, none])));
    if (failures.length > 0) throw failures[0];
    expect(summary.reassigns).toBeGreaterThan(0);
    expect(Object.values(summary.faults).reduce((a, b) => a + b, 0)).toBeGreaterThan(0);
  },
  minutes * 60_000 + 300_000,
);
