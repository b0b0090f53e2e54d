// spec.approval: manual, the pure decision: the proposal a plan becomes (its id the same for the
// same generation and moves, whatever their order), and what an approval annotation does against
// it: the current id starts exactly that plan; any other id, or one for a spec since changed,
// starts nothing and is reported as stale.
import type { ObservedPartition, ReassignProposal } from '../../src/api/cube-assignment.ts';
import type { Move } from '../../src/assign/assignment.ts';
import {
  decideApproval,
  newProposal,
  proposalId,
  proposalPatch,
  staleApprovalMessage,
  uncommittedOffsets,
  type ApprovalInput,
} from '../../src/operator/approval.ts';

const now = new Date('2026-03-01T10:00:00.000Z');
const later = new Date('2026-03-01T11:00:00.000Z');
const move2: Move = { partition: 2, from: 'rs-b', to: 'rs-a' };
const move3: Move = { partition: 3, from: 'rs-b', to: 'rs-c' };
const observed: ObservedPartition[] = [
  {
    partition: 2,
    replicaSet: 'rs-b',
    position: '90',
    highWatermark: '100',
    lag: '10',
    handedOffTo: '60',
  },
  { partition: 3, replicaSet: 'rs-b', position: '100', highWatermark: '100', lag: '0' },
];

describe('proposalId', () => {
  test('the same generation and moves give the same id, in any order', () => {
    expect(proposalId(4, [move2, move3])).toBe(proposalId(4, [move3, move2]));
    expect(proposalId(4, [move2])).toMatch(/^p-4-[0-9a-f]{10}$/);
  });

  test.each([
    ['another generation', proposalId(5, [move2, move3])],
    ['another target', proposalId(4, [move2, { ...move3, to: 'rs-a' }])],
    ['another source', proposalId(4, [move2, { ...move3, from: 'rs-a' }])],
    ['fewer moves', proposalId(4, [move2])],
  ])('%s gives another id', (_, other) => {
    expect(other).not.toBe(proposalId(4, [move2, move3]));
  });
});

test('a proposal: moves by partition, every set touched, the owners lag where known', () => {
  expect(newProposal(4, [move3, move2], observed, now)).toEqual({
    id: proposalId(4, [move2, move3]),
    generation: 4,
    moves: [move2, move3],
    replicaSets: ['rs-a', 'rs-b', 'rs-c'],
    lag: { '2': '10', '3': '0' },
    // What a failover of rs-b would read again: partition 3 has handed nothing off, unknown.
    uncommitted: { '2': '30' },
    createdAt: now.toISOString(),
  });
  // A row of another owner (the partition moved meanwhile) says nothing of this move.
  expect(newProposal(4, [move2], [{ ...observed[0]!, replicaSet: 'rs-a' }], now).lag).toBe(
    undefined,
  );
});

test.each<[string, Partial<ObservedPartition> | undefined, string | undefined]>([
  ['read past the committed offset', { position: '90', handedOffTo: '60' }, '30'],
  ['everything read is committed', { position: '90', handedOffTo: '90' }, '0'],
  // A hand-off committed a window ending past a position reported a moment earlier.
  ['committed ahead of a stale position', { position: '90', handedOffTo: '95' }, '0'],
  ['nothing handed off yet: unknown', { position: '90' }, undefined],
  ['no position yet: unknown', { handedOffTo: '10' }, undefined],
  ['no row of this owner', undefined, undefined],
])('a failover would re-read: %s', (_, row, expected) => {
  expect(uncommittedOffsets(row)).toBe(expected);
});

describe('decideApproval', () => {
  const written = newProposal(4, [move2], observed, now);
  const input = (o: Partial<ApprovalInput>): ApprovalInput => ({
    moves: [move2],
    generation: 4,
    current: undefined,
    approval: undefined,
    observed,
    now: later,
    ...o,
  });

  test.each<[string, Partial<ApprovalInput>, ReturnType<typeof decideApproval>]>([
    ['nothing planned, no annotation', { moves: [] }, { kind: 'none' }],
    [
      'nothing planned, an annotation left',
      { moves: [], approval: written.id },
      { kind: 'none', stale: written.id },
    ],
    [
      'a new plan: proposed, created now',
      {},
      { kind: 'await', proposal: newProposal(4, [move2], observed, later) },
    ],
    // The lag moves with every observation: the proposal written stays as it is.
    [
      'the same plan again: the proposal written, unchanged',
      { current: written, observed: [{ ...observed[0]!, lag: '99' }] },
      { kind: 'await', proposal: written },
    ],
    [
      'the spec edited since: a new id replaces the proposal',
      { generation: 5, current: written },
      {
        kind: 'await',
        proposal: newProposal(5, [move2], observed, later),
        replaced: written.id,
      },
    ],
    [
      'an approval of the replaced proposal: nothing starts, and it is stale',
      { generation: 5, current: written, approval: written.id },
      {
        kind: 'await',
        proposal: newProposal(5, [move2], observed, later),
        replaced: written.id,
        stale: written.id,
      },
    ],
    [
      'an approval of an id never proposed',
      { current: written, approval: 'p-4-0000000000' },
      { kind: 'await', proposal: written, stale: 'p-4-0000000000' },
    ],
    [
      'the approval of the current proposal: start it',
      { current: written, approval: written.id },
      { kind: 'start', proposal: written },
    ],
    // A restarted operator computes the same id for the same plan.
    [
      'approved, the proposal not written yet: the same plan starts',
      { approval: written.id },
      { kind: 'start', proposal: newProposal(4, [move2], observed, later) },
    ],
  ])('%s', (_, o, expected) => {
    expect(decideApproval(input(o))).toEqual(expected);
  });
});

describe('proposalPatch', () => {
  const withLag = newProposal(4, [move2, move3], observed, now);
  const withoutLag: ReassignProposal = newProposal(5, [move2], undefined, later);

  test.each<[string, ReassignProposal | undefined, ReassignProposal | undefined, unknown]>([
    ['none before, none now', undefined, undefined, undefined],
    ['removed', withLag, undefined, null],
    ['first written', undefined, withLag, withLag],
    [
      'replaced by one without lag: the lag removed',
      withLag,
      withoutLag,
      { ...withoutLag, lag: null, uncommitted: null },
    ],
    [
      'replaced: lag keys it no longer has removed',
      withLag,
      { ...withoutLag, lag: { '2': '5' }, uncommitted: { '2': '40' } },
      { ...withoutLag, lag: { '2': '5', '3': null }, uncommitted: { '2': '40' } },
    ],
    [
      'replaced: uncommitted keys it no longer has removed',
      { ...withLag, uncommitted: { '2': '30', '3': '7' } },
      { ...withoutLag, uncommitted: { '3': '8' } },
      { ...withoutLag, lag: null, uncommitted: { '2': null, '3': '8' } },
    ],
  ])('%s', (_, previous, next, expected) => {
    expect(proposalPatch(previous, next)).toEqual(expected);
  });
});

test('a stale approval says what is current, or that nothing waits', () => {
  const current = newProposal(5, [move2], undefined, now);
  expect(staleApprovalMessage('p-4-abc', current)).toBe(
    `streamcube.io/approve=p-4-abc names no current proposal, so nothing was started: the current proposal is ${current.id} (generation 5: 2 rs-b→rs-a)`,
  );
  expect(staleApprovalMessage('p-4-abc', undefined)).toMatch(/no move is waiting for approval$/);
});
