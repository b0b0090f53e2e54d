// When the operator writes status: a merge patch that changes nothing is not sent, and moving
// positions are written when a lag changes magnitude (or, in the reconciler, once per resync).
import type { ObservedPartition } from '../../src/api/cube-assignment.ts';
import {
  lagBucket,
  mergePatchChanges,
  partitionRowsMoved,
} from '../../src/operator/status-changes.ts';

const ready = {
  type: 'Ready',
  status: 'True',
  reason: 'Consuming',
  message: 'every partition has a consuming replica set',
  lastTransitionTime: '2026-01-01T00:00:00Z',
};
const current = {
  observedGeneration: 2,
  assignment: { 'rs-a': [0, 1] },
  segments: { active: 1, immutable: 0, handedOff: 3 },
  conditions: [ready],
};

describe('mergePatchChanges', () => {
  test.each<[string, unknown, boolean]>([
    ['the same fields and values', { observedGeneration: 2, conditions: [ready] }, false],
    ['an empty patch', {}, false],
    ['a field left undefined', { observedGeneration: undefined }, false],
    ['a map with the same keys', { segments: { active: 1, immutable: 0, handedOff: 3 } }, false],
    ['part of a map (merged key by key)', { segments: { active: 1 } }, false],
    ['null for a field that is absent', { reassign: null }, false],
    ['a changed number', { observedGeneration: 3 }, true],
    ['a changed map value', { segments: { handedOff: 4 } }, true],
    ['a new map key', { assignment: { 'rs-b': [] } }, true],
    ['null for a present map key', { assignment: { 'rs-a': null } }, true],
    ['a list in another order (lists replace)', { assignment: { 'rs-a': [1, 0] } }, true],
    ['a condition with another message', { conditions: [{ ...ready, message: 'x' }] }, true],
    ['a new field', { totalLag: '0' }, true],
  ])('%s', (_, patch, changes) => {
    expect(mergePatchChanges(current, patch)).toBe(changes);
  });

  test('any field over no status at all', () => {
    expect(mergePatchChanges(undefined, { observedGeneration: 1 })).toBe(true);
  });
});

describe('lagBucket', () => {
  test.each<[string | undefined, number]>([
    [undefined, -1],
    ['0', 0],
    ['1', 1],
    ['9', 1],
    ['10', 2],
    ['999', 3],
    ['1000', 4],
  ])('%s → %d', (lag, bucket) => {
    expect(lagBucket(lag)).toBe(bucket);
  });
});

describe('partitionRowsMoved', () => {
  const row = (partition: number, position: string, lag: string): ObservedPartition => ({
    partition,
    replicaSet: 'rs-a',
    position,
    highWatermark: String(BigInt(position) + BigInt(lag)),
    lag,
  });
  const written = [row(0, '100', '5'), row(1, '200', '0')];
  test.each<[string, ObservedPartition[], boolean]>([
    ['the same rows', written, false],
    [
      'positions moved, lags of the same magnitude',
      [row(0, '180', '7'), row(1, '260', '0')],
      false,
    ],
    ['a lag from 5 to 50', [row(0, '100', '50'), row(1, '200', '0')], true],
    ['a lag from 0 to 1', [row(0, '100', '5'), row(1, '200', '1')], true],
    ['a partition fewer', [row(0, '100', '5')], true],
    ['another owner', [row(0, '100', '5'), { ...row(1, '200', '0'), replicaSet: 'rs-b' }], true],
    [
      'no high watermark any more',
      [row(0, '100', '5'), { partition: 1, replicaSet: 'rs-a' }],
      true,
    ],
  ])('%s', (_, observed, moved) => {
    expect(partitionRowsMoved(written, observed)).toBe(moved);
  });

  test('nothing written yet', () => {
    expect(partitionRowsMoved(undefined, written)).toBe(true);
  });
});
