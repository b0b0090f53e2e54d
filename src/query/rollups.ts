// Rollups of committed blocks: the rows of every counted piece of a block (an hour of 1-minute
// windows), grouped as a query asks (the dimensions it fetches, its `in` filters, its measures),
// in one list; a piece outside a whole block is kept grouped the same way on its own. Committed
// hand-offs never change, and a block's id names the pieces it holds, so what is kept stays right
// for as long as its key is asked. Pure; the cache keeps them.
import type { CubeSchema } from '../api/cube.ts';
import { type PieceRow, combineValues, fetchDimensions } from './answer.ts';
import type { CommittedBlock, CommittedRef } from './committed-index.ts';
import type { ResolvedQuery } from './request.ts';

/**
 * The counted pieces of a query's range, cut into runs: a whole block (`block` set) when every
 * counted piece of it is in the range and it sits inside one time bucket of the granularity, else
 * one piece at a time.
 */
export function rollupRuns(
  pieces: CommittedRef[],
  blockOf: (piece: CommittedRef) => CommittedBlock,
  granularityMs: number | undefined,
): { block?: CommittedBlock; pieces: CommittedRef[] }[] {
  const runs: { block?: CommittedBlock; pieces: CommittedRef[] }[] = [];
  const bucket = (t: number): number =>
    granularityMs === undefined ? 0 : Math.floor(t / granularityMs);
  for (let i = 0; i < pieces.length;) {
    const block = blockOf(pieces[i]!);
    const n = block.pieces.length;
    const whole =
      n > 1 &&
      pieces[i] === block.pieces[0] &&
      pieces[i + n - 1] === block.pieces[n - 1] &&
      bucket(block.pieces[0]!.windowStart) === bucket(block.pieces[n - 1]!.windowStart);
    if (whole) {
      runs.push({ block, pieces: pieces.slice(i, i + n) });
      i += n;
    } else {
      runs.push({ pieces: [pieces[i]!] });
      i += 1;
    }
  }
  return runs;
}

/**
 * What grouped rows depend on besides the block or piece they are of: the query's shape (the
 * dimensions it fetches, its `in` filters, its measures), not its time range.
 */
export function rollupShape(q: ResolvedQuery): string {
  const keep = [...q.keep]
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([d, values]) => [d, [...values].sort()]);
  return JSON.stringify([fetchDimensions(q), keep, q.measures]);
}

/** The rows of several pieces (each grouped by the fetched dimensions) grouped into one list. */
export function rollUp(
  lists: PieceRow[][],
  schema: Pick<CubeSchema, 'measures'>,
  q: Pick<ResolvedQuery, 'measures'>,
): PieceRow[] {
  const functions = q.measures.map((m) => schema.measures[m]!.function);
  const groups = new Map<string, PieceRow>();
  for (const rows of lists)
    for (const row of rows) {
      const id = JSON.stringify(row.dims);
      const g = groups.get(id);
      if (!g) groups.set(id, { dims: row.dims, values: [...row.values] });
      else
        functions.forEach((fn, j) => {
          g.values[j] = combineValues(fn, g.values[j]!, row.values[j]!);
        });
    }
  return [...groups.values()];
}
