// What integration tests assert about receivers: totals from a query, positions, and the tiling
// of segment offset ranges over a partition's log.
import type { AssignCubeRequest, CubeStatus, QueryResponse } from '../../src/protocol/admin-api.ts';
import { ReceiverApiError, type ReceiverClient } from '../../src/protocol/client.ts';
import {
  type OffsetRange,
  rangesFromJson,
  tilingProblems,
} from '../../src/receiver/offset-ranges.ts';
import { type TestEvent, type Totals, testSchema, totalsOf } from './events.ts';
import { addTotals } from './hand-offs.ts';
import { type CubeModel, type ModelRow, mergeRows, modelCube } from './cube-model.ts';
import { readHandOffsWithPyarrow } from './pyarrow-reader.ts';
import type { ReceiverProcess } from './receiver-process.ts';
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

/** The cube's answers on `clients`, summed, give the totals of `events`. */
export async function expectQueriedTotals(
  clients: ReceiverClient[],
  cube: string,
  events: TestEvent[],
): Promise<void> {
  const answers: Totals[] = [];
  for (const client of clients) answers.push(totalsFromQuery(await client.query(cube, {})));
  expectTotals(answers.reduce(addTotals), totalsOf(events));
}

/** Drains the cube to `stopOffsets`: done, and every partition stopped exactly there. */
export async function expectDrainedTo(
  client: ReceiverClient,
  cube: string,
  stopOffsets: Record<number, string>,
): Promise<void> {
  const drained = await client.drain(cube, { stopOffsets, timeoutMs: 30_000 });
  expect(drained.done).toBe(true);
  expect(drained.partitions.map((p) => [p.partition, p.state, p.position])).toEqual(
    Object.entries(stopOffsets).map(([p, stop]) => [Number(p), 'stopped', stop]),
  );
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

/** The cube's status on `r`, or undefined when `r` does not hold it (404). */
export async function cubeOn(r: ReceiverProcess, cube: string): Promise<CubeStatus | undefined> {
  try {
    return await r.client.cubeStatus(cube);
  } catch (error) {
    if (error instanceof ReceiverApiError && error.status === 404) return undefined;
    throw error;
  }
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

/** Each partition's log, from offset 0 to its end in `ends`, tiled by the segments' ranges. */
export function expectLogsTiled(
  ends: Map<number, bigint>,
  ...segmentLists: { offsetRanges: Record<string, [string, string][]> }[][]
): void {
  for (const [p, end] of ends) expectTiling(rangesOf(p, ...segmentLists), 0n, end);
}

/**
 * Rows (dimensions then measures) equal to the expected ones: same groups, counts, minima and
 * maxima exactly, sums to 1e-6 (a float sum depends on the order its terms were added in).
 */
export function expectRowsEqual(
  actual: ModelRow[],
  expected: ModelRow[],
  schema: AssignCubeRequest['schema'],
  groupBy: string[] = schema.dimensions ?? [],
): void {
  const d = groupBy.length;
  expect(actual.map((r) => r.slice(0, d))).toEqual(expected.map((r) => r.slice(0, d)));
  const exact = (r: ModelRow): ModelRow =>
    r.map((v, i) => (i >= d && schema.measures[i - d]?.function === 'sum' ? 0 : v));
  expect(actual.map(exact)).toEqual(expected.map(exact));
  actual.forEach((row, r) =>
    schema.measures.forEach((m, i) => {
      if (m.function === 'sum')
        expect(row[d + i] as number).toBeCloseTo(expected[r]![d + i] as number, 6);
    }),
  );
}

/**
 * The receiver's rows over every dimension equal those the design's rules give for these events
 * (per partition, in offset order): the query answers open and sealed segments, not hand-offs.
 */
export async function expectRowsOfEvents(
  client: ReceiverClient,
  cube: string,
  events: Map<number, TestEvent[]>,
  schema: AssignCubeRequest['schema'] = testSchema,
): Promise<void> {
  const model = modelCube(schema, events);
  const answer = await client.query(cube, { groupBy: schema.dimensions ?? [] });
  expectRowsEqual(answer.rows, mergeRows(schema, [...model.windows.values()].flat()), schema);
}

/**
 * A receiver that read a topic of good and bad records to its end counted them as the model does:
 * rejections by reason in its status and its metrics, the rows of the accepted events only, and
 * every offset (the rejected ones too) accounted once.
 */
export async function expectCountedAsModeled(
  receiver: Pick<ReceiverProcess, 'client' | 'baseUrl'>,
  cube: string,
  status: CubeStatus,
  model: CubeModel,
  ends: Map<number, bigint>,
): Promise<void> {
  expect(status.rejected).toEqual(model.rejected);
  const metrics = await fetch(`${receiver.baseUrl}/metrics`).then((r) => r.text());
  for (const [reason, n] of Object.entries(model.rejected)) {
    expect([
      reason,
      metricValue(metrics, 'streamcube_receiver_events_rejected_total', { cube, reason }),
    ]).toEqual([reason, n]);
  }
  expect(metricValue(metrics, 'streamcube_receiver_events_ingested_total', { cube })).toBe(
    status.ingested,
  );
  const answer = await receiver.client.query(cube, { groupBy: testSchema.dimensions });
  expectRowsEqual(
    answer.rows,
    mergeRows(testSchema, [...model.windows.values()].flat()),
    testSchema,
  );
  for (const [p, e] of ends) expectTiling(rangesOf(p, status.segments), 0n, e);
}

/** The value of one sample of a Prometheus text exposition, by metric name and labels. */
export function metricValue(
  exposition: string,
  name: string,
  labels: Record<string, string>,
): number | undefined {
  for (const line of exposition.split('\n')) {
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const found: Record<string, string | undefined> = Object.fromEntries(
      [...(match[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)].map(
        (m): [string, string] => [m[1] ?? '', m[2] ?? ''],
      ),
    );
    if (Object.entries(labels).every(([k, v]) => found[k] === v)) return Number(match[3]);
  }
  return undefined;
}

/**
 * Every row a receiver holds for a cube, merged per dimension values: the query's answer over
 * the segments still held, plus the hand-offs of this receiver read back with pyarrow. Call it
 * when no window is about to seal, or a segment could be read both ways or neither.
 */
export async function rowsHeld(
  receiver: ReceiverProcess,
  cube: string,
  schema: AssignCubeRequest['schema'],
): Promise<ModelRow[]> {
  const dims = schema.dimensions ?? [];
  const held = await receiver.client.query(cube, { groupBy: dims });
  const handedOff = (await readHandOffsWithPyarrow(receiver.options.deepStorageDir, schema)).filter(
    (h) => h.manifest.receiver === receiver.options.id && h.manifest.cube === cube,
  );
  return mergeRows(schema, [...held.rows, ...handedOff.flatMap((h) => h.rows)]);
}
