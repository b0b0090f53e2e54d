// What integration tests assert about receivers: totals from a query, positions, and the tiling
// of segment offset ranges over a partition's log.
import type { CubeStatus, QueryResponse } from '../../src/protocol/admin-api.ts';
import type { ReceiverClient } from '../../src/protocol/client.ts';
import {
  type OffsetRange,
  rangesFromJson,
  tilingProblems,
} from '../../src/receiver/offset-ranges.ts';
import type { Totals } from './events.ts';
import { waitFor } from './wait.ts';

export function totalsFromQuery(answer: QueryResponse): Totals {
  const row = answer.rows[0] ?? [0, 0, Infinity, -Infinity];
  const [events, revenue, cheapest, dearest] = row as number[];
  return { events: events!, revenue: revenue!, cheapest: cheapest!, dearest: dearest! };
}

export function expectTotals(actual: Totals, expected: Totals): void {
  expect(actual.events).toBe(expected.events);
  expect(actual.revenue).toBeCloseTo(expected.revenue, 6);
  expect(actual.cheapest).toBeCloseTo(expected.cheapest, 6);
  expect(actual.dearest).toBeCloseTo(expected.dearest, 6);
}

export async function waitForPositions(
  client: ReceiverClient,
  cube: string,
  expected: Record<number, bigint>,
  timeoutMs = 60_000,
): Promise<CubeStatus> {
  return waitFor(
    `positions ${JSON.stringify(Object.fromEntries(Object.entries(expected).map(([p, o]) => [p, o.toString()])))}`,
    async () => {
      const status = await client.cubeStatus(cube);
      const ok = Object.entries(expected).every(
        ([p, o]) =>
          status.partitions.find((s) => s.partition === Number(p))?.position === o.toString(),
      );
      return ok ? status : undefined;
    },
    timeoutMs,
  );
}

export function positionsOf(status: CubeStatus): Record<number, string> {
  return Object.fromEntries(status.partitions.map((p) => [p.partition, p.position]));
}

/** All offset ranges of one partition over the given segment lists. */
export function rangesOf(
  partition: number,
  ...segmentLists: { offsetRanges: Record<string, [string, string][]> }[][]
): OffsetRange[] {
  return segmentLists
    .flat()
    .flatMap((s) => rangesFromJson(s.offsetRanges[String(partition)] ?? []));
}

export function expectTiling(ranges: OffsetRange[], start: bigint, end: bigint): void {
  const problems = tilingProblems(ranges, start, end).map((p) => `${p.kind} [${p.from}, ${p.to})`);
  expect(problems).toEqual([]);
}
