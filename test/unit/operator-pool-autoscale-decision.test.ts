// The autoscaler's decision over fake timelines: a load hovering at the target never changes the
// pool, a burst scales out once after scaleOutAfter, the cooldown holds every change, spec.sets
// outside [minSets, maxSets] is clamped, and scale-in needs the pool comfortably below the target
// (with every figure known) for scaleInAfter.
import {
  decideAutoscale,
  type AutoscaleDecision,
  type AutoscalePolicy,
  type LagSample,
} from '../../src/operator/pool/autoscale-decision.ts';

const policy: AutoscalePolicy = {
  minSets: 2,
  maxSets: 6,
  targetLagPerSet: 10_000,
  scaleInBelowPercent: 50,
  scaleOutAfterMs: 60_000,
  scaleInAfterMs: 300_000,
  cooldownMs: 180_000,
};

const lookMs = 10_000;

/**
 * Runs the autoscaler every `lookMs` for `lookCount` looks over a pool whose lag at look `i` and
 * size `sets` is `lagAt(i, sets)`, applying its decisions as the operator does (a change starts
 * the cooldown and a new run of samples). Returns every change.
 */
function simulate(o: {
  sets: number;
  lookCount: number;
  lagAt: (i: number, sets: number) => number;
  unknownAt?: (i: number) => string[];
  partitions?: number;
  p?: AutoscalePolicy;
  lastChangeAt?: number;
}): {
  changes: (AutoscaleDecision & { at: number; from: number })[];
  sets: number;
  last: AutoscaleDecision;
} {
  let sets = o.sets;
  let samples: LagSample[] = [];
  let lastChangeAt = o.lastChangeAt;
  const changes: (AutoscaleDecision & { at: number; from: number })[] = [];
  let last: AutoscaleDecision | undefined;
  for (let i = 0; i < o.lookCount; i++) {
    const at = 1_000_000 + i * lookMs;
    samples.push({
      at,
      sets,
      lag: o.lagAt(i, sets),
      unknown: o.unknownAt?.(i) ?? [],
      partitions: o.partitions ?? 64,
    });
    last = decideAutoscale({
      policy: o.p ?? policy,
      sets,
      now: at,
      samples,
      ...(lastChangeAt === undefined ? {} : { lastChangeAt }),
    });
    if (last.action !== 'Hold') {
      changes.push({ ...last, at, from: sets });
      sets = last.sets;
      lastChangeAt = at;
      samples = [];
    }
  }
  return { changes, sets, last: last! };
}

test('a load hovering at the target (±20%, slowly drifting) never changes the pool over 24 hours', () => {
  const lookCount = (24 * 3600_000) / lookMs;
  // Total lag follows the pool's size: each set is about targetLagPerSet behind, above it for up
  // to four looks in a row (30 s) and below it as long.
  const wobble = (i: number): number => 1 + 0.2 * Math.sin(i) + 0.05 * Math.cos(i / 500);
  const run = simulate({
    sets: 4,
    lookCount,
    lagAt: (i, sets) => Math.round(10_000 * sets * wobble(i)),
  });
  expect(run.changes).toEqual([]);
  expect(run.sets).toBe(4);
});

test('a load exactly at the target, or just below it, never scales in (hysteresis)', () => {
  for (const share of [1, 0.9, 0.7]) {
    const run = simulate({ sets: 4, lookCount: 1000, lagAt: () => 40_000 * share });
    expect(run.changes).toEqual([]);
  }
  // 4 sets at 35% of the target each: 3 sets would be at 47%, below 50%: it scales in.
  const lower = simulate({ sets: 4, lookCount: 100, lagAt: () => 14_000 });
  expect(lower.changes.map((c) => [c.from, c.sets])).toEqual([[4, 3]]);
});

test('a burst scales out once, after scaleOutAfter, to the sets the lag asks for', () => {
  // Calm for 10 looks, then 35,000 behind over 2 sets (17,500 each) from look 10 on.
  const run = simulate({
    sets: 2,
    lookCount: 40,
    lagAt: (i) => (i < 10 ? 2_000 : 35_000),
  });
  expect(run.changes).toHaveLength(1);
  const [out] = run.changes;
  // Above from look 10 (t = 100 s); the look at 160 s is the first 60 s after.
  expect(out).toMatchObject({ action: 'ScaleOut', from: 2, sets: 4, at: 1_000_000 + 160_000 });
  expect(out!.message).toBe(
    'scaled out from 2 to 4 sets: 35000 events behind over 2 sets (17500 per set), above the target 10000 per set for 1m (scaleOutAfter 1m)',
  );
  // At 4 sets the same lag is 8,750 per set: within the target, no further change.
  expect(run.last).toMatchObject({ action: 'Hold', reason: 'WithinTarget', lagPerSet: 8750 });
});

test('a burst shorter than scaleOutAfter changes nothing', () => {
  const run = simulate({
    sets: 2,
    lookCount: 60,
    lagAt: (i) => (i >= 10 && i < 15 ? 50_000 : 1_000),
  });
  expect(run.changes).toEqual([]);
});

test('the cooldown holds any change after the last one, then the decision is made afresh', () => {
  // spec.sets changed at look 0 (the cooldown is 3 minutes); the pool is far above the target.
  const run = simulate({
    sets: 2,
    lookCount: 30,
    lastChangeAt: 1_000_000,
    lagAt: () => 100_000,
  });
  // The samples taken since the change count: above from look 0, but nothing before 180 s.
  expect(run.changes.map((c) => [c.at - 1_000_000, c.from, c.sets])).toEqual([[180_000, 2, 6]]);
  const held = decideAutoscale({
    policy,
    sets: 2,
    now: 1_100_000,
    lastChangeAt: 1_000_000,
    samples: [{ at: 1_100_000, sets: 2, lag: 100_000, unknown: [], partitions: 64 }],
  });
  expect(held).toMatchObject({ action: 'Hold', reason: 'Cooldown' });
  expect(held.message).toBe(
    '100000 events behind over 2 sets (50000 per set); spec.sets changed 1m40s ago, cooldown 3m',
  );
});

test('scale-out stops at maxSets and at the partitions of the largest cube', () => {
  const atMax = simulate({ sets: 2, lookCount: 200, lagAt: () => 1_000_000 });
  expect(atMax.changes.map((c) => [c.from, c.sets])).toEqual([[2, 6]]);
  expect(atMax.last).toMatchObject({ action: 'Hold', reason: 'AtMaxSets' });
  const fewPartitions = simulate({
    sets: 2,
    lookCount: 200,
    lagAt: () => 1_000_000,
    partitions: 3,
  });
  expect(fewPartitions.changes.map((c) => [c.from, c.sets])).toEqual([[2, 3]]);
  expect(fewPartitions.last).toMatchObject({ action: 'Hold', reason: 'EveryPartitionHasASet' });
});

test('spec.sets outside [minSets, maxSets] is clamped at once, cooldown or not', () => {
  const sample = (sets: number): LagSample => ({ at: 5, sets, lag: 0, unknown: [], partitions: 8 });
  expect(
    decideAutoscale({ policy, sets: 9, now: 5, lastChangeAt: 4, samples: [sample(9)] }),
  ).toMatchObject({
    action: 'Clamp',
    sets: 6,
    message: 'spec.sets 9 is above spec.autoscale.maxSets 6: set to 6',
  });
  expect(decideAutoscale({ policy, sets: 1, now: 5, samples: [] })).toMatchObject({
    action: 'Clamp',
    sets: 2,
    message: 'spec.sets 1 is below spec.autoscale.minSets 2: set to 2',
  });
});

test('scale-in: only once comfortably below for scaleInAfter, down to minSets in one step', () => {
  // 6 sets, caught up (a few hundred behind) after a burst.
  const run = simulate({ sets: 6, lookCount: 60, lagAt: () => 300 });
  expect(run.changes).toHaveLength(1);
  const [in_] = run.changes;
  expect(in_).toMatchObject({ action: 'ScaleIn', from: 6, sets: 2, at: 1_000_000 + 300_000 });
  expect(in_!.message).toBe(
    'scaled in from 6 to 2 sets: 300 events behind over 6 sets (50 per set), 60 per set with one set fewer, below 50% of the target 10000 (5000) for 5m (scaleInAfter 5m)',
  );
  expect(run.last).toMatchObject({ action: 'Hold', reason: 'WithinTarget' });
});

test('scale-in goes only as far as the pool stays comfortably below the target', () => {
  // 24,000 behind over 6 sets: 5 sets would be at 4,800 each (below 50%), 4 at 6,000 (60%).
  const run = simulate({ sets: 6, lookCount: 40, lagAt: () => 24_000 });
  expect(run.changes.map((c) => [c.from, c.sets])).toEqual([[6, 5]]);
});

test('a lag that rises above the threshold restarts the scale-in wait', () => {
  // Below except for one look at 250 s: the scale-in comes 5 minutes after the next one.
  const run = simulate({ sets: 3, lookCount: 70, lagAt: (i) => (i === 25 ? 12_000 : 500) });
  expect(run.changes.map((c) => [c.at - 1_000_000, c.sets])).toEqual([[260_000 + 300_000, 2]]);
});

test('unknown figures never fake a low lag: no scale-in, but a known lag above the target still scales out', () => {
  const unknown = ['ns/paused (suspended)'];
  const held = simulate({ sets: 4, lookCount: 100, lagAt: () => 0, unknownAt: () => unknown });
  expect(held.changes).toEqual([]);
  expect(held.last).toMatchObject({ action: 'Hold', reason: 'LagUnknown' });
  expect(held.last.message).toBe(
    '0 events behind over 4 sets (0 per set); no scale-in while figures are unknown; not known: ns/paused (suspended)',
  );
  const out = simulate({ sets: 2, lookCount: 10, lagAt: () => 50_000, unknownAt: () => unknown });
  expect(out.changes.map((c) => [c.from, c.sets])).toEqual([[2, 5]]);
});

test('no further scale-in while a previous one still drains', () => {
  const samples: LagSample[] = Array.from({ length: 40 }, (_, i) => ({
    at: i * lookMs,
    sets: 4,
    lag: 0,
    unknown: [],
    partitions: 8,
  }));
  expect(
    decideAutoscale({ policy, sets: 4, now: 39 * lookMs, samples, draining: true }),
  ).toMatchObject({ action: 'Hold', reason: 'Draining' });
  expect(decideAutoscale({ policy, sets: 4, now: 39 * lookMs, samples })).toMatchObject({
    action: 'ScaleIn',
    sets: 2,
  });
});

test('samples of another size, or from before the last change, do not count', () => {
  const old: LagSample = { at: 0, sets: 3, lag: 90_000, unknown: [], partitions: 8 };
  const now: LagSample = { at: 70_000, sets: 2, lag: 90_000, unknown: [], partitions: 8 };
  expect(decideAutoscale({ policy, sets: 2, now: 70_000, samples: [old, now] })).toMatchObject({
    action: 'Hold',
    reason: 'AboveTarget',
  });
});
