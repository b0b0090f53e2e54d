// An offset reset asked for with the streamcube.io/reset-offsets annotation, in a reconcile at
// rest: a request whose id status.resets does not hold yet is checked against the brokers and
// either refused (recorded, nothing changed) or written as a reassign journal whose moves take
// each partition from its owner back to it, restarting at the reset's targets (journal.reset).
import { createHash, randomBytes } from 'node:crypto';
import type { CubeAssignmentStatusPatch, ReassignJournal } from '../../api/cube-assignment.ts';
import {
  describeTarget,
  parseResetRequest,
  resetAnnotation,
  withResetRecord,
} from '../../api/offset-reset.ts';
import { classifySourceError } from '../../kafka/source-security.ts';
import { refusedStill, resetStarted, resettingMessage } from '../offset-reset/messages.ts';
import { resolveResetTargets } from '../offset-reset/targets.ts';
import type { Problem } from '../planner.ts';
import { newJournal, requeueDelayMs } from '../reassign/index.ts';
import type { ReconcileResult } from '../runtime/controller.ts';
import type { TopicMetadata } from '../topic-metadata.ts';
import type { CubeEdges, CubePass } from './pass.ts';
import { conditionsWith } from './status-writer.ts';

export type ResetOutcome =
  /** No reset to start; `problem`: a refused request still named, or the brokers not answering. */
  | { kind: 'none'; problem?: Problem }
  /** The reset's journal was written: its phases run on the next reconciles. */
  | { kind: 'journaled'; result: ReconcileResult };

/** The id a request is recorded under: its own, or one made of the text that is no request. */
const recordedId = (text: string, parsed: ReturnType<typeof parseResetRequest>): string =>
  parsed.ok
    ? parsed.request.id
    : `invalid-${createHash('sha256').update(text).digest('hex').slice(0, 12)}`;

/** partition → owner, from status.assignment. */
function ownersOf(pass: CubePass): Map<number, string> {
  const out = new Map<number, string>();
  for (const [rs, partitions] of Object.entries(pass.object.status?.assignment ?? {}))
    for (const p of partitions) out.set(p, rs);
  return out;
}

export async function requestedReset(
  edges: CubeEdges,
  pass: CubePass,
  topics: Pick<TopicMetadata, 'resetOffsets'>,
  /** Written with the journal: the spec roll-out's digest (spec-rollout.ts). */
  digestPatch: CubeAssignmentStatusPatch,
): Promise<ResetOutcome> {
  const text = pass.object.metadata?.annotations?.[resetAnnotation];
  if (text === undefined) return { kind: 'none' };
  const parsed = parseResetRequest(text);
  const id = recordedId(text, parsed);
  const done = pass.object.status?.resets?.find((r) => r.id === id);
  if (done) {
    if (done.result === 'Applied') return { kind: 'none' };
    return {
      kind: 'none',
      problem: {
        reason: 'OffsetResetRefused',
        message: refusedStill(done.message ?? `reset ${id} refused`),
        keepsReady: true,
      },
    };
  }
  if (!parsed.ok) return refuse(edges, pass, id, 'invalid', parsed.message);
  const request = parsed.request;
  const { source } = pass.object.spec;
  let read: Awaited<ReturnType<TopicMetadata['resetOffsets']>>;
  try {
    read = await topics.resetOffsets(
      source,
      pass.key.namespace,
      typeof request.to === 'object' && 'timestamp' in request.to
        ? request.to.timestamp
        : undefined,
    );
  } catch (error) {
    pass.signal.throwIfAborted();
    return {
      kind: 'none',
      problem: {
        reason: classifySourceError(error) ?? 'SourceUnavailable',
        message: `cannot check reset ${request.id} against topic ${source.topic}: ${(error as Error).message}`,
      },
    };
  }
  const owners = ownersOf(pass);
  const resolved = resolveResetTargets({
    request,
    topic: source.topic,
    owners,
    offsets: read.offsets,
    ...(read.atTimestamp ? { atTimestamp: read.atTimestamp } : {}),
  });
  if (!resolved.ok) return refuse(edges, pass, id, describeTarget(request.to), resolved.message);
  const journal: ReassignJournal = {
    ...newJournal(
      Object.keys(resolved.targets).map((p) => {
        const owner = owners.get(Number(p))!;
        return { partition: Number(p), from: owner, to: owner };
      }),
      new Date(),
      `x-${pass.object.metadata?.generation ?? 0}-${randomBytes(3).toString('hex')}`,
    ),
    reset: { id: request.id, to: resolved.to, targets: resolved.targets },
  };
  pass.signal.throwIfAborted();
  pass.object = await edges.status.status(
    pass.object,
    {
      ...digestPatch,
      reassign: journal,
      conditions: conditionsWith(pass.object, [
        {
          type: 'Progressing',
          status: 'True',
          reason: 'Resetting',
          message: resettingMessage(journal),
        },
      ]),
    },
    pass.signal,
  );
  const event = resetStarted(journal);
  edges.events.record(pass.object, event.type, event.reason, event.message);
  pass.log.info('offset reset journaled', { reset: request.id, reassignId: journal.id });
  return { kind: 'journaled', result: { requeueAfterMs: requeueDelayMs.advanced } };
}

/**
 * Records the refusal in status.resets, so that it is decided once; the at-rest pass reports it
 * as Degraded (and its Warning Event) while the annotation names it.
 */
async function refuse(
  edges: CubeEdges,
  pass: CubePass,
  id: string,
  to: string,
  message: string,
): Promise<ResetOutcome> {
  pass.log.warn('offset reset refused', { reset: id, reason: message });
  pass.signal.throwIfAborted();
  pass.object = await edges.status.status(
    pass.object,
    {
      resets: withResetRecord(pass.object.status?.resets, {
        id,
        to,
        result: 'Refused',
        message,
        at: new Date().toISOString(),
      }),
    },
    pass.signal,
  );
  return {
    kind: 'none',
    problem: { reason: 'OffsetResetRefused', message: refusedStill(message), keepsReady: true },
  };
}
