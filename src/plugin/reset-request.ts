// `kubectl streamcube reset-offsets`, the pure part: the flags as a reset request (the
// streamcube.io/reset-offsets annotation, docs/offset-reset.md), and what can be checked before
// it is written from what the API server holds. The brokers' own range is the operator's check.
import type { CubeAssignment } from '../api/cube-assignment.ts';
import { parseResetRequest, type ResetRequest } from '../api/offset-reset.ts';

export interface ResetFlags {
  'to-earliest'?: boolean;
  'to-latest'?: boolean;
  'to-datetime'?: string;
  'to-offset'?: string;
  partitions?: string;
  id?: string;
}

/** The request the flags ask for, or why they do not make one (a message naming the flag). */
export function resetRequestOf(
  flags: ResetFlags,
  now: Date,
): { ok: true; request: ResetRequest } | { ok: false; message: string } {
  const targets = (['to-earliest', 'to-latest', 'to-datetime', 'to-offset'] as const).filter(
    (f) => flags[f] !== undefined && flags[f] !== false,
  );
  if (targets.length !== 1)
    return {
      ok: false,
      message:
        targets.length === 0
          ? 'reset-offsets needs one of --to-earliest, --to-latest, --to-datetime ISO, --to-offset P=O[,P=O]'
          : `reset-offsets takes one target, got ${targets.map((t) => `--${t}`).join(' and ')}`,
    };
  let to: ResetRequest['to'];
  if (flags['to-earliest']) to = 'earliest';
  else if (flags['to-latest']) to = 'latest';
  else if (flags['to-datetime'] !== undefined) {
    const text = flags['to-datetime'];
    const ms = Date.parse(text);
    if (!/^\d{4}-\d{2}-\d{2}/.test(text) || Number.isNaN(ms))
      return {
        ok: false,
        message: `--to-datetime must be an ISO-8601 date-time such as 2026-03-01T10:00:00Z, got '${text}'`,
      };
    to = { timestamp: ms };
  } else {
    const offsets: Record<string, string> = {};
    for (const pair of flags['to-offset']!.split(',')) {
      const m = /^\s*(\d+)=(\d+)\s*$/.exec(pair);
      if (!m)
        return {
          ok: false,
          message: `--to-offset takes PARTITION=OFFSET pairs separated by commas (0=120,3=88), got '${pair}'`,
        };
      offsets[String(Number(m[1]))] = String(BigInt(m[2]!));
    }
    to = { offsets };
  }
  let partitions: number[] | undefined;
  if (flags.partitions !== undefined) {
    if (flags['to-offset'] !== undefined)
      return { ok: false, message: '--to-offset names its partitions; leave --partitions out' };
    partitions = [];
    for (const p of flags.partitions.split(',')) {
      if (!/^\s*\d+\s*$/.test(p))
        return {
          ok: false,
          message: `--partitions takes partition numbers separated by commas (0,1), got '${p}'`,
        };
      partitions.push(Number(p));
    }
  }
  const id = flags.id ?? `reset-${now.toISOString().replace(/[-:]/g, '').replace(/\..*$/, '')}`;
  const parsed = parseResetRequest(
    JSON.stringify({ id, to, ...(partitions ? { partitions } : {}) }),
  );
  return parsed.ok ? parsed : { ok: false, message: parsed.message.replace(/^[^:]*: /, '') };
}

/**
 * What is wrong with `request` for `cube` as far as the API server tells: a partition the cube
 * has not placed, an id used before, a cube suspended. undefined: nothing found. The offsets'
 * range is the operator's check, against the brokers (status.partitions' high watermarks may be
 * seconds old); the command waits for its verdict.
 */
export function precheckReset(cube: CubeAssignment, request: ResetRequest): string | undefined {
  const name = `${cube.metadata.namespace ?? 'default'}/${cube.metadata.name ?? ''}`;
  const done = cube.status?.resets?.find((r) => r.id === request.id);
  if (done)
    return `cube ${name} already has a reset with id ${request.id} (${done.result}); a new reset needs a new --id`;
  if (cube.spec.suspend)
    return `cube ${name} is suspended: a reset waits until it is resumed (kubectl streamcube resume)`;
  const placed = new Set(Object.values(cube.status?.assignment ?? {}).flat());
  const to = request.to;
  const named =
    request.partitions ??
    (typeof to === 'object' && 'offsets' in to ? Object.keys(to.offsets).map(Number) : []);
  for (const p of named)
    if (!placed.has(p))
      return `partition ${p} is not a partition of cube ${name} (placed: ${[...placed].sort((a, b) => a - b).join(', ') || 'none'})`;
  return undefined;
}
