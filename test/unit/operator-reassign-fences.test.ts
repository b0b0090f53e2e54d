// Starting's fences and waits: the stop fence of a source set with replicas that are not Ready,
// the wait for the sources' released data to be committed, and the fence of a set of the move
// lost before the targets started (as a source, and as a target).
import { requeueDelayMs, stepReassign } from '../../src/operator/reassign/index.ts';
import type { ReassignJournal } from '../../src/api/cube-assignment.ts';
import {
  assigned,
  committedChecked,
  harness,
  journalAt,
  phaseTimeoutMs,
  released,
  type Harness,
  stepPersisted,
} from '../support/reassign-harness.ts';

describe('stepReassign: a source replica not Ready at Starting (the stop fence)', () => {
  test('its set is fenced from the stop offsets through a target, written to the journal, before any target starts; then the targets start there', async () => {
    const h = harness(journalAt('Starting'));
    h.ctx.notReady = new Map([['rs-a', ['rs-a-2']]]);
    const first = await stepReassign(h.ctx, h.object().status!.reassign!);
    expect(first.kind).toBe('waiting');
    expect(h.log).toEqual([
      ...released,
      'rs-b-0 fence rs-a {"0":1,"1":1} from {"0":"105","1":"200"}',
      'persist Starting',
    ]);
    expect(h.object().status?.reassign).toMatchObject({
      phase: 'Starting',
      stopOffsets: { '0': '105', '1': '200' },
      stopFence: { replicaSets: ['rs-a'] },
    });
    expect(h.events).toEqual([
      'Warning StopFenced: reassign r-2-abcdef: receiver rs-a-2 of rs-a is not Ready and missed the release of partitions 0, 1: rs-a is fenced in deep storage from 0 at 105, 1 at 200 under epoch 1, so what it reads past the stop offsets is never committed',
    ]);
    h.log.length = 0;
    const second = await stepPersisted(h);
    expect(second.kind).toBe('advanced');
    // Fenced once: the journal says so.
    expect(h.log.filter((l) => l.includes('fence'))).toEqual([]);
    expect(h.log.filter((l) => l.includes('assign'))).toEqual(assigned);
  });

  test('what the set committed past a stop offset before the fence: the targets start past it and read over the rest', async () => {
    const h = harness(journalAt('Starting'));
    h.ctx.notReady = new Map([['rs-a', ['rs-a-2']]]);
    const client = h.ctx.client;
    h.ctx.client = (e) => {
      const c = client(e);
      return {
        ...c,
        fence: async (cube, request, signal) => ({
          ...(await c.fence(cube, request, signal)),
          committed: {
            '1': [
              ['150', '230'],
              ['240', '250'],
            ],
          },
        }),
      };
    };
    expect((await stepReassign(h.ctx, h.object().status!.reassign!)).kind).toBe('waiting');
    expect(h.object().status?.reassign).toMatchObject({
      stopOffsets: { '0': '105', '1': '230' },
      stopFence: { replicaSets: ['rs-a'], committedAbove: { '1': [{ from: '240', to: '250' }] } },
    });
    expect(h.events[0]).toContain(
      'it had committed past them already, so the targets start at 1 at 230',
    );
    h.log.length = 0;
    await stepPersisted(h);
    expect(h.log.filter((l) => l.includes('assign'))).toEqual([
      'rs-b-0 assign 0@105/e2/w1500,1@230/e2/w2000 skip [["240","250"]]',
      'rs-b-1 assign 0@105/e2/w1500,1@230/e2/w2000 skip [["240","250"]]',
    ]);
  });

  test('every source replica Ready, or a failover: no stop fence', async () => {
    const ready = harness(journalAt('Starting'));
    ready.ctx.notReady = new Map([['rs-b', ['rs-b-2']]]);
    expect((await stepReassign(ready.ctx, journalAt('Starting'))).kind).toBe('advanced');
    expect(ready.log.some((l) => l.includes('fence'))).toBe(false);
  });

  test('no target receiver to fence through: blocked, no target started', async () => {
    const h = harness(journalAt('Starting'), {
      faults: { 'rs-b-0 fence': 'unreachable', 'rs-b-1 fence': 'unreachable' },
    });
    h.ctx.notReady = new Map([['rs-a', ['rs-a-2']]]);
    const outcome = await stepReassign(h.ctx, h.object().status!.reassign!);
    expect(outcome.kind).toBe('blocked');
    if (outcome.kind === 'blocked') expect(outcome.error.reason).toBe('FenceFailed');
    expect(h.log.some((l) => l.includes('assign'))).toBe(false);
  });
});

describe("stepReassign: the targets start once the sources' data of the moved partitions is committed", () => {
  /** rs-a-1 reports partition 0 kept to 105, committed to `committedTo`. */
  const withCoverage = (h: Harness, committedTo: () => string): void => {
    const client = h.ctx.client;
    h.ctx.client = (e) => {
      const c = client(e);
      return {
        ...c,
        cubeSummary: async (cube, signal) => ({
          ...(await c.cubeSummary(cube, signal)),
          ...(e.name === 'rs-a-1'
            ? { coverage: { '0': { kept: [['0', '105']], handedOff: [['0', committedTo()]] } } }
            : {}),
        }),
      };
    };
  };

  test('not committed yet: the phase waits, no target started; once committed, they start', async () => {
    const h = harness(journalAt('Starting'));
    let committedTo = '80';
    withCoverage(h, () => committedTo);
    const waiting = await stepReassign(h.ctx, h.object().status!.reassign!);
    expect(waiting.kind).toBe('waiting');
    expect(waiting.requeueAfterMs).toBe(requeueDelayMs.commitPending);
    if (waiting.kind === 'waiting')
      expect(waiting.message).toBe(
        "the sources' data of the moved partitions is not committed yet on rs-a-1 (partition 0)",
      );
    expect(h.log).toEqual([...released, ...committedChecked]);
    committedTo = '105';
    h.log.length = 0;
    expect((await stepReassign(h.ctx, h.object().status!.reassign!)).kind).toBe('advanced');
    expect(h.log).toEqual([...released, ...committedChecked, ...assigned, 'persist Sealing']);
  });

  test('still not committed past the phase timeout: the targets start all the same, and the journal and a Warning say so', async () => {
    const h = harness(journalAt('Starting'), { inPhaseMs: phaseTimeoutMs + 1 });
    withCoverage(h, () => '80');
    expect((await stepReassign(h.ctx, h.object().status!.reassign!)).kind).toBe('waiting');
    expect(h.object().status?.reassign?.startedUncommitted).toBe(true);
    expect(h.events).toEqual([
      "Warning ReleasedDataUncommitted: reassign r-2-abcdef: the sources' data of the moved partitions is not committed yet on rs-a-1 (partition 0) after 60s (deep storage slow or refusing hand-offs?): the targets start all the same; should a source set be lost before that data is committed, its partitions wait for it instead of failing over",
    ]);
    h.log.length = 0;
    const started = await stepPersisted(h);
    expect(started.kind).toBe('advanced');
    expect(h.log).toEqual([...released, ...assigned, 'persist Sealing']);
  });
});

describe('stepReassign: a source replica set lost before its data of the moved partitions is committed', () => {
  test('fenced as a failover fences, its partitions restart from what it committed, not the stop offsets; Sealing does not wait for it', async () => {
    const h = harness(journalAt('Starting'), { away: ['rs-a'] });
    h.ctx.notReady = new Map([['rs-a', ['rs-a-0', 'rs-a-1']]]);
    h.ctx.lostReplicaSets = new Set(['rs-a']);
    const kinds: string[] = [];
    for (let i = 0; i < 6 && h.object().status?.reassign; i++) {
      const j = h.object().status!.reassign!;
      kinds.push(`${j.phase}: ${(await stepReassign({ ...h.ctx, object: h.object() }, j)).kind}`);
    }
    expect(kinds).toEqual(['Starting: waiting', 'Starting: advanced', 'Sealing: completed']);
    expect(h.log).toEqual([
      'rs-b-0 fence rs-a {"0":1,"1":1}',
      'persist Starting',
      'rs-b-0 assign 0@80/e2/w1500 skip [["90","95"]],1@0/e2/w2000',
      'rs-b-1 assign 0@80/e2/w1500 skip [["90","95"]],1@0/e2/w2000',
      'persist Sealing',
      'persist cleared',
    ]);
    expect(h.events[0]).toBe(
      'Warning ReplicaSetLostInMove: reassign r-2-abcdef: replica set rs-a has had no ready receiver for spec.failoverAfter (5m) and is fenced; source of partitions 0, 1, whose data of them was not all committed: they restart from 0 at 80, 1 at 0, the end of what it committed, instead of the stop offsets (0 at 105, 1 at 200)',
    );
    expect(h.object().status).toMatchObject({
      assignment: { 'rs-b': [0, 1] },
      epochs: { '0': 2, '1': 2 },
      epochStarts: { '0': '80', '1': '0' },
    });
    expect(h.object().status?.releasedUncommitted).toBeUndefined();
  });

  test('no ready receiver, not lost yet: the phase waits for it', async () => {
    const h = harness(journalAt('Starting'), { away: ['rs-a'] });
    const outcome = await stepReassign(h.ctx, h.object().status!.reassign!);
    expect(outcome.kind === 'blocked' && outcome.error.reason).toBe('SourceReplicaSetUnavailable');
    expect(h.log).toEqual([]);
  });

  test('lost after the targets started without its commit: the partitions wait for it, not failed over', async () => {
    const journal = journalAt('Starting', { startedUncommitted: true });
    const h = harness(journal, { away: ['rs-a'] });
    h.ctx.lostReplicaSets = new Set(['rs-a']);
    const outcome = await stepReassign(h.ctx, journal);
    expect(outcome.kind === 'blocked' && outcome.error.reason).toBe('SourceReplicaSetUnavailable');
    expect(h.log).toEqual([]);
  });
});

describe('stepReassign: a target replica set lost in Starting', () => {
  test('fenced from the stop offsets under the next epoch, and its moves go back to their live source, which takes them under the next epoch', async () => {
    const swap: ReassignJournal['moves'] = [
      { partition: 0, from: 'rs-a', to: 'rs-b' },
      { partition: 1, from: 'rs-b', to: 'rs-a' },
    ];
    const h = harness(journalAt('Starting', { moves: swap }), { away: ['rs-a'] });
    h.ctx.notReady = new Map([['rs-a', ['rs-a-0', 'rs-a-1']]]);
    h.ctx.lostReplicaSets = new Set(['rs-a']);
    expect((await stepReassign(h.ctx, h.object().status!.reassign!)).kind).toBe('waiting');
    expect(h.log).toEqual(['rs-b-0 fence rs-a {"0":1,"1":2} from {"1":"200"}', 'persist Starting']);
    expect(h.object().status?.reassign).toMatchObject({
      moves: [
        { partition: 0, from: 'rs-a', to: 'rs-b' },
        { partition: 1, from: 'rs-b', to: 'rs-b' },
      ],
      stopOffsets: { '0': '80', '1': '200' },
      lostSets: { replicaSets: ['rs-a'], committedAbove: { '0': [{ from: '90', to: '95' }] } },
    });
    expect(h.events).toEqual([
      'Warning ReplicaSetLostInMove: reassign r-2-abcdef: replica set rs-a has had no ready receiver for spec.failoverAfter (5m) and is fenced; source of partition 0, whose data of it was not all committed: it restarts from 0 at 80, the end of what it committed, instead of the stop offsets (0 at 105); target of partition 1: given instead to rs-b, from 1 at 200',
    ]);
    h.log.length = 0;
    const started = await stepPersisted(h);
    expect(started.kind).toBe('advanced');
    expect(h.log).toEqual([
      'rs-b-0 release [1]',
      'rs-b-1 release [1]',
      'rs-b-0 status',
      'rs-b-1 status',
      'rs-b-0 assign 0@80/e2/w1500 skip [["90","95"]],1@200/e2/w2000',
      'rs-b-1 assign 0@80/e2/w1500 skip [["90","95"]],1@200/e2/w2000',
      'persist Sealing',
    ]);
  });

  test('no live set to take its partitions: blocked, nothing written', async () => {
    const h = harness(journalAt('Starting', { moves: [{ partition: 1, to: 'rs-a' }] }), {
      away: ['rs-a', 'rs-b'],
    });
    h.ctx.lostReplicaSets = new Set(['rs-a']);
    const outcome = await stepReassign(h.ctx, h.object().status!.reassign!);
    expect(outcome.kind === 'blocked' && outcome.error.reason).toBe('TargetReceiverUnavailable');
    expect(h.log).toEqual([]);
  });
});
