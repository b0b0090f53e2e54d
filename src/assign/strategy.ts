// The entry point the operator calls: pins first, then the cube's strategy places the rest.
import type { Assignment, AssignmentInput, StrategyName } from './assignment.ts';
import { rangeAssign } from './range.ts';
import { roundRobinAssign } from './round-robin.ts';
import { stickyAssign } from './sticky.ts';

const strategies: Record<StrategyName, (input: AssignmentInput) => Assignment> = {
  range: rangeAssign,
  roundRobin: roundRobinAssign,
  sticky: stickyAssign,
};

/**
 * Honoured pins (see `resolvePins`) are placed first; the strategy places the other partitions so
 * that totals per replica set, pins included, are as even as the pins allow (see `waterLevel`).
 * Pins that cannot be honoured are ignored here: report them with `validatePins`.
 */
export function assignPartitions(strategy: StrategyName, input: AssignmentInput): Assignment {
  return strategies[strategy](input);
}
