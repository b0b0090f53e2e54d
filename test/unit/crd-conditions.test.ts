// Conditions in metav1.Condition shape: the transition time moves only when the status flips,
// and reasons that the API server would refuse are refused before a status write.
import {
  condition,
  getCondition,
  isConditionTrue,
  setCondition,
  type Condition,
} from '../../src/api/conditions.ts';

const t0 = new Date('2026-11-30T10:00:00.123Z');
const t1 = new Date('2026-11-30T10:05:00.456Z');

const ready = (status: 'True' | 'False' | 'Unknown', reason: string, observedGeneration = 1) => ({
  type: 'Ready',
  status,
  reason,
  message: `${reason} message`,
  observedGeneration,
});

test('a new condition is appended with the time at second precision', () => {
  const conditions = setCondition(undefined, ready('False', 'Reconciling'), t0);
  expect(conditions).toEqual([
    {
      type: 'Ready',
      status: 'False',
      observedGeneration: 1,
      lastTransitionTime: '2026-11-30T10:00:00Z',
      reason: 'Reconciling',
      message: 'Reconciling message',
    },
  ]);
  expect(condition.safeParse(conditions[0]).success).toBe(true);
});

test('the same status keeps lastTransitionTime but takes the new reason, message and generation', () => {
  const before = setCondition([], ready('False', 'Reconciling'), t0);
  const after = setCondition(before, ready('False', 'ReplicaSetMissing', 2), t1);
  expect(after[0]).toMatchObject({
    status: 'False',
    reason: 'ReplicaSetMissing',
    message: 'ReplicaSetMissing message',
    observedGeneration: 2,
    lastTransitionTime: '2026-11-30T10:00:00Z',
  });
});

test('a flipped status moves lastTransitionTime', () => {
  const before = setCondition([], ready('False', 'Reconciling'), t0);
  const after = setCondition(before, ready('True', 'Assigned'), t1);
  expect(after[0]?.lastTransitionTime).toBe('2026-11-30T10:05:00Z');
  expect(isConditionTrue(after, 'Ready')).toBe(true);
  expect(isConditionTrue(before, 'Ready')).toBe(false);
});

test('other conditions keep their place and the input array is not mutated', () => {
  const progressing = { ...ready('True', 'Reassigning'), type: 'Progressing' };
  const degraded = { ...ready('False', 'AsExpected'), type: 'Degraded' };
  const before = setCondition(
    setCondition(setCondition([], ready('Unknown', 'Starting'), t0), progressing, t0),
    degraded,
    t0,
  );
  const snapshot = structuredClone(before);
  const after = setCondition(before, { ...progressing, status: 'False', reason: 'Idle' }, t1);
  expect(after.map((c) => c.type)).toEqual(['Ready', 'Progressing', 'Degraded']);
  expect(after[0]).toBe(before[0]);
  expect(getCondition(after, 'Progressing')?.reason).toBe('Idle');
  expect(before).toEqual(snapshot);
});

test('getCondition finds by type and tolerates a missing list', () => {
  const conditions: Condition[] = setCondition([], ready('True', 'Assigned'), t0);
  expect(getCondition(conditions, 'Ready')?.status).toBe('True');
  expect(getCondition(conditions, 'Degraded')).toBeUndefined();
  expect(getCondition(undefined, 'Ready')).toBeUndefined();
});

test.each(['reassign failed', 'Reassign-Failed', '9Lives', '', 'Trailing:'])(
  'reason %j is refused (Kubernetes accepts CamelCase only)',
  (reason) => {
    expect(() => setCondition([], ready('False', reason), t0)).toThrow(/reason/);
  },
);

test.each(['ReassignFailed', 'Partition_Unassigned', 'A', 'Failed:Timeout'])(
  'reason %j is accepted',
  (reason) => {
    expect(setCondition([], ready('False', reason), t0)[0]?.reason).toBe(reason);
  },
);

test('a condition type must be a metav1 condition type', () => {
  expect(() => setCondition([], { ...ready('True', 'Ok'), type: 'not ready' }, t0)).toThrow(
    /condition type/,
  );
  expect(
    setCondition([], { ...ready('True', 'Ok'), type: 'streamcube.io/Sealed' }, t0)[0]?.type,
  ).toBe('streamcube.io/Sealed');
});
