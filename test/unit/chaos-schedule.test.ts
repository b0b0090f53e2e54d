// The chaos test's choices (test/support/chaos.ts): a seed replays the same draws, every random
// placement is a spec the API accepts, and its merge patch leaves exactly its pins whatever the
// spec held before.
import { cubeAssignmentSpec } from '../../src/api/cube-assignment.ts';
import { placementPatch, randomPlacement, Random } from '../support/chaos.ts';
import { applyMergePatch, ordersCube } from '../support/cube-assignments.ts';

const sets = ['rs-a', 'rs-b', 'rs-c'];

test('one seed, one sequence of draws; another seed, another', () => {
  const draws = (seed: number): number[] => {
    const random = new Random(seed);
    return Array.from({ length: 20 }, () => random.between(0, 1_000));
  };
  expect(draws(42)).toEqual(draws(42));
  expect(draws(42)).not.toEqual(draws(43));
});

test('a fork draws independently of its parent after the fork', () => {
  const a = new Random(7);
  const b = new Random(7);
  const forkA = a.fork();
  const forkB = b.fork();
  a.next(); // the parent drawing more does not shift the fork
  expect(Array.from({ length: 5 }, () => forkA.next())).toEqual(
    Array.from({ length: 5 }, () => forkB.next()),
  );
});

test('random placements are valid specs, and patched over any earlier one they are exact', () => {
  const random = new Random(2026);
  let spec: unknown = ordersCube(['rs-a']).spec;
  const seen = { pinned: 0, unpinned: 0, strategies: new Set<string>() };
  for (let i = 0; i < 500; i++) {
    const placement = randomPlacement(random, sets, 4);
    spec = applyMergePatch(spec, placementPatch(placement, sets));
    const parsed = cubeAssignmentSpec.parse(spec);
    expect(parsed.replicaSets).toEqual(placement.replicaSets);
    expect(parsed.strategy).toBe(placement.strategy);
    expect(parsed.pins).toEqual(placement.pins);
    for (const ps of Object.values(placement.pins ?? {}))
      for (const p of ps) expect(p >= 0 && p < 4).toBe(true);
    seen[placement.pins ? 'pinned' : 'unpinned'] += 1;
    seen.strategies.add(placement.strategy);
  }
  expect(seen.pinned).toBeGreaterThan(100);
  expect(seen.unpinned).toBeGreaterThan(100);
  expect(seen.strategies.size).toBe(3);
});
