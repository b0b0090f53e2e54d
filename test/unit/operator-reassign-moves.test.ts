// stepReassign over whole moves: what each step writes to the journal and status, the Events it
// records, a move run phase after phase, a source set that disappears after Draining, and a
// source replica that lacks the cube.
import {
  PhaseBlocked,
  PhaseEntries,
  isSourceless,
  placementJournal,
  stepReassign,
  type StepOutcome,
} from '../../src/operator/reassign/index.ts';
import type { CubeAssignmentStatusPatch } from '../../src/api/cube-assignment.ts';
import { ReceiverApiError } from '../../src/protocol/client.ts';
import {
  drains,
  harness,
  journalAt,
  late,
  paused,
  phaseTimeoutMs,
  startedToCleared,
  t0,
  type Fault,
} from '../support/reassign-harness.ts';

describe('stepReassign: what a step writes', () => {
  test('Pausing writes stop = the highest position over the source replicas', async () => {
    const h = harness(journalAt('Pausing'));
    await stepReassign(h.ctx, journalAt('Pausing'));
    expect(h.object().status?.reassign).toMatchObject({
      phase: 'Draining',
      stopOffsets: { '0': '105', '1': '200' },
      phaseStartedAt: new Date(t0).toISOString(),
    });
  });

  test('a move without a source stops at the starting offset, and goes on to Starting: nothing drains', async () => {
    const j = journalAt('Pausing', { moves: [{ partition: 2, to: 'rs-b' }] });
    const h = harness(j);
    await stepReassign(h.ctx, j);
    expect(h.log).toEqual(['persist Starting']);
    expect(h.object().status?.reassign?.stopOffsets).toEqual({ '2': '0' });
  });

  test('a first placement is written at Starting with its starting offsets, then completes in one step: nothing to seal', async () => {
    const fresh = { moves: [2, 3].map((partition) => ({ partition, to: 'rs-b' })) };
    const h = harness(undefined);
    h.ctx.startingOffsets = (ps) =>
      Promise.resolve(new Map(ps.map((p) => [p, BigInt(40 + p)] as const)));
    const j = await placementJournal(h.ctx, journalAt('Planned', fresh));
    expect(isSourceless(j)).toBe(true);
    expect(j).toMatchObject({ phase: 'Starting', stopOffsets: { '2': '42', '3': '43' } });
    expect(h.log).toEqual([]);

    const outcome = await stepReassign(h.ctx, j);
    expect(outcome.kind).toBe('completed');
    expect(h.log).toEqual([
      'rs-b-0 assign 2@42/e1/w-,3@43/e1/w-',
      'rs-b-1 assign 2@42/e1/w-,3@43/e1/w-',
      'persist cleared',
    ]);
    expect(h.object().status).toMatchObject({
      assignment: { 'rs-a': [0, 1], 'rs-b': [2, 3] },
      epochs: { '0': 1, '1': 1, '2': 1, '3': 1 },
    });
    expect(h.object().status?.reassign).toBeUndefined();
    expect(h.events).toEqual([
      'Normal ReassignCompleted: reassign r-2-abcdef moved 2 partition(s): 2 (new)→rs-b, 3 (new)→rs-b',
    ]);
  });

  test("a first placement's completion is handed to the caller when it holds it (written with the cube's first observation); other completions are persisted", async () => {
    const fresh = { moves: [2, 3].map((partition) => ({ partition, to: 'rs-b' })) };
    const h = harness(undefined);
    h.ctx.startingOffsets = (ps) =>
      Promise.resolve(new Map(ps.map((p) => [p, BigInt(40 + p)] as const)));
    const held: CubeAssignmentStatusPatch[] = [];
    h.ctx.holdPlacementCompletion = (status) => {
      held.push(status);
      return h.ctx.object;
    };
    const j = await placementJournal(h.ctx, journalAt('Planned', fresh));
    const outcome = await stepReassign(h.ctx, j);
    expect(outcome.kind).toBe('completed');
    expect(h.log).toEqual([
      'rs-b-0 assign 2@42/e1/w-,3@43/e1/w-',
      'rs-b-1 assign 2@42/e1/w-,3@43/e1/w-',
    ]);
    expect(held).toHaveLength(1);
    expect(held[0]).toMatchObject({
      reassign: null,
      assignment: { 'rs-a': [0, 1], 'rs-b': [2, 3] },
      epochs: { '0': 1, '1': 1, '2': 1, '3': 1 },
    });
    expect(h.events).toEqual([
      'Normal ReassignCompleted: reassign r-2-abcdef moved 2 partition(s): 2 (new)→rs-b, 3 (new)→rs-b',
    ]);

    // A move with a source is persisted at its end, whoever would hold a placement.
    const moved = journalAt('Done');
    const other = harness(moved);
    other.ctx.holdPlacementCompletion = (status) => {
      held.push(status);
      return other.ctx.object;
    };
    expect((await stepReassign(other.ctx, moved)).kind).toBe('completed');
    expect(other.log).toEqual(['persist cleared']);
    expect(held).toHaveLength(1);
  });

  test('a first placement whose starting offsets the brokers do not give: PhaseBlocked, written at Planned by the caller', async () => {
    const h = harness(undefined);
    h.ctx.startingOffsets = () => Promise.reject(new Error('connect ECONNREFUSED'));
    await expect(
      placementJournal(h.ctx, journalAt('Planned', { moves: [{ partition: 2, to: 'rs-b' }] })),
    ).rejects.toMatchObject({ reason: 'SourceUnavailable' });
  });

  test('Draining raises the stops to the positions of a replica that ran past them, and tells it', async () => {
    const h = harness(journalAt('Draining'), {
      faults: { 'rs-a-1 drain': 409, 'rs-a-1 pause': 'ahead' },
    });
    await stepReassign(h.ctx, journalAt('Draining'));
    expect(h.object().status?.reassign).toMatchObject({
      phase: 'Draining',
      stopOffsets: { '0': '155', '1': '240' },
      phaseStartedAt: new Date(t0).toISOString(),
    });
    expect(h.events).toEqual([
      'Normal StopOffsetsRaised: reassign r-2-abcdef: a replica of rs-a that missed the pause ran past the stop offsets; raised to 0 at 155, 1 at 240, every replica of rs-a drains on to them',
    ]);
    expect(h.repaired).toEqual(['rs-a-1 raiseStops']);
  });

  test('Starting tells and counts a replica released past its stop offsets (its excess fenced)', async () => {
    const h = harness(journalAt('Starting'));
    const client = h.ctx.client;
    h.ctx.client = (e) => {
      const c = client(e);
      if (e.name !== 'rs-a-1') return c;
      return {
        ...c,
        release: async (cube, partitions, signal, stopOffsets) => {
          const answer = await c.release(cube, partitions, signal, stopOffsets);
          const past = answer.partitions.map((p) => ({
            ...p,
            position: '230',
            stopOffset: stopOffsets?.[String(p.partition)] ?? null,
          }));
          return { partitions: past };
        },
      };
    };
    await stepReassign(h.ctx, journalAt('Starting'));
    expect(h.events).toEqual([
      'Warning ExcessFenced: receiver rs-a-1 (rs-a) had consumed past the stop offsets of partitions 0 (at 230, stop 105), 1 (at 230, stop 200) under an epoch that is over: it released them there and dropped the segments holding the excess, which are never handed off',
    ]);
    expect(h.repaired).toEqual(['rs-a-1 fence']);
  });

  test('Starting tells and counts a replica that missed Draining, once drained', async () => {
    const h = harness(journalAt('Starting'), { faults: { 'rs-a-0 release': '409 once' } });
    await stepReassign(h.ctx, journalAt('Starting'));
    expect(h.events).toEqual([
      "Normal ReplicaRepaired: receiver rs-a-0 (rs-a) brought to its replica set's state: it missed Draining, drained 0 at 105 (the stop offsets) before its release",
    ]);
    expect(h.repaired).toEqual(['rs-a-0 drain']);
  });

  test('Starting releases at the stop offsets, so that a replica past them fences the excess', async () => {
    const h = harness(journalAt('Starting'));
    const stops: unknown[] = [];
    const client = h.ctx.client;
    h.ctx.client = (e) => {
      const c = client(e);
      return {
        ...c,
        release: (cube, partitions, signal, stopOffsets) => {
          stops.push(stopOffsets);
          return c.release(cube, partitions, signal, stopOffsets);
        },
      };
    };
    await stepReassign(h.ctx, journalAt('Starting'));
    expect(stops).toEqual([
      { '0': '105', '1': '200' },
      { '0': '105', '1': '200' },
    ]);
  });

  test('Draining writes the highest event-time watermark over the source replicas', async () => {
    const h = harness(journalAt('Draining'));
    await stepReassign(h.ctx, journalAt('Draining'));
    expect(h.object().status?.reassign?.watermarks).toEqual({ '0': 1_500, '1': 2_000 });
  });

  test('Sealing writes the final assignment (the emptied source deleted), bumped epochs and where they began, and ends the journal', async () => {
    const h = harness(journalAt('Sealing'));
    await stepReassign(h.ctx, journalAt('Sealing'));
    expect(h.object().status).toMatchObject({
      assignment: { 'rs-b': [0, 1] },
      epochs: { '0': 2, '1': 2 },
      epochStarts: { '0': '105', '1': '200' },
    });
    // In the same write the journal ends: a move has no Done of its own to write.
    expect(h.object().status?.reassign).toBeUndefined();
    expect(Object.keys(h.object().status?.assignment ?? {})).toEqual(['rs-b']);
  });

  test.each([
    ['Pausing', 'rs-a', 'rs-b', 'advanced'],
    ['Sealing', 'rs-b', 'rs-c', 'completed'],
  ] as const)(
    '%s waits for a replica of %s that is not Ready, up to the phase timeout, then goes on and says so; %s is not waited for',
    async (phase, waitedFor, other, goesOn) => {
      const waiting = harness(journalAt(phase));
      waiting.ctx.notReady = new Map([[waitedFor, [`${waitedFor}-2`]]]);
      const outcome = await stepReassign(waiting.ctx, journalAt(phase));
      expect(outcome.kind).toBe('waiting');
      expect(outcome.kind === 'waiting' && outcome.message).toBe(
        `receiver ${waitedFor}-2 of the move's replica sets is not Ready: ${phase} waits for it, up to 60s`,
      );
      expect(waiting.log).toEqual([]);
      const untouched = harness(journalAt(phase));
      untouched.ctx.notReady = new Map([[other, [`${other}-0`]]]);
      expect((await stepReassign(untouched.ctx, journalAt(phase))).kind).toBe(goesOn);
      const late = harness(journalAt(phase), { inPhaseMs: phaseTimeoutMs + 1 });
      late.ctx.notReady = new Map([[waitedFor, [`${waitedFor}-2`]]]);
      expect((await stepReassign(late.ctx, journalAt(phase))).kind).toBe(goesOn);
      expect(late.events).toEqual([
        `Warning ReplicaMissedMove: reassign r-2-abcdef goes on in ${phase} without receiver ${waitedFor}-2, not Ready for 60s: it is brought to its set's state when back, exactly if it missed no more than this move`,
        // Sealing's write ends the move.
        ...(goesOn === 'completed'
          ? [
              'Normal ReassignCompleted: reassign r-2-abcdef moved 2 partition(s): 0 rs-a→rs-b, 1 rs-a→rs-b',
            ]
          : []),
      ]);
    },
  );

  test('Done emits ReassignCompleted; a roll-back emits ReassignRolledBack with the cause', async () => {
    const done = harness(journalAt('Done'));
    await stepReassign(done.ctx, journalAt('Done'));
    expect(done.events).toEqual([
      'Normal ReassignCompleted: reassign r-2-abcdef moved 2 partition(s): 0 rs-a→rs-b, 1 rs-a→rs-b',
    ]);

    const back = harness(journalAt('Pausing'), {
      faults: { 'rs-a-0 pause': 404, 'rs-a-1 pause': 404 },
      inPhaseMs: late,
    });
    const outcome = await stepReassign(back.ctx, journalAt('Pausing'));
    expect(back.events).toHaveLength(1);
    expect(back.events[0]).toMatch(
      /^Warning ReassignRolledBack: reassign r-2-abcdef rolled back in phase Pausing after 60s: pause on receiver rs-a-0/,
    );
    if (outcome.kind !== 'rolledBack') throw new Error(`expected a roll-back, got ${outcome.kind}`);
    expect(outcome.error.cause).toBeInstanceOf(PhaseBlocked);
    expect((outcome.error.cause as PhaseBlocked).receiverStatus).toBe(404);
  });

  test('a blocked target says which partitions wait and who released them, with the cause kept', async () => {
    const h = harness(journalAt('Starting'), { faults: { 'rs-b-0 assign': 409 } });
    const outcome = await stepReassign(h.ctx, journalAt('Starting'));
    if (outcome.kind !== 'blocked') throw new Error(`expected blocked, got ${outcome.kind}`);
    expect(outcome.error.message).toMatch(
      /^assign on receiver rs-b-0 \(rs-b\) failed: .*409.*; partitions 0, 1 \(released by rs-a\) wait for rs-b$/,
    );
    expect(outcome.error.cause).toBeInstanceOf(ReceiverApiError);
  });

  test('an unreachable receiver is named with the connection error', async () => {
    const h = harness(journalAt('Pausing'), { faults: { 'rs-a-0 pause': 'unreachable' } });
    const outcome = await stepReassign(h.ctx, journalAt('Pausing'));
    if (outcome.kind !== 'blocked') throw new Error(`expected blocked, got ${outcome.kind}`);
    expect(outcome.error.message).toBe(
      'pause on receiver rs-a-0 (rs-a) failed: fetch failed: connect ECONNREFUSED',
    );
    expect(outcome.error.receiverStatus).toBeUndefined();
  });
});

describe('stepReassign: a whole move, one phase per step', () => {
  test('Planned to the end in five steps; each write comes before the next phase calls anything', async () => {
    const h = harness(journalAt('Planned'));
    const kinds: string[] = [];
    for (let step = 0; step < 10; step += 1) {
      const journal = h.object().status?.reassign;
      if (!journal) break;
      h.ctx.object = h.object();
      kinds.push((await stepReassign(h.ctx, journal)).kind);
    }
    expect(kinds).toEqual(['advanced', 'advanced', 'advanced', 'advanced', 'completed']);
    expect(h.log).toEqual([
      'persist Pausing',
      ...paused,
      'persist Draining',
      ...drains,
      'persist Starting',
      ...startedToCleared,
    ]);
    expect(h.phases).toEqual(
      ['Planned', 'Pausing', 'Draining', 'Starting', 'Sealing'].map((p) => `r-2-abcdef ${p}`),
    );
    expect(h.object().status).toEqual({
      assignment: { 'rs-b': [0, 1] },
      epochs: { '0': 2, '1': 2 },
      epochStarts: { '0': '105', '1': '200' },
    });
  });

  test('a drain polled until done: the phase is announced once, the deadline counts from its start', async () => {
    const faults: Record<string, Fault> = { 'rs-a-0 drain': 'draining' };
    const h = harness(journalAt('Draining'), { faults });
    const outcomes: StepOutcome['kind'][] = [];
    for (const inPhaseMs of [0, 5_000, 10_000]) {
      h.clock.ms = t0 + inPhaseMs;
      outcomes.push((await stepReassign(h.ctx, journalAt('Draining'))).kind);
    }
    delete faults['rs-a-0 drain'];
    outcomes.push((await stepReassign(h.ctx, journalAt('Draining'))).kind);
    expect(outcomes).toEqual(['waiting', 'waiting', 'waiting', 'advanced']);
    expect(h.phases).toEqual(['r-2-abcdef Draining']);
    expect(h.log.filter((l) => l.includes('drain'))).toEqual([
      ...drains.slice(0, 1),
      ...drains.slice(0, 1),
      ...drains.slice(0, 1),
      ...drains,
    ]);
    expect(h.object().status?.reassign).toMatchObject({
      phase: 'Starting',
      phaseStartedAt: new Date(t0 + 10_000).toISOString(),
    });
  });

  test('a phase blocked and retried is announced once; a new process announces it again', async () => {
    const h = harness(journalAt('Starting'), { faults: { 'rs-b-0 assign': 'unreachable' } });
    await stepReassign(h.ctx, journalAt('Starting'));
    await stepReassign(h.ctx, journalAt('Starting'));
    expect(h.phases).toEqual(['r-2-abcdef Starting']);
    h.ctx.entries = new PhaseEntries();
    await stepReassign(h.ctx, journalAt('Starting'));
    expect(h.phases).toEqual(['r-2-abcdef Starting', 'r-2-abcdef Starting']);
  });
});

describe('stepReassign: a source replica set that disappears after Draining', () => {
  test('the blocked reason names the set and what waits, in Starting and in Sealing', async () => {
    const start = harness(journalAt('Starting'), { away: ['rs-a'] });
    const started = await stepReassign(start.ctx, journalAt('Starting'));
    if (started.kind !== 'blocked') throw new Error(`expected blocked, got ${started.kind}`);
    expect(started.error.message).toBe(
      'replica set rs-a (source of partitions 0, 1) has no ready receiver; partitions 0, 1, drained to their stop offsets, cannot be released: they wait for the set to come back (its data is on its volumes) and are not consumed until then',
    );
    const seal = harness(journalAt('Sealing'), { away: ['rs-a'] });
    const sealed = await stepReassign(seal.ctx, journalAt('Sealing'));
    if (sealed.kind !== 'blocked') throw new Error(`expected blocked, got ${sealed.kind}`);
    expect(sealed.error.message).toBe(
      'replica set rs-a (source of partitions 0, 1) has no ready receiver; its segments of orders cannot be sealed and handed off: the reassign does not complete until the set is back (its data is on its volumes)',
    );
    expect(seal.object().status).toMatchObject({
      assignment: { 'rs-a': [0, 1] },
      epochs: { '0': 1, '1': 1 },
      reassign: { phase: 'Sealing' },
    });
  });

  test('the set away from Starting on, then back: released, started, sealed and handed off, then ended', async () => {
    const h = harness(journalAt('Starting'), { away: ['rs-a'] });
    const away = h.ctx.receivers;
    const all = new Map([
      ...away,
      [
        'rs-a',
        ['rs-a-0', 'rs-a-1'].map((name) => ({
          name,
          replicaSet: 'rs-a',
          baseUrl: `http://${name}`,
        })),
      ],
    ]);
    const kinds: string[] = [];
    const step = async (back: boolean): Promise<void> => {
      h.ctx.receivers = back ? all : away;
      h.ctx.object = h.object();
      const journal = h.object().status?.reassign;
      if (journal) kinds.push((await stepReassign(h.ctx, journal)).kind);
    };
    await step(false);
    await step(false);
    await step(true); // Starting
    await step(false); // Sealing, away again
    await step(true); // Sealing, and the journal's end
    expect(kinds).toEqual(['blocked', 'blocked', 'advanced', 'blocked', 'completed']);
    expect(h.log).toEqual(startedToCleared);
    expect(h.object().status).toEqual({
      assignment: { 'rs-b': [0, 1] },
      epochs: { '0': 2, '1': 2 },
      epochStarts: { '0': '105', '1': '200' },
    });
  });
});

describe('stepReassign: a source replica that lacks the cube', () => {
  test('its positions do not count: stop = the highest over the replicas that hold the cube', async () => {
    const h = harness(journalAt('Pausing'), { faults: { 'rs-a-0 pause': 404 } });
    await stepReassign(h.ctx, journalAt('Pausing'));
    expect(h.object().status?.reassign?.stopOffsets).toEqual({ '0': '105', '1': '190' });
  });

  test('told once per reassign and replica (Warning Event, onCubeMissing), whatever the phases and polls', async () => {
    const faults: Record<string, Fault> = {
      'rs-a-0 pause': 404,
      'rs-a-0 drain': 404,
      'rs-a-0 release': 404,
      'rs-a-1 drain': 'draining',
    };
    const h = harness(journalAt('Pausing'), { faults });
    const run = async (): Promise<StepOutcome['kind']> => {
      h.ctx.object = h.object();
      return (await stepReassign(h.ctx, h.object().status!.reassign!)).kind;
    };
    const kinds = [await run(), await run(), await run()];
    delete faults['rs-a-1 drain'];
    kinds.push(await run(), await run());
    expect(kinds).toEqual(['advanced', 'waiting', 'waiting', 'advanced', 'advanced']);
    expect(h.events).toEqual([
      'Warning CubeNotOnReceiver: receiver rs-a-0 (rs-a) does not hold the cube: it has no data of partitions 0, 1, so reassign r-2-abcdef goes on without it; the other replicas of rs-a carry the move',
    ]);
    expect(h.missing).toEqual(['r-2-abcdef rs-a-0']);
    expect(h.object().status?.reassign?.phase).toBe('Sealing');

    // Another reassign tells it again.
    const next = journalAt('Pausing', { id: 'r-3-fedcba' });
    await stepReassign(h.ctx, next);
    expect(h.missing).toEqual(['r-2-abcdef rs-a-0', 'r-3-fedcba rs-a-0']);
  });
});
