// Every Event and condition text of an offset reset, in one place.
import type { ReassignJournal } from '../../api/cube-assignment.ts';
import { resetAnnotation, type ResetPartition } from '../../api/offset-reset.ts';
import type { ReassignEvent } from '../reassign/messages.ts';

const fromTo = (p: ResetPartition): string => {
  const from = BigInt(p.from);
  const to = BigInt(p.to);
  const what =
    from === to ? 'unchanged' : from < to ? `${to - from} skipped` : `${from - to} re-read`;
  return `partition ${p.partition} ${p.from}→${p.to} (${what})`;
};

/** The partitions' restart offsets as a person reads them, from the journal. */
export const describeResetTargets = (targets: Record<string, string>): string =>
  Object.entries(targets)
    .map(([p, o]) => `partition ${p}→${o}`)
    .join(', ');

export const resetStarted = (journal: ReassignJournal): ReassignEvent => ({
  type: 'Normal',
  reason: 'OffsetResetStarted',
  message: `reset ${journal.reset!.id} (${journal.reset!.to}, journal ${journal.id}): pausing and draining ${describeResetTargets(journal.reset!.targets)}, then restarting there under a new epoch`,
});

export const resettingMessage = (journal: ReassignJournal): string =>
  `resetting offsets (reset ${journal.reset!.id}, to ${journal.reset!.to}): ${describeResetTargets(journal.reset!.targets)}`;

export const offsetsReset = (
  id: string,
  to: string,
  partitions: ResetPartition[],
): ReassignEvent => ({
  type: 'Normal',
  reason: 'OffsetsReset',
  message: `reset ${id} (${to}) done: ${partitions.map(fromTo).join(', ')}`,
});

export const resetRefused = (message: string): ReassignEvent => ({
  type: 'Warning',
  reason: 'OffsetResetRefused',
  message,
});

/** While the annotation still names a refused request: Degraded says so (the cube stays Ready). */
export const refusedStill = (message: string): string =>
  `${message}; change or remove the ${resetAnnotation} annotation`;
