// The reassign protocol (DESIGN §4), crash-safe: the journal in status.reassign names the phase,
// and each phase's receiver calls are idempotent and run before the journal moves on, so a new
// operator resumes any phase by running it again. Initial assignment is a reassign whose moves
// have no source. Every wait has a deadline; failures roll back (before anything is released)
// or forward (after), by rule.
import type { Move } from '../assign/assignment.ts';
import type { CubeAssignment, ReassignJournal, ReassignPhase } from '../api/cube-assignment.ts';
import type { AssignCubeRequest } from '../protocol/admin-api.ts';
import { ReceiverApiError, type ReceiverClient } from '../protocol/client.ts';
import { faultPoint } from '../observability/fault-injection.ts';
import type { ReceiverEndpoint } from './discovery.ts';

/** A phase cannot finish now; the reconciler reports it as Degraded and retries. */
export class PhaseBlocked extends Error {
  readonly reason: string;
  constructor(reason: string, message: string) {
    super(message);
    this.reason = reason;
  }
}

export interface ReassignContext {
  cube: string;
  object: CubeAssignment;
  receivers: Map<string, ReceiverEndpoint[]>;
  client: (endpoint: ReceiverEndpoint) => ReceiverClient;
  /** Offsets to start partitions that have no previous owner from (startingOffsets). */
  startingOffsets: (partitions: number[]) => Promise<Map<number, bigint>>;
  /** Writes status (merge patch, resourceVersion precondition); returns the updated object. */
  persist: (status: Record<string, unknown>) => Promise<CubeAssignment>;
  event: (type: 'Normal' | 'Warning', reason: string, message: string) => void;
  onPhase: (phase: ReassignPhase, journal: ReassignJournal) => void;
  phaseTimeoutMs: number;
  drainTimeoutMs: number;
  now: () => Date;
}

const nextPhase: Record<ReassignPhase, ReassignPhase> = {
  Planned: 'Pausing',
  Pausing: 'Draining',
  Draining: 'Starting',
  Starting: 'Sealing',
  Sealing: 'Done',
  Done: 'Done',
};

export function newJournal(moves: Move[], now: Date, id: string): ReassignJournal {
  const at = now.toISOString();
  return {
    id,
    phase: 'Planned',
    moves: moves.map((m) => ({
      partition: m.partition,
      to: m.to,
      ...(m.from === undefined ? {} : { from: m.from }),
    })),
    startedAt: at,
    phaseStartedAt: at,
  };
}

function bySource(journal: ReassignJournal): Map<string, number[]> {
  const out = new Map<string, number[]>();
  for (const m of journal.moves) {
    if (m.from === undefined) continue;
    out.set(m.from, [...(out.get(m.from) ?? []), m.partition]);
  }
  return out;
}

function byTarget(journal: ReassignJournal): Map<string, number[]> {
  const out = new Map<string, number[]>();
  for (const m of journal.moves) out.set(m.to, [...(out.get(m.to) ?? []), m.partition]);
  return out;
}

function endpointsOf(ctx: ReassignContext, replicaSet: string, role: string): ReceiverEndpoint[] {
  const list = ctx.receivers.get(replicaSet) ?? [];
  if (list.length === 0) {
    throw new PhaseBlocked(
      role === 'target' ? 'TargetReceiverUnavailable' : 'SourceReceiverUnavailable',
      `replica set ${replicaSet} (${role} of a move) has no ready receiver`,
    );
  }
  return list;
}

async function call<T>(
  phase: ReassignPhase,
  endpoint: ReceiverEndpoint,
  what: string,
  reason: string,
  fn: () => Promise<T>,
): Promise<T> {
  let answer: T;
  try {
    answer = await fn();
  } catch (error) {
    // fetch() says only "fetch failed"; the reason a person can act on (ECONNREFUSED, a DNS or
    // TLS error) is in its cause.
    const cause = (error as Error).cause as (Error & { code?: string }) | undefined;
    const detail =
      error instanceof ReceiverApiError || !(cause instanceof Error)
        ? (error as Error).message
        : `${(error as Error).message}: ${cause.message || cause.code || cause.name}`;
    throw new PhaseBlocked(
      reason,
      `${what} on receiver ${endpoint.name} (${endpoint.replicaSet}) failed: ${detail}`,
    );
  }
  // Crash tests kill the operator between two receiver calls of one phase.
  faultPoint(`reassign-${phase}-partial`);
  return answer;
}

/** The cube as the receivers need it: source and schema from the spec. */
export function assignRequest(
  object: CubeAssignment,
  replicaSet: string,
  partitions: { partition: number; position: string; epoch: number; watermark?: number | null }[],
): AssignCubeRequest {
  const { brokers, topic, startingOffsets } = object.spec.source;
  return {
    source: { brokers, topic, startingOffsets },
    schema: object.spec.schema,
    replicaSet,
    partitions: partitions.map((p) => ({ ...p, watermark: p.watermark ?? null })),
  };
}

/** Runs the journal from its current phase to Done; returns the final object. */
export async function runReassign(
  ctx: ReassignContext,
  start: ReassignJournal,
): Promise<CubeAssignment> {
  let journal = start;
  let object = ctx.object;
  const advance = async (
    extra: Partial<ReassignJournal> = {},
    statusExtra: Record<string, unknown> = {},
  ): Promise<void> => {
    const phase = nextPhase[journal.phase];
    journal = { ...journal, ...extra, phase, phaseStartedAt: ctx.now().toISOString() };
    // The loop reports the phase (and reaches its fault point) once, when it starts running it.
    object = await ctx.persist({ reassign: journal, ...statusExtra });
  };
  const overDeadline = (): boolean =>
    ctx.now().getTime() - Date.parse(journal.phaseStartedAt ?? journal.startedAt) >
    ctx.phaseTimeoutMs;

  for (;;) {
    ctx.onPhase(journal.phase, journal);
    switch (journal.phase) {
      case 'Planned':
        await advance();
        break;

      case 'Pausing': {
        // Pause the moving partitions on every replica of each source; stop = max position.
        const stop = new Map<number, bigint>();
        try {
          for (const [rs, partitions] of bySource(journal)) {
            for (const endpoint of endpointsOf(ctx, rs, 'source')) {
              const answer = await call(journal.phase, endpoint, 'pause', 'PauseFailed', () =>
                ctx.client(endpoint).pause(ctx.cube, partitions),
              );
              for (const p of answer.partitions) {
                const position = BigInt(p.position);
                if ((stop.get(p.partition) ?? -1n) < position) stop.set(p.partition, position);
              }
            }
          }
        } catch (error) {
          if (error instanceof PhaseBlocked && overDeadline()) return rollBack(ctx, journal, error);
          throw error;
        }
        const fresh = journal.moves.filter((m) => m.from === undefined).map((m) => m.partition);
        if (fresh.length > 0) {
          for (const [p, o] of await ctx.startingOffsets(fresh)) stop.set(p, o);
        }
        const stopOffsets = Object.fromEntries(
          [...stop].map(([p, o]) => [String(p), o.toString()]),
        );
        await advance({ stopOffsets });
        break;
      }

      case 'Draining': {
        const watermarks = new Map<number, number>();
        try {
          for (const [rs, partitions] of bySource(journal)) {
            const stops = Object.fromEntries(
              partitions.map((p) => [String(p), journal.stopOffsets?.[String(p)] ?? '0']),
            );
            for (const endpoint of endpointsOf(ctx, rs, 'source')) {
              const answer = await call(journal.phase, endpoint, 'drain', 'DrainFailed', () =>
                ctx
                  .client(endpoint)
                  .drain(ctx.cube, { stopOffsets: stops, timeoutMs: ctx.drainTimeoutMs }),
              );
              for (const p of answer.partitions) {
                if (
                  p.watermark !== null &&
                  (watermarks.get(p.partition) ?? -Infinity) < p.watermark
                ) {
                  watermarks.set(p.partition, p.watermark);
                }
              }
              if (!answer.done) {
                const behind = answer.partitions.filter((p) => p.state !== 'stopped');
                throw new PhaseBlocked(
                  'DrainIncomplete',
                  `receiver ${endpoint.name} has not reached the stop offsets of partitions ${behind.map((p) => `${p.partition} (at ${p.position}, stop ${p.stopOffset})`).join(', ')}`,
                );
              }
            }
          }
        } catch (error) {
          if (error instanceof PhaseBlocked && overDeadline()) return rollBack(ctx, journal, error);
          throw error;
        }
        await advance(
          watermarks.size > 0
            ? { watermarks: Object.fromEntries([...watermarks].map(([p, w]) => [String(p), w])) }
            : {},
        );
        break;
      }

      case 'Starting': {
        // From here on the move only rolls forward: sources release, targets take over.
        for (const [rs, partitions] of bySource(journal)) {
          for (const endpoint of ctx.receivers.get(rs) ?? []) {
            await call(journal.phase, endpoint, 'release', 'ReleaseFailed', () =>
              ctx.client(endpoint).release(ctx.cube, partitions),
            ).catch((error: unknown) => {
              // A released cube that is gone (404) is released.
              if (!(error instanceof PhaseBlocked && /: 404 /.test(error.message))) throw error;
            });
          }
        }
        const epochs = object.status?.epochs ?? {};
        for (const [rs, partitions] of byTarget(journal)) {
          const starts = partitions.map((p) => ({
            partition: p,
            position: journal.stopOffsets?.[String(p)] ?? '0',
            epoch: (epochs[String(p)] ?? 0) + 1,
            watermark: journal.watermarks?.[String(p)] ?? null,
          }));
          try {
            for (const endpoint of endpointsOf(ctx, rs, 'target')) {
              await call(journal.phase, endpoint, 'assign', 'StartFailed', () =>
                ctx.client(endpoint).assign(ctx.cube, assignRequest(object, rs, starts)),
              );
            }
          } catch (error) {
            // The sources have let go: say which partitions wait, not only which call failed.
            if (!(error instanceof PhaseBlocked)) throw error;
            const sources = [
              ...new Set(journal.moves.filter((m) => m.to === rs).flatMap((m) => m.from ?? [])),
            ];
            const many = partitions.length > 1;
            throw new PhaseBlocked(
              error.reason,
              `${error.message}; partition${many ? 's' : ''} ${partitions.join(', ')}${sources.length > 0 ? ` (released by ${sources.join(', ')})` : ''} wait${many ? '' : 's'} for ${rs}`,
            );
          }
        }
        await advance();
        break;
      }

      case 'Sealing': {
        // A source left without any partition of the cube seals and hands off, then drops it.
        const assignment = finalAssignment(object, journal);
        for (const rs of bySource(journal).keys()) {
          if ((assignment[rs] ?? []).length > 0) continue;
          for (const endpoint of ctx.receivers.get(rs) ?? []) {
            const status = await call(journal.phase, endpoint, 'seal', 'SealFailed', () =>
              ctx.client(endpoint).seal(ctx.cube, 30_000),
            ).catch((error: unknown) => {
              if (error instanceof PhaseBlocked && /: 404 /.test(error.message)) return undefined;
              throw error;
            });
            if (status === undefined) continue;
            if (status.segments.some((s) => s.state !== 'HANDED_OFF')) {
              throw new PhaseBlocked(
                'HandOffPending',
                `receiver ${endpoint.name} has segments of ${ctx.cube} not yet handed off`,
              );
            }
            await call(journal.phase, endpoint, 'unassign', 'UnassignFailed', () =>
              ctx.client(endpoint).unassign(ctx.cube),
            );
          }
        }
        const epochs = { ...(object.status?.epochs ?? {}) };
        for (const m of journal.moves)
          epochs[String(m.partition)] = (epochs[String(m.partition)] ?? 0) + 1;
        await advance(
          {},
          { assignment: mapReplacement(object.status?.assignment, assignment), epochs },
        );
        break;
      }

      case 'Done': {
        object = await ctx.persist({ reassign: null });
        ctx.event(
          'Normal',
          'ReassignCompleted',
          `reassign ${journal.id} moved ${journal.moves.length} partition(s): ${describeMoves(journal)}`,
        );
        return object;
      }
    }
  }
}

/**
 * A JSON merge patch merges maps key by key; to replace a map, the keys it no longer has must be
 * sent as null.
 */
export function mapReplacement<T>(
  previous: Record<string, T> | undefined,
  next: Record<string, T>,
): Record<string, T | null> {
  const out: Record<string, T | null> = { ...next };
  for (const key of Object.keys(previous ?? {})) if (!(key in next)) out[key] = null;
  return out;
}

export function describeMoves(journal: ReassignJournal): string {
  return journal.moves.map((m) => `${m.partition} ${m.from ?? '(new)'}→${m.to}`).join(', ');
}

/** status.assignment with the journal's moves applied. */
export function finalAssignment(
  object: CubeAssignment,
  journal: ReassignJournal,
): Record<string, number[]> {
  const owners = new Map<number, string>();
  for (const [rs, partitions] of Object.entries(object.status?.assignment ?? {})) {
    for (const p of partitions) owners.set(p, rs);
  }
  for (const m of journal.moves) owners.set(m.partition, m.to);
  const out: Record<string, number[]> = {};
  for (const rs of object.spec.replicaSets) out[rs] = [];
  for (const [p, rs] of owners) (out[rs] ??= []).push(p);
  for (const list of Object.values(out)) list.sort((a, b) => a - b);
  return out;
}

/** Before anything is released: resume the sources where they were and drop the journal. */
async function rollBack(
  ctx: ReassignContext,
  journal: ReassignJournal,
  cause: PhaseBlocked,
): Promise<CubeAssignment> {
  for (const [rs, partitions] of bySource(journal)) {
    for (const endpoint of ctx.receivers.get(rs) ?? []) {
      await ctx
        .client(endpoint)
        .resume(ctx.cube, partitions)
        .catch(() => undefined);
    }
  }
  await ctx.persist({ reassign: null });
  ctx.event(
    'Warning',
    'ReassignRolledBack',
    `reassign ${journal.id} rolled back in phase ${journal.phase} after ${ctx.phaseTimeoutMs / 1000}s: ${cause.message}`,
  );
  throw new PhaseBlocked(
    'ReassignRolledBack',
    `reassign ${journal.id} rolled back in ${journal.phase}: ${cause.message}`,
  );
}
