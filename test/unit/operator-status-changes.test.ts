// When the operator writes status: a merge patch that changes nothing is not sent, and moving
// positions are written when a lag changes magnitude (or, in the reconciler, once per resync).
import type { ObservedPartition } from '../../src/api/cube-assignment.ts';
import {
  applyMergePatch,
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

describe('applyMergePatch', () => {
  test('merges maps key by key, deletes what is null, replaces lists and values', () => {
    const patched = applyMergePatch(current, {
      observedGeneration: 3,
      assignment: { 'rs-a': null, 'rs-b': [1, 0] },
      segments: { handedOff: 4 },
      reassign: null,
      totalLag: '0',
      partitions: undefined,
    });
    expect(patched).toEqual({
      observedGeneration: 3,
      assignment: { 'rs-b': [1, 0] },
      segments: { active: 1, immutable: 0, handedOff: 4 },
      conditions: [ready],
      totalLag: '0',
    });
    // What is patched is copied, not changed.
    expect(current.assignment).toEqual({ 'rs-a': [0, 1] });
    expect(current.segments.handedOff).toBe(3);
  });

  test('a patch over no status, and a patch that is not a map', () => {
    expect(applyMergePatch(undefined, { reassign: null, epochs: { '0': 1 } })).toEqual({
      epochs: { '0': 1 },
    });
    expect(applyMergePatch(current, [1])).toEqual([1]);
  });

  test('agrees with mergePatchChanges: the patched value needs the patch no more', () => {
    const patch = { assignment: { 'rs-a': null, 'rs-c': [2] }, reassign: null, totalLag: '5' };
    expect(mergePatchChanges(current, patch)).toBe(true);
    expect(mergePatchChanges(applyMergePatch(current, patch), patch)).toBe(false);
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
