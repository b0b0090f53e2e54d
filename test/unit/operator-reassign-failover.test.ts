// A failover of a lost replica set: where a failed-over partition restarts (failoverStart), and
// the journal's Planned → Fencing → Starting, fenced through a receiver of a target set.
import { failoverStart, stepReassign } from '../../src/operator/reassign/index.ts';
import type { ReassignJournal } from '../../src/api/cube-assignment.ts';
import { harness, journalAt } from '../support/reassign-harness.ts';

describe('failoverStart: where a failed-over partition restarts', () => {
  const r = (from: number, to: number) => ({ from: BigInt(from), to: BigInt(to) });
  test.each([
    {
      name: 'nothing committed: at the epoch start',
      start: 100,
      committed: [],
      restart: 100,
      over: [],
    },
    {
      name: 'committed from the start: at its end',
      start: 100,
      committed: [r(100, 180)],
      restart: 180,
      over: [],
    },
    {
      name: 'committed before the epoch only: at the epoch start',
      start: 100,
      committed: [r(0, 100)],
      restart: 100,
      over: [],
    },
    {
      name: 'a late window committed past the first gap: read over',
      start: 0,
      committed: [r(0, 80), r(90, 95), r(120, 130)],
      restart: 80,
      over: [r(90, 95), r(120, 130)],
    },
    {
      name: 'a gap right at the epoch start',
      start: 10,
      committed: [r(0, 5), r(20, 30)],
      restart: 10,
      over: [r(20, 30)],
    },
  ])('$name', ({ start, committed, restart, over }) => {
    const got = failoverStart(BigInt(start), committed);
    expect(got.restart).toBe(BigInt(restart));
    expect(got.readOver).toEqual(over);
  });
});

describe('stepReassign: a failover of a lost replica set', () => {
  const failoverJournal = (): ReassignJournal =>
    journalAt('Planned', { id: 'f-2-abcdef', failover: { replicaSets: ['rs-a'] } });

  test('Planned → Fencing → Starting → done: fenced through a target, restarted past what it committed, the lost set never called', async () => {
    const h = harness(failoverJournal(), { away: ['rs-a'] });
    // The lost set's pods are there, not Ready: nothing waits for them.
    h.ctx.notReady = new Map([['rs-a', ['rs-a-0', 'rs-a-1']]]);
    const kinds: string[] = [];
    for (let i = 0; i < 4 && h.object().status?.reassign; i++) {
      const j = h.object().status!.reassign!;
      const outcome = await stepReassign({ ...h.ctx, object: h.object() }, j);
      kinds.push(`${j.phase}: ${outcome.kind}`);
    }
    expect(kinds).toEqual(['Planned: advanced', 'Fencing: advanced', 'Starting: completed']);
    expect(h.log).toEqual([
      'persist Fencing',
      'rs-b-0 fence rs-a {"0":1,"1":1}',
      'persist Starting',
      'rs-b-0 assign 0@80/e2/w- skip [["90","95"]],1@0/e2/w-',
      'rs-b-1 assign 0@80/e2/w- skip [["90","95"]],1@0/e2/w-',
      'persist cleared',
    ]);
    expect(h.log.some((l) => l.startsWith('rs-a'))).toBe(false);
    const status = h.object().status!;
    expect(status.assignment).toEqual({ 'rs-b': [0, 1] });
    expect(status.epochs).toEqual({ '0': 2, '1': 2 });
    expect(status.epochStarts).toEqual({ '0': '80', '1': '0' });
    expect(h.events.map((e) => e.split(':')[0])).toEqual([
      'Warning FailoverStarted',
      'Normal FailoverCompleted',
    ]);
    expect(h.events[0]).toContain('restart from 0 at 80, 1 at 0');
    expect(h.events[0]).toContain('1 committed range past the restart read over');
  });

  test('the first target receiver unreachable: fenced through the next one', async () => {
    const h = harness(
      journalAt('Fencing', { id: 'f-2-abcdef', failover: { replicaSets: ['rs-a'] } }),
      {
        away: ['rs-a'],
        faults: { 'rs-b-0 fence': 'unreachable' },
      },
    );
    const outcome = await stepReassign(h.ctx, h.object().status!.reassign!);
    expect(outcome.kind).toBe('advanced');
    expect(h.log.filter((l) => l.includes('fence'))).toEqual([
      'rs-b-0 fence rs-a {"0":1,"1":1}',
      'rs-b-1 fence rs-a {"0":1,"1":1}',
    ]);
  });

  test('no target receiver answers: blocked as FenceFailed, nothing written', async () => {
    const h = harness(
      journalAt('Fencing', { id: 'f-2-abcdef', failover: { replicaSets: ['rs-a'] } }),
      {
        away: ['rs-a'],
        faults: { 'rs-b-0 fence': 'unreachable', 'rs-b-1 fence': 'unreachable' },
      },
    );
    const outcome = await stepReassign(h.ctx, h.object().status!.reassign!);
    expect(outcome.kind).toBe('blocked');
    if (outcome.kind === 'blocked') expect(outcome.error.reason).toBe('FenceFailed');
    expect(h.log.filter((l) => l.startsWith('persist'))).toEqual([]);
  });
});
