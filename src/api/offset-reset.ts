// A request to reset a cube's offsets (docs/offset-reset.md): the annotation that carries it, its
// JSON shape, and the records status keeps of each reset. A reset is an action, not desired
// state, so it travels in an annotation with an id, and status says which ids were acted on.
import { z } from 'zod';
import { offset, partitionKey, partitionNumber } from './kafka-numbers.ts';

/** The annotation whose value is a reset request as JSON (ResetRequest). */
export const resetAnnotation = 'streamcube.io/reset-offsets';

/** How many resets status.resets keeps, newest last. */
export const maxResetRecords = 10;

const resetId = z
  .string()
  .min(1)
  .max(63)
  .regex(/^[a-zA-Z0-9]([-a-zA-Z0-9._]*[a-zA-Z0-9])?$/, 'must be letters, digits, -, . or _');

export const resetTarget = z.union([
  z.enum(['earliest', 'latest']),
  z.strictObject({
    timestamp: z
      .int()
      .min(0)
      .describe('Epoch milliseconds: each partition restarts at its first record at or after it.'),
  }),
  z.strictObject({
    offsets: z
      .record(partitionKey, offset)
      .refine((m) => Object.keys(m).length > 0, 'must name at least one partition'),
  }),
]);
export type ResetTarget = z.infer<typeof resetTarget>;

export const resetRequest = z.strictObject({
  id: resetId,
  to: resetTarget,
  /** Absent: every partition the cube owns (with `offsets`, the partitions it names). */
  partitions: z.array(partitionNumber).min(1).max(1024).optional(),
});
export type ResetRequest = z.infer<typeof resetRequest>;

/** The annotation's text as a request, or why it is not one (naming the field). */
export function parseResetRequest(
  text: string,
): { ok: true; request: ResetRequest } | { ok: false; message: string } {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    return { ok: false, message: `${resetAnnotation} is not JSON: ${(error as Error).message}` };
  }
  const parsed = resetRequest.safeParse(json);
  if (parsed.success) {
    const { request } = { request: parsed.data };
    if (
      request.partitions !== undefined &&
      new Set(request.partitions).size !== request.partitions.length
    )
      return { ok: false, message: `${resetAnnotation}: partitions must be unique` };
    if (typeof request.to === 'object' && 'offsets' in request.to && request.partitions)
      return {
        ok: false,
        message: `${resetAnnotation}: to.offsets names its partitions; leave partitions out`,
      };
    return { ok: true, request };
  }
  const issue = parsed.error.issues[0];
  const id =
    typeof json === 'object' && json !== null && typeof (json as { id?: unknown }).id === 'string'
      ? ` (id ${(json as { id: string }).id})`
      : '';
  return {
    ok: false,
    message: `${resetAnnotation}${id}: ${issue?.path.join('.') || '(the request)'}: ${issue?.message ?? 'invalid'}`,
  };
}

/** The request's target as a person reads it: earliest, latest, a time, or offsets. */
export function describeTarget(to: ResetTarget): string {
  if (typeof to === 'string') return to;
  if ('timestamp' in to) return `timestamp ${new Date(to.timestamp).toISOString()}`;
  return 'given offsets';
}

/** One partition of a reset: where its reader was (drained to) and where it restarted. */
export const resetPartition = z.object({
  partition: partitionNumber.describe('The partition.'),
  from: offset.describe(
    'Where its owner had read to when paused and drained (its position): everything before it was kept and handed off.',
  ),
  to: offset.describe(
    'Where it restarted. Above from: [from, to) was skipped on purpose. Below: [to, from) is read again (replayed) and counted again.',
  ),
  epoch: z
    .int()
    .min(0)
    .describe('The assignment epoch it restarted under (status.epochs after the reset).'),
});
export type ResetPartition = z.infer<typeof resetPartition>;

export const resetRecord = z.object({
  id: resetId.describe(`The request's id (the ${resetAnnotation} annotation's id).`),
  to: z.string().max(64).describe('What was asked: earliest, latest, a timestamp, given offsets.'),
  result: z
    .enum(['Applied', 'Refused'])
    .describe('Applied: the partitions restarted at the new offsets. Refused: nothing changed.'),
  message: z.string().max(1024).optional().describe('Why it was refused.'),
  at: z.iso.datetime().describe('When it was applied or refused.'),
  partitions: z
    .array(resetPartition)
    .max(1024)
    .optional()
    .describe('Per partition reset, from → to (Applied only).'),
});
export type ResetRecord = z.infer<typeof resetRecord>;

/** The reset a journal carries out (status.reassign.reset). */
export const journalReset = z.object({
  id: resetId.describe(`The request's id (the ${resetAnnotation} annotation).`),
  to: z.string().max(64).describe('What was asked, as resets[].to says it.'),
  targets: z
    .record(partitionKey, offset)
    .describe(
      'Partition → where its owner restarts, resolved against the brokers when the request was accepted; for latest, written again once the partition is drained: its high watermark then, so that what was produced while it was paused is skipped too.',
    ),
});
export type JournalReset = z.infer<typeof journalReset>;

/** status.resets with `record` added, the oldest dropped past maxResetRecords. */
export function withResetRecord(
  previous: readonly ResetRecord[] | undefined,
  record: ResetRecord,
): ResetRecord[] {
  return [...(previous ?? []).filter((r) => r.id !== record.id), record].slice(-maxResetRecords);
}
