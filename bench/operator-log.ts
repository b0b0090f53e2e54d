// Where a reassign's time goes, from the operator's JSON log: the first `reassign phase` line of
// each phase (src/operator/cube/journal-runner.ts) and the `reassign done` line.
import { readFileSync } from 'node:fs';
import { reassignPhases } from '../src/api/cube-assignment.ts';

export const phaseOrder = reassignPhases;

interface LogEntry {
  message?: string;
  cube?: string;
  reassignId?: string;
  phase?: string;
  timestamp?: string;
}

function entries(logFile: string): LogEntry[] {
  return readFileSync(logFile, 'utf8')
    .split('\n')
    .filter((line) => line.startsWith('{') && line.includes('"reassignId"'))
    .map((line) => JSON.parse(line) as LogEntry);
}

/** The ids of the cube's reassigns, in the order they started. */
export function reassignIds(logFile: string, cube: string): string[] {
  const ids: string[] = [];
  for (const e of entries(logFile))
    if (e.cube === cube && e.reassignId && !ids.includes(e.reassignId)) ids.push(e.reassignId);
  return ids;
}

/** First log time of each phase of one reassign, plus `end` ('reassign done'). */
export function phaseTimes(logFile: string, reassignId: string): Map<string, number> {
  const times = new Map<string, number>();
  for (const entry of entries(logFile)) {
    if (entry.reassignId !== reassignId || !entry.timestamp) continue;
    const key = entry.message === 'reassign done' ? 'end' : entry.phase;
    if (key && !times.has(key)) times.set(key, Date.parse(entry.timestamp));
  }
  return times;
}

/**
 * How long each phase of one reassign took: from its first line to that of the next phase it went
 * through (a move has no Fencing; one is first written at Pausing and ends with Sealing's write),
 * or to its end.
 */
export function phaseSpans(logFile: string, reassignId: string): Map<string, number> {
  const times = phaseTimes(logFile, reassignId);
  const spans = new Map<string, number>();
  for (let k = 0; k < phaseOrder.length; k++) {
    const from = times.get(phaseOrder[k]!);
    if (from === undefined) continue;
    let to: number | undefined;
    for (let n = k + 1; n < phaseOrder.length && to === undefined; n++)
      to = times.get(phaseOrder[n]!);
    to ??= times.get('end');
    if (to !== undefined) spans.set(phaseOrder[k]!, to - from);
  }
  return spans;
}

/** When the first phase of one reassign was logged (its journal written): Planned, or Pausing. */
export function firstPhaseAt(times: ReadonlyMap<string, number>): number | undefined {
  for (const phase of phaseOrder) if (times.has(phase)) return times.get(phase);
  return undefined;
}
