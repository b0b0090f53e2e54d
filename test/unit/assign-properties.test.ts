// Properties of the strategies on random cubes: every partition assigned exactly once, balance,
// sticky's move count equal to an independently brute-forced minimum, and order independence.
import fc from 'fast-check';
import type { Assignment, AssignmentInput, StrategyName } from '../../src/assign/assignment.ts';
import { diffAssignments } from '../../src/assign/diff.ts';
import { rangeAssign } from '../../src/assign/range.ts';
import { roundRobinAssign } from '../../src/assign/round-robin.ts';
import { stickyAssign } from '../../src/assign/sticky.ts';
import { assignPartitions } from '../../src/assign/strategy.ts';

const strategies: StrategyName[] = ['range', 'roundRobin', 'sticky'];
const names = ['rs-a', 'rs-b', 'rs-c', 'rs-d', 'rs-e', 'rs-f', 'rs-g', 'rs-h', 'RS-Z', 'rs-10'];
const removedNames = ['rs-gone', 'rs-old'];
const byCodeUnit = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);
const ascending = (a: number, b: number): number => a - b;

interface Scenario {
  input: AssignmentInput;
  /** Who consumes each partition now, as generated: the ground truth `current` was built from. */
  holder: Map<number, string>;
}

/** Partition → owner pairs, first one wins, turned into an assignment in generated order. */
function currentFrom(pairs: [number, string][]): {
  current: Assignment;
  holder: Map<number, string>;
} {
  const holder = new Map<number, string>();
  for (const [partition, owner] of pairs) if (!holder.has(partition)) holder.set(partition, owner);
  const current: Assignment = {};
  for (const [partition, owner] of holder) (current[owner] ??= []).push(partition);
  return { current, holder };
}

function scenario(maxPartitions: number, maxReplicaSets: number): fc.Arbitrary<Scenario> {
  const partitions = fc.oneof(
    fc.integer({ min: 0, max: maxPartitions }).map((count) => [...Array(count).keys()]),
    fc.uniqueArray(fc.integer({ min: 0, max: maxPartitions + 16 }), { maxLength: maxPartitions }),
  );
  const owner = fc.constantFrom(...names, ...removedNames);
  return fc
    .record({
      partitions,
      replicaSets: fc.shuffledSubarray(names, { minLength: 1, maxLength: maxReplicaSets }),
      // Partitions past the topic's end stand for ones the current assignment still mentions.
      pairs: fc.array(fc.tuple(fc.integer({ min: 0, max: maxPartitions + 20 }), owner), {
        maxLength: maxPartitions + 20,
      }),
    })
    .map(({ partitions, replicaSets, pairs }) => {
      const { current, holder } = currentFrom(pairs);
      return { input: { partitions, replicaSets, current }, holder };
    });
}

/** Partition → every replica set listing it in `assignment`. */
function listings(assignment: Assignment): Map<number, string[]> {
  const result = new Map<number, string[]>();
  for (const [replicaSet, partitions] of Object.entries(assignment))
    for (const partition of partitions)
      result.set(partition, [...(result.get(partition) ?? []), replicaSet]);
  return result;
}

function expectComplete(input: AssignmentInput, result: Assignment): void {
  expect(Object.keys(result).sort()).toEqual([...input.replicaSets].sort());
  for (const partitions of Object.values(result))
    expect(partitions).toEqual([...partitions].sort(ascending));
  const listed = listings(result);
  expect([...listed.keys()].sort(ascending)).toEqual([...input.partitions].sort(ascending));
  for (const owners of listed.values()) expect(owners).toHaveLength(1);
}

function sizes(result: Assignment): number[] {
  return Object.values(result).map((partitions) => partitions.length);
}

/** Partitions of the topic whose owner differs from their live holder (or who have none). */
function movedPartitions(scene: Scenario, result: Assignment): number[] {
  const live = new Set(scene.input.replicaSets);
  const owner = new Map([...listings(result)].map(([p, [r]]) => [p, r]));
  return scene.input.partitions.filter((p) => {
    const holder = scene.holder.get(p);
    return holder === undefined || !live.has(holder) || owner.get(p) !== holder;
  });
}

function* subsets<T>(items: readonly T[], size: number, from = 0): Generator<T[]> {
  if (size === 0) {
    yield [];
    return;
  }
  for (let i = from; i <= items.length - size; i++)
    for (const rest of subsets(items, size - 1, i + 1)) yield [items[i] as T, ...rest];
}

/**
 * The fewest moves any balanced assignment needs, without pins: partitions with no live holder
 * must move, and a replica set keeps at most its cap (floor or ceil of P / R, exactly P % R of them
 * at ceil) of what it holds. Brute force over which replica sets are at ceil.
 */
function minimumMoves(scene: Scenario): number {
  const { partitions, replicaSets } = scene.input;
  const held = new Map<string, number>(replicaSets.map((r) => [r, 0]));
  let orphans = 0;
  for (const partition of partitions) {
    const holder = scene.holder.get(partition);
    if (holder !== undefined && held.has(holder)) held.set(holder, (held.get(holder) ?? 0) + 1);
    else orphans++;
  }
  const floor = Math.floor(partitions.length / replicaSets.length);
  let best = Infinity;
  for (const atCeil of subsets(replicaSets, partitions.length % replicaSets.length)) {
    let excess = 0;
    for (const [replicaSet, count] of held)
      excess += Math.max(0, count - (floor + (atCeil.includes(replicaSet) ? 1 : 0)));
    best = Math.min(best, excess);
  }
  return orphans + best;
}

describe.each(strategies)('%s on random cubes', (strategy) => {
  test('assigns every partition exactly once, to a replica set of the cube, balanced', () => {
    fc.assert(
      fc.property(scenario(64, 8), ({ input }) => {
        const result = assignPartitions(strategy, input);
        expectComplete(input, result);
        expect(Math.max(...sizes(result)) - Math.min(...sizes(result))).toBeLessThanOrEqual(1);
      }),
      { numRuns: 300 },
    );
  });

  test('gives the same answer whatever the order of its input', () => {
    fc.assert(
      fc.property(scenario(64, 8), fc.gen(), ({ input }, g) => {
        const shuffle = <T>(items: T[]): T[] =>
          g(fc.shuffledSubarray, items, { minLength: items.length, maxLength: items.length });
        const current = input.current ?? {};
        const shuffled = {
          partitions: shuffle(input.partitions),
          replicaSets: shuffle(input.replicaSets),
          current: Object.fromEntries(
            shuffle(Object.keys(current)).map((r) => [r, shuffle(current[r] ?? [])]),
          ),
        };
        expect(JSON.stringify(assignPartitions(strategy, shuffled))).toBe(
          JSON.stringify(assignPartitions(strategy, input)),
        );
      }),
      { numRuns: 200 },
    );
  });
});

test('range: contiguous runs over the replica sets in name order, larger runs first', () => {
  fc.assert(
    fc.property(scenario(64, 8), ({ input }) => {
      const result = rangeAssign(input);
      const inNameOrder = [...input.replicaSets].sort(byCodeUnit);
      expect(inNameOrder.flatMap((r) => result[r] ?? [])).toEqual(
        [...input.partitions].sort(ascending),
      );
      const runs = inNameOrder.map((r) => result[r]?.length ?? 0);
      expect(runs).toEqual([...runs].sort((a, b) => b - a));
    }),
    { numRuns: 300 },
  );
});

test('roundRobin: the i-th partition goes to replica set i mod R in name order', () => {
  fc.assert(
    fc.property(scenario(64, 8), ({ input }) => {
      const result = roundRobinAssign(input);
      const inNameOrder = [...input.replicaSets].sort(byCodeUnit);
      [...input.partitions].sort(ascending).forEach((partition, i) => {
        expect(result[inNameOrder[i % inNameOrder.length] ?? '']).toContain(partition);
      });
    }),
    { numRuns: 300 },
  );
});

describe('sticky on random cubes', () => {
  test('moves exactly the minimum number of partitions', () => {
    fc.assert(
      fc.property(scenario(64, 8), (scene) => {
        const result = stickyAssign(scene.input);
        const moved = movedPartitions(scene, result);
        expect(moved).toHaveLength(minimumMoves(scene));
        expect(diffAssignments(scene.input.current ?? {}, result).map((m) => m.partition)).toEqual(
          moved.sort(ascending),
        );
      }),
      { numRuns: 1000 },
    );
  });

  test('moves nothing when the current assignment is already balanced', () => {
    const balanced = fc
      .record({
        partitions: fc.uniqueArray(fc.integer({ min: 0, max: 100 }), { maxLength: 64 }),
        replicaSets: fc.shuffledSubarray(names, { minLength: 1, maxLength: 8 }),
      })
      .map(({ partitions, replicaSets }) => {
        // Dealt in generated (random) order: random members, random holders of the extra ones.
        const current: Assignment = Object.fromEntries(replicaSets.map((r) => [r, []]));
        partitions.forEach((p, i) => current[replicaSets[i % replicaSets.length] ?? '']?.push(p));
        return { partitions, replicaSets, current };
      });
    fc.assert(
      fc.property(balanced, (input) => {
        const result = stickyAssign(input);
        expect(diffAssignments(input.current, result)).toEqual([]);
        for (const [replicaSet, partitions] of Object.entries(input.current))
          expect(result[replicaSet]).toEqual([...partitions].sort(ascending));
      }),
      { numRuns: 300 },
    );
  });

  test('is stable: assigning again from its own result changes nothing', () => {
    fc.assert(
      fc.property(scenario(64, 8), ({ input }) => {
        const once = stickyAssign(input);
        expect(stickyAssign({ ...input, current: once })).toEqual(once);
      }),
      { numRuns: 300 },
    );
  });
});

describe('with pins, on small random cubes', () => {
  interface PinnedScenario extends Scenario {
    pinned: Map<number, string>;
  }
  const pinnedScenario: fc.Arbitrary<PinnedScenario> = scenario(12, 4).chain((scene) =>
    fc
      .array(
        fc.tuple(
          fc.constantFrom(...(scene.input.partitions.length > 0 ? scene.input.partitions : [0])),
          fc.constantFrom(...scene.input.replicaSets),
        ),
        { maxLength: 8 },
      )
      .map((pairs) => {
        const pinned = new Map<number, string>();
        for (const [partition, replicaSet] of pairs)
          if (scene.input.partitions.includes(partition) && !pinned.has(partition))
            pinned.set(partition, replicaSet);
        const pins: Record<string, number[]> = {};
        for (const [partition, replicaSet] of pinned) (pins[replicaSet] ??= []).push(partition);
        return { ...scene, input: { ...scene.input, pins }, pinned };
      }),
  );

  /** Balanced with pins: no unpinned partition sits where moving it to the emptiest would help. */
  function expectBalancedAroundPins(scene: PinnedScenario, result: Assignment): void {
    const lowest = Math.min(...sizes(result));
    for (const partitions of Object.values(result))
      if (partitions.some((p) => !scene.pinned.has(p)))
        expect(partitions.length).toBeLessThanOrEqual(lowest + 1);
  }

  function* compositions(total: number, parts: number): Generator<number[]> {
    if (parts === 1) {
      yield [total];
      return;
    }
    for (let first = 0; first <= total; first++)
      for (const rest of compositions(total - first, parts - 1)) yield [first, ...rest];
  }

  /**
   * Brute force over every way to share the unpinned partitions out, keeping the balanced ones
   * (the criterion above); the fewest moves is unhoused partitions + excess over the share.
   */
  function minimumUnpinnedMoves(scene: PinnedScenario): number {
    const { partitions, replicaSets } = scene.input;
    const unpinned = partitions.filter((p) => !scene.pinned.has(p));
    const pinnedCount = replicaSets.map(
      (r) => [...scene.pinned.values()].filter((o) => o === r).length,
    );
    const held = replicaSets.map((r) => unpinned.filter((p) => scene.holder.get(p) === r).length);
    const orphans = unpinned.length - held.reduce((a, b) => a + b, 0);
    let best = Infinity;
    for (const shares of compositions(unpinned.length, replicaSets.length)) {
      const totals = shares.map((s, i) => s + (pinnedCount[i] ?? 0));
      const lowest = Math.min(...totals);
      if (shares.some((s, i) => s > 0 && (totals[i] ?? 0) > lowest + 1)) continue;
      best = Math.min(
        best,
        shares.reduce((sum, s, i) => sum + Math.max(0, (held[i] ?? 0) - s), 0),
      );
    }
    return orphans + best;
  }

  test.each(strategies)('%s honours every pin and balances the rest around them', (strategy) => {
    fc.assert(
      fc.property(pinnedScenario, (scene) => {
        const result = assignPartitions(strategy, scene.input);
        expectComplete(scene.input, result);
        for (const [partition, replicaSet] of scene.pinned)
          expect(result[replicaSet]).toContain(partition);
        expectBalancedAroundPins(scene, result);
      }),
      { numRuns: 500 },
    );
  });

  test('sticky moves the fewest unpinned partitions a balanced result allows', () => {
    fc.assert(
      fc.property(pinnedScenario, (scene) => {
        const result = stickyAssign(scene.input);
        const moved = movedPartitions(scene, result).filter((p) => !scene.pinned.has(p));
        expect(moved).toHaveLength(minimumUnpinnedMoves(scene));
      }),
      { numRuns: 1000 },
    );
  });
});
