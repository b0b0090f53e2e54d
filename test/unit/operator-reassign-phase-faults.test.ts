// stepReassign, phase by phase: one table of phase × fault gives the receiver calls made, in
// order with the writes, and where the journal ends up; then what a deposed leader, an abort and
// Kafka's errors do to a step. The fake receivers are test/support/reassign-harness.ts.
import type { ReassignPhase } from '../../src/api/cube-assignment.ts';
import {
  requeueDelayMs,
  stepReassign,
  type StepOutcome,
} from '../../src/operator/reassign/index.ts';
import { StaleLeaderError } from '../../src/protocol/client.ts';
import {
  assigned,
  committedChecked,
  drainTimeoutMs,
  drains,
  handOffTimeoutMs,
  harness,
  journalAt,
  late,
  moves,
  paused,
  released,
  sealedAndUnassigned,
  resumed,
  type Scenario,
} from '../support/reassign-harness.ts';

interface Expected {
  calls: string[];
  kind: StepOutcome['kind'];
  /** The persisted journal's phase afterwards, or `cleared`. */
  phase: ReassignPhase | 'cleared';
  reason?: string;
  receiverStatus?: number;
  requeueAfterMs?: number;
}

interface Case extends Scenario, Expected {
  name: string;
  at: ReassignPhase;
}

const cases: Case[] = [
  {
    name: 'Planned: nothing to call, on to Pausing',
    at: 'Planned',
    calls: ['persist Pausing'],
    kind: 'advanced',
    phase: 'Pausing',
  },
  {
    name: 'Pausing: every source replica pauses, then the stop offsets are written',
    at: 'Pausing',
    calls: [...paused, 'persist Draining'],
    kind: 'advanced',
    phase: 'Draining',
    requeueAfterMs: requeueDelayMs.advanced,
  },
  {
    name: 'Pausing, a source replica unreachable: blocked, retried',
    at: 'Pausing',
    faults: { 'rs-a-1 pause': 'unreachable' },
    calls: paused,
    kind: 'blocked',
    phase: 'Pausing',
    reason: 'PauseFailed',
    requeueAfterMs: requeueDelayMs.blocked,
  },
  {
    name: 'Pausing, a source replica unreachable past the deadline: sources resumed, rolled back',
    at: 'Pausing',
    faults: { 'rs-a-1 pause': 'unreachable' },
    inPhaseMs: late,
    calls: [...paused, ...resumed, 'persist cleared'],
    kind: 'rolledBack',
    phase: 'cleared',
    reason: 'ReassignRolledBack',
  },
  {
    name: 'Pausing, the source replica set away: blocked before any call',
    at: 'Pausing',
    away: ['rs-a'],
    calls: [],
    kind: 'blocked',
    phase: 'Pausing',
    reason: 'SourceReplicaSetUnavailable',
  },
  {
    name: 'Pausing, the source replica set away past the deadline: rolled back, nothing to resume',
    at: 'Pausing',
    away: ['rs-a'],
    inPhaseMs: late,
    calls: ['persist cleared'],
    kind: 'rolledBack',
    phase: 'cleared',
    reason: 'ReassignRolledBack',
  },
  {
    name: 'Pausing, a replica lacking the cube (404): left out, its sibling carries the move',
    at: 'Pausing',
    faults: { 'rs-a-0 pause': 404 },
    calls: [...paused, 'persist Draining'],
    kind: 'advanced',
    phase: 'Draining',
  },
  {
    name: 'Pausing, no replica of the source holding the cube (404): blocked with the status',
    at: 'Pausing',
    faults: { 'rs-a-0 pause': 404, 'rs-a-1 pause': 404 },
    calls: paused,
    kind: 'blocked',
    phase: 'Pausing',
    reason: 'PauseFailed',
    receiverStatus: 404,
  },
  {
    name: 'Draining: every source replica at its stop offsets, on to Starting',
    at: 'Draining',
    calls: [...drains, 'persist Starting'],
    kind: 'advanced',
    phase: 'Starting',
  },
  {
    name: 'Draining, the first replica not done: wait, the next replica is not asked yet',
    at: 'Draining',
    faults: { 'rs-a-0 drain': 'draining' },
    calls: drains.slice(0, 1),
    kind: 'waiting',
    phase: 'Draining',
    requeueAfterMs: requeueDelayMs.drainPending,
  },
  {
    name: 'Draining, the second replica not done: wait',
    at: 'Draining',
    faults: { 'rs-a-1 drain': 'draining' },
    calls: drains,
    kind: 'waiting',
    phase: 'Draining',
  },
  {
    name: 'Draining, not done past the drain timeout: blocked DrainIncomplete',
    at: 'Draining',
    faults: { 'rs-a-0 drain': 'draining' },
    inPhaseMs: drainTimeoutMs + 1,
    calls: drains.slice(0, 1),
    kind: 'blocked',
    phase: 'Draining',
    reason: 'DrainIncomplete',
  },
  {
    name: 'Draining, not done past the phase deadline: rolled back',
    at: 'Draining',
    faults: { 'rs-a-0 drain': 'draining' },
    inPhaseMs: late,
    calls: [...drains.slice(0, 1), ...resumed, 'persist cleared'],
    kind: 'rolledBack',
    phase: 'cleared',
    reason: 'ReassignRolledBack',
  },
  {
    name: 'Draining, a 409 from a replica not past the stop offsets (paused to read its positions): blocked with the status',
    at: 'Draining',
    faults: { 'rs-a-1 drain': 409 },
    calls: [...drains, 'rs-a-1 pause [0,1]'],
    kind: 'blocked',
    phase: 'Draining',
    reason: 'DrainFailed',
    receiverStatus: 409,
  },
  {
    name: 'Draining, a replica that missed the pause ran past the stop offsets (409): paused, the stops raised to its positions and written',
    at: 'Draining',
    faults: { 'rs-a-1 drain': 409, 'rs-a-1 pause': 'ahead' },
    calls: [...drains, 'rs-a-1 pause [0,1]', 'persist Draining'],
    kind: 'waiting',
    phase: 'Draining',
    requeueAfterMs: requeueDelayMs.advanced,
  },
  {
    name: 'Draining, the source replica set away: blocked before any call',
    at: 'Draining',
    away: ['rs-a'],
    calls: [],
    kind: 'blocked',
    phase: 'Draining',
    reason: 'SourceReplicaSetUnavailable',
  },
  {
    name: 'Draining, a replica lacking the cube (404): left out, on to Starting',
    at: 'Draining',
    faults: { 'rs-a-0 drain': 404 },
    calls: [...drains, 'persist Starting'],
    kind: 'advanced',
    phase: 'Starting',
  },
  {
    name: 'Draining, a replica lacking the cube and its sibling still draining: wait',
    at: 'Draining',
    faults: { 'rs-a-0 drain': 404, 'rs-a-1 drain': 'draining' },
    calls: drains,
    kind: 'waiting',
    phase: 'Draining',
  },
  {
    name: 'Draining, no replica of the source holding the cube (404): blocked with the status',
    at: 'Draining',
    faults: { 'rs-a-0 drain': 404, 'rs-a-1 drain': 404 },
    calls: drains,
    kind: 'blocked',
    phase: 'Draining',
    reason: 'DrainFailed',
    receiverStatus: 404,
  },
  {
    name: 'Draining, a replica unreachable: blocked',
    at: 'Draining',
    faults: { 'rs-a-0 drain': 'unreachable' },
    calls: drains.slice(0, 1),
    kind: 'blocked',
    phase: 'Draining',
    reason: 'DrainFailed',
  },
  {
    name: 'Starting: sources release, targets start from the stop offsets under the next epoch',
    at: 'Starting',
    calls: [...released, ...committedChecked, ...assigned, 'persist Sealing'],
    kind: 'advanced',
    phase: 'Sealing',
  },
  {
    name: 'Starting, a source 404 on release: it holds nothing, carry on',
    at: 'Starting',
    faults: { 'rs-a-1 release': 404 },
    calls: [...released, ...committedChecked, ...assigned, 'persist Sealing'],
    kind: 'advanced',
    phase: 'Sealing',
  },
  {
    name: 'Starting, a source replica that missed Draining (409, short of a stop): drains to it, then releases',
    at: 'Starting',
    faults: { 'rs-a-0 release': '409 once' },
    calls: [
      'rs-a-0 release [0,1]',
      'rs-a-0 status',
      'rs-a-0 drain {"0":"105"} 250ms',
      ...released,
      ...committedChecked,
      ...assigned,
      'persist Sealing',
    ],
    kind: 'advanced',
    phase: 'Sealing',
  },
  {
    name: 'Starting, a source replica that missed Draining still draining: wait',
    at: 'Starting',
    faults: { 'rs-a-0 release': 409, 'rs-a-0 drain': 'draining' },
    calls: ['rs-a-0 release [0,1]', 'rs-a-0 status', 'rs-a-0 drain {"0":"105"} 250ms'],
    kind: 'waiting',
    phase: 'Starting',
    requeueAfterMs: requeueDelayMs.drainPending,
  },
  {
    name: 'Starting, a source 409 on release, drained and refused again: blocked with the status',
    at: 'Starting',
    faults: { 'rs-a-0 release': 409 },
    calls: [
      'rs-a-0 release [0,1]',
      'rs-a-0 status',
      'rs-a-0 drain {"0":"105"} 250ms',
      'rs-a-0 release [0,1]',
    ],
    kind: 'blocked',
    phase: 'Starting',
    reason: 'ReleaseFailed',
    receiverStatus: 409,
  },
  {
    name: 'Starting, a target unreachable: blocked',
    at: 'Starting',
    faults: { 'rs-b-1 assign': 'unreachable' },
    calls: [...released, ...committedChecked, ...assigned],
    kind: 'blocked',
    phase: 'Starting',
    reason: 'StartFailed',
  },
  {
    name: 'Starting, a target unreachable past the deadline: still blocked, never rolled back',
    at: 'Starting',
    faults: { 'rs-b-1 assign': 'unreachable' },
    inPhaseMs: late,
    calls: [...released, ...committedChecked, ...assigned],
    kind: 'blocked',
    phase: 'Starting',
    reason: 'StartFailed',
  },
  {
    name: 'Starting, the target replica set away: sources released, blocked',
    at: 'Starting',
    away: ['rs-b'],
    calls: [...released, ...committedChecked],
    kind: 'blocked',
    phase: 'Starting',
    reason: 'TargetReceiverUnavailable',
  },
  {
    name: 'Starting, the source replica set away: blocked, no target started (nothing released)',
    at: 'Starting',
    away: ['rs-a'],
    calls: [],
    kind: 'blocked',
    phase: 'Starting',
    reason: 'SourceReplicaSetUnavailable',
  },
  {
    name: 'Starting, the source replica set away past the deadline: still blocked, never rolled back',
    at: 'Starting',
    away: ['rs-a'],
    inPhaseMs: late,
    calls: [],
    kind: 'blocked',
    phase: 'Starting',
    reason: 'SourceReplicaSetUnavailable',
    requeueAfterMs: requeueDelayMs.blocked,
  },
  {
    name: 'Sealing, the emptied source replica set away: blocked, Done not reached',
    at: 'Sealing',
    away: ['rs-a'],
    inPhaseMs: late,
    calls: [],
    kind: 'blocked',
    phase: 'Sealing',
    reason: 'SourceReplicaSetUnavailable',
    requeueAfterMs: requeueDelayMs.blocked,
  },
  {
    name: 'Sealing: each source replica seals (no wait), hands off and is unassigned; the journal ends',
    at: 'Sealing',
    calls: [...sealedAndUnassigned, 'persist cleared'],
    kind: 'completed',
    phase: 'cleared',
  },
  {
    name: 'Sealing, a hand-off pending: wait, the next replica is not asked yet',
    at: 'Sealing',
    faults: { 'rs-a-0 seal': 'handOffPending' },
    calls: ['rs-a-0 seal 250ms'],
    kind: 'waiting',
    phase: 'Sealing',
    requeueAfterMs: requeueDelayMs.handOffPending,
  },
  {
    name: 'Sealing, a hand-off pending past its timeout: blocked HandOffPending',
    at: 'Sealing',
    faults: { 'rs-a-1 seal': 'handOffPending' },
    inPhaseMs: handOffTimeoutMs + 1,
    calls: ['rs-a-0 seal 250ms', 'rs-a-0 unassign', 'rs-a-1 seal 250ms'],
    kind: 'blocked',
    phase: 'Sealing',
    reason: 'HandOffPending',
  },
  {
    name: 'Sealing, a 404 on seal: already unassigned, skipped',
    at: 'Sealing',
    faults: { 'rs-a-0 seal': 404 },
    calls: ['rs-a-0 seal 250ms', 'rs-a-1 seal 250ms', 'rs-a-1 unassign', 'persist cleared'],
    kind: 'completed',
    phase: 'cleared',
  },
  {
    name: 'Sealing, a 409 on unassign: blocked with the status',
    at: 'Sealing',
    faults: { 'rs-a-0 unassign': 409 },
    calls: ['rs-a-0 seal 250ms', 'rs-a-0 unassign'],
    kind: 'blocked',
    phase: 'Sealing',
    reason: 'UnassignFailed',
    receiverStatus: 409,
  },
  {
    name: 'Sealing, a source unreachable past the deadline: still blocked, never rolled back',
    at: 'Sealing',
    faults: { 'rs-a-0 seal': 'unreachable' },
    inPhaseMs: late,
    calls: ['rs-a-0 seal 250ms'],
    kind: 'blocked',
    phase: 'Sealing',
    reason: 'SealFailed',
  },
  {
    name: 'Done (left by an operator of before): the journal is cleared',
    at: 'Done',
    calls: ['persist cleared'],
    kind: 'completed',
    phase: 'cleared',
    requeueAfterMs: requeueDelayMs.ended,
  },
];

describe('stepReassign: phase × fault', () => {
  test.each(cases)('$name', async (c) => {
    const h = harness(journalAt(c.at), c);
    const outcome = await stepReassign(h.ctx, journalAt(c.at));
    expect(h.log).toEqual(c.calls);
    expect(outcome.kind).toBe(c.kind);
    expect(h.object().status?.reassign?.phase ?? 'cleared').toBe(c.phase);
    if (c.requeueAfterMs !== undefined) expect(outcome.requeueAfterMs).toBe(c.requeueAfterMs);
    if (outcome.kind === 'blocked' || outcome.kind === 'rolledBack') {
      expect(outcome.error.reason).toBe(c.reason);
      expect(outcome.error.receiverStatus).toBe(c.receiverStatus);
    } else {
      expect(c.reason).toBeUndefined();
    }
    // Every receiver call carries the reconcile's signal; each phase is announced once.
    expect(h.signals.every((s) => s === h.ctx.signal)).toBe(true);
    expect(h.phases).toEqual([`r-2-abcdef ${c.at}`]);
  });
});

describe('stepReassign: the abort signal', () => {
  test('aborted before the step: nothing is called, nothing written', async () => {
    const h = harness(journalAt('Pausing'));
    h.abort.abort(new Error('lost the lease'));
    await expect(stepReassign(h.ctx, journalAt('Pausing'))).rejects.toThrow('lost the lease');
    expect(h.log).toEqual([]);
  });

  test('aborted during a receiver call: the step stops there, with the abort and not as blocked', async () => {
    const h = harness(journalAt('Pausing'));
    const client = h.ctx.client;
    h.ctx.client = (e) => {
      const c = client(e);
      return {
        ...c,
        pause: (cube: string, partitions: number[], signal?: AbortSignal) => {
          h.abort.abort(new Error('shutting down'));
          return c.pause(cube, partitions, signal);
        },
      };
    };
    await expect(stepReassign(h.ctx, journalAt('Pausing'))).rejects.toThrow('shutting down');
    expect(h.log).toEqual(paused.slice(0, 1));
    expect(h.object().status?.reassign?.phase).toBe('Pausing');
  });
});

describe('stepReassign: fencing and Kafka errors', () => {
  test.each(['Pausing', 'Draining', 'Starting', 'Sealing'] as const)(
    'a receiver refusing the call as from a stale leader in %s: the step throws it, nothing is written or reported',
    async (phase) => {
      const method = { Pausing: 'pause', Draining: 'drain', Starting: 'release', Sealing: 'seal' }[
        phase
      ];
      const h = harness(journalAt(phase), { faults: { [`rs-a-0 ${method}`]: 'staleLeader' } });
      // Past the deadline, a blocked Pausing or Draining would roll back: a deposed leader must not.
      h.clock.ms += late;
      await expect(stepReassign(h.ctx, journalAt(phase))).rejects.toBeInstanceOf(StaleLeaderError);
      expect(h.log).toHaveLength(1);
      expect(h.log[0]).toMatch(new RegExp(`^rs-a-0 ${method}`));
      expect(h.events).toEqual([]);
      expect(h.object().status?.reassign?.phase).toBe(phase);
    },
  );

  test('Pausing, the brokers failing to give a new partition its starting offset: blocked as SourceUnavailable with the broker message, at the blocked pace', async () => {
    const j = journalAt('Pausing', { moves: [{ partition: 2, to: 'rs-b' }, ...moves] });
    const h = harness(j);
    h.ctx.startingOffsets = () =>
      Promise.reject(new Error('This server does not host this topic-partition'));
    const outcome = await stepReassign(h.ctx, j);
    if (outcome.kind !== 'blocked') throw new Error(`expected blocked, got ${outcome.kind}`);
    expect(outcome.error.reason).toBe('SourceUnavailable');
    expect(outcome.error.message).toBe(
      'cannot read the offsets of partition 2 of topic orders from brokers kafka:9092: This server does not host this topic-partition',
    );
    expect(outcome.requeueAfterMs).toBe(requeueDelayMs.blocked);
    expect(h.log).toEqual(paused);
  });

  test('Pausing, the brokers answering without a new partition: blocked, not started from offset 0', async () => {
    const j = journalAt('Pausing', { moves: [{ partition: 2, to: 'rs-b' }] });
    const h = harness(j);
    h.ctx.startingOffsets = () => Promise.resolve(new Map<number, bigint>());
    const outcome = await stepReassign(h.ctx, j);
    if (outcome.kind !== 'blocked') throw new Error(`expected blocked, got ${outcome.kind}`);
    expect(outcome.error.message).toMatch(/: no offsets reported for 2$/);
    expect(h.log).toEqual([]);
  });

  test('Pausing blocked by Kafka past the phase deadline rolls back: the sources resume', async () => {
    const j = journalAt('Pausing', { moves: [{ partition: 2, to: 'rs-b' }, ...moves] });
    const h = harness(j, { inPhaseMs: late });
    h.ctx.startingOffsets = () => Promise.reject(new Error('connect ECONNREFUSED'));
    const outcome = await stepReassign(h.ctx, j);
    expect(outcome.kind).toBe('rolledBack');
    expect(h.log).toEqual([...paused, ...resumed, 'persist cleared']);
  });
});
