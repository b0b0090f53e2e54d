// The partition state machine as a table: every state (and a partition not held) against every
// event, the allowed transitions with their effects on the consumer and the refused ones with
// their reason. Then the epoch rule, the report while the consumer is down, and idleness.
import type { PartitionStateName } from '../../src/protocol/admin-api.ts';
import {
  type PartitionEvent,
  type PartitionState,
  isIdle,
  lagOf,
  reportedState,
  transition,
} from '../../src/receiver/partition-state.ts';

const NOW = 1_000;

/** Every state at position 10 under epoch 2; a draining one stops at 20, a stopped one at 10. */
const held = (state: PartitionStateName): PartitionState => ({
  partition: 3,
  epoch: 2,
  state,
  position: 10n,
  stopOffset: state === 'draining' ? 20n : state === 'stopped' ? 10n : null,
  highWatermark: 40n,
  lastRecordAt: 0,
  generation: 0,
});

const events = {
  'assign, older epoch': { kind: 'assign', epoch: 1, position: 5n },
  'assign, same epoch': { kind: 'assign', epoch: 2, position: 5n },
  'assign, newer epoch': { kind: 'assign', epoch: 3, position: 5n },
  pause: { kind: 'pause' },
  resume: { kind: 'resume' },
  'drain, stop ahead': { kind: 'drain', stopOffset: 30n },
  'drain, stop at the position': { kind: 'drain', stopOffset: 10n },
  'drain, stop behind': { kind: 'drain', stopOffset: 5n },
  progress: { kind: 'progress' },
  release: { kind: 'release' },
  'release, stop ahead': { kind: 'release', stopOffset: 30n },
  'release, stop at the position': { kind: 'release', stopOffset: 10n },
  'release, stop behind': { kind: 'release', stopOffset: 5n },
  seal: { kind: 'seal' },
} satisfies Record<string, PartitionEvent>;
type EventName = keyof typeof events;
type StateName = PartitionStateName | 'not held';

/** The outcome in a line: `unchanged`, `refused <reason>`, or `→ <state> [effects] <changes>`. */
function outcome(current: PartitionState | undefined, event: PartitionEvent): string {
  const t = transition(current, 3, event, NOW);
  if (!t.ok) return `refused ${t.reason}`;
  const { next, effects } = t;
  const fresh = !current || next.epoch !== current.epoch;
  const same =
    current &&
    !fresh &&
    next.state === current.state &&
    next.stopOffset === current.stopOffset &&
    next.generation === current.generation;
  if (same && effects.length === 0) return 'unchanged';
  const parts = [same ? 'same' : `→ ${next.state}`];
  if (effects.length > 0) parts.push(`[${effects.join(',')}]`);
  if (fresh) parts.push(`epoch ${next.epoch} from ${next.position}`);
  else {
    if (next.generation > current.generation) parts.push('+generation');
    if (next.stopOffset !== current.stopOffset) parts.push(`stop ${next.stopOffset ?? 'none'}`);
  }
  return parts.join(' ');
}

const everyLiveOrNot = (row: string): Record<PartitionStateName, string> => ({
  consuming: row,
  paused: row,
  draining: row,
  stopped: row,
  released: row,
});

const table: Record<EventName, Record<StateName, string>> = {
  'assign, older epoch': {
    'not held': '→ consuming [restartConsumer] epoch 1 from 5',
    ...everyLiveOrNot('refused Conflict'),
  },
  'assign, same epoch': {
    'not held': '→ consuming [restartConsumer] epoch 2 from 5',
    ...everyLiveOrNot('unchanged'),
  },
  'assign, newer epoch': {
    'not held': '→ consuming [restartConsumer] epoch 3 from 5',
    ...everyLiveOrNot('→ consuming [restartConsumer] epoch 3 from 5'),
  },
  pause: {
    'not held': 'refused NotFound',
    consuming: '→ paused [pauseConsumer]',
    paused: 'unchanged',
    draining: '→ paused [pauseConsumer]',
    stopped: 'unchanged',
    released: 'unchanged',
  },
  resume: {
    'not held': 'refused NotFound',
    consuming: 'unchanged',
    paused: '→ consuming [resumeConsumer] +generation',
    draining: 'unchanged',
    stopped: '→ consuming [resumeConsumer] +generation stop none',
    released: 'refused Conflict',
  },
  'drain, stop ahead': {
    'not held': 'refused NotFound',
    consuming: '→ draining stop 30',
    paused: '→ draining [resumeConsumer] +generation stop 30',
    draining: '→ draining stop 30',
    // A stop offset raised after a replica that missed the pause ran further.
    stopped: '→ draining [resumeConsumer] +generation stop 30',
    released: 'refused Conflict',
  },
  'drain, stop at the position': {
    'not held': 'refused NotFound',
    consuming: '→ stopped [pauseConsumer] stop 10',
    paused: '→ stopped [pauseConsumer] stop 10',
    draining: '→ stopped [pauseConsumer] stop 10',
    stopped: 'unchanged',
    released: 'refused Conflict',
  },
  'drain, stop behind': {
    'not held': 'refused NotFound',
    ...everyLiveOrNot('refused Conflict'),
  },
  progress: {
    'not held': 'refused NotFound',
    ...everyLiveOrNot('unchanged'),
  },
  release: {
    'not held': 'refused NotFound',
    consuming: '→ released [pauseConsumer,settlePending]',
    paused: '→ released [pauseConsumer,settlePending]',
    draining: '→ released [pauseConsumer,settlePending]',
    stopped: '→ released [pauseConsumer,settlePending]',
    released: 'unchanged',
  },
  // Short of the offset the next owner starts from: its set still owes offsets, drain first.
  'release, stop ahead': {
    'not held': 'refused NotFound',
    consuming: 'refused Conflict',
    paused: 'refused Conflict',
    draining: 'refused Conflict',
    stopped: 'refused Conflict',
    released: 'unchanged',
  },
  'release, stop at the position': {
    'not held': 'refused NotFound',
    consuming: '→ released [pauseConsumer,settlePending] stop 10',
    paused: '→ released [pauseConsumer,settlePending] stop 10',
    draining: '→ released [pauseConsumer,settlePending] stop 10',
    stopped: '→ released [pauseConsumer,settlePending]',
    released: 'unchanged',
  },
  // Past it, under an epoch that is over: released, the excess fenced.
  'release, stop behind': {
    'not held': 'refused NotFound',
    consuming: '→ released [pauseConsumer,settlePending,fenceExcess] stop 5',
    paused: '→ released [pauseConsumer,settlePending,fenceExcess] stop 5',
    draining: '→ released [pauseConsumer,settlePending,fenceExcess] stop 5',
    stopped: '→ released [pauseConsumer,settlePending,fenceExcess] stop 5',
    released: 'unchanged',
  },
  seal: {
    'not held': 'refused NotFound',
    ...everyLiveOrNot('same [settlePending]'),
  },
};

const cases = Object.entries(table).flatMap(([event, row]) =>
  Object.entries(row).map(([state, expected]) => ({
    state: state as StateName,
    event: event as EventName,
    expected,
  })),
);

test('the table covers every state against every event', () => {
  expect(cases).toHaveLength(6 * Object.keys(events).length);
});

test.each(cases)('$state × $event: $expected', ({ state, event, expected }) => {
  const current = state === 'not held' ? undefined : held(state);
  const before = current && { ...current };
  expect(outcome(current, events[event])).toBe(expected);
  expect(current).toEqual(before); // pure: the state given is never changed
});

describe('transitions in detail', () => {
  test('a draining partition that reaches its stop offset stops and pauses its consumer', () => {
    const reached = { ...held('draining'), position: 20n };
    expect(outcome(reached, { kind: 'progress' })).toBe('→ stopped [pauseConsumer]');
    expect(outcome({ ...reached, position: 19n }, { kind: 'progress' })).toBe('unchanged');
  });

  test('a newer epoch starts afresh: position, no stop offset, no high watermark, a new silence', () => {
    const t = transition(held('stopped'), 3, { kind: 'assign', epoch: 7, position: 99n }, NOW);
    expect(t).toEqual({
      ok: true,
      next: {
        partition: 3,
        epoch: 7,
        state: 'consuming',
        position: 99n,
        stopOffset: null,
        highWatermark: null,
        lastRecordAt: NOW,
        generation: 0,
      },
      effects: ['restartConsumer'],
    });
  });

  test('a partition sent back to its position starts its silence now', () => {
    for (const event of [events.resume, events['drain, stop ahead']]) {
      const t = transition(held('paused'), 3, event, NOW);
      expect(t.ok && t.next.lastRecordAt).toBe(NOW);
    }
  });

  test('refusals name the field at fault', () => {
    const fieldOf = (current: PartitionState | undefined, event: PartitionEvent) => {
      const t = transition(current, 3, event, NOW);
      return t.ok ? undefined : t.field;
    };
    expect(fieldOf(held('consuming'), events['assign, older epoch'])).toBe('partitions');
    expect(fieldOf(undefined, events.pause)).toBe('partitions');
    expect(fieldOf(held('released'), events.resume)).toBe('partitions');
    expect(fieldOf(held('consuming'), events['drain, stop behind'])).toBe('stopOffsets.3');
    expect(fieldOf(held('stopped'), events['drain, stop behind'])).toBe('stopOffsets.3');
    expect(fieldOf(held('paused'), events['release, stop ahead'])).toBe('stopOffsets.3');
    expect(fieldOf(held('released'), events['drain, stop ahead'])).toBe('stopOffsets');
  });
});

describe('reported state while the consumer is down', () => {
  test.each<[PartitionStateName, boolean, ReturnType<typeof reportedState>]>([
    ['consuming', false, { state: 'consuming' }],
    ['consuming', true, { state: 'failed', intendedState: 'consuming' }],
    ['draining', true, { state: 'failed', intendedState: 'draining' }],
    ['paused', true, { state: 'paused' }],
    ['stopped', true, { state: 'stopped' }],
    ['released', true, { state: 'released' }],
  ])('%s, consumer down %s', (state, down, expected) => {
    expect(reportedState(state, down)).toEqual(expected);
  });
});

describe('idleness and lag', () => {
  const caughtUp = { ...held('consuming'), highWatermark: 10n };
  test.each<[string, PartitionState, number, boolean]>([
    ['caught up and silent for the timeout', caughtUp, 30, true],
    ['caught up but heard from recently', caughtUp, 29, false],
    ['silent but behind its high watermark', { ...caughtUp, highWatermark: 11n }, 30, false],
    ['silent with no high watermark known', { ...caughtUp, highWatermark: null }, 30, false],
    ['paused, however silent', { ...caughtUp, state: 'paused' }, 999, false],
    ['draining, however silent', { ...caughtUp, state: 'draining' }, 999, false],
  ])('%s', (_name, ps, silentFor, idle) => {
    expect(isIdle(ps, ps.lastRecordAt + silentFor, 30)).toBe(idle);
  });

  test('lag is the distance to the high watermark, never negative', () => {
    expect(lagOf({ position: 10n, highWatermark: 40n })).toBe(30n);
    expect(lagOf({ position: 41n, highWatermark: 40n })).toBe(0n);
    expect(lagOf({ position: 10n, highWatermark: null })).toBeNull();
  });
});
