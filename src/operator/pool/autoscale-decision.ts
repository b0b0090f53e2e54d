// The autoscaler's decision, pure: from what the operator saw of a pool's lag at each look (the
// samples), the current spec.sets, when spec.sets last changed and the policy, whether to scale
// out, scale in, clamp spec.sets into [minSets, maxSets] or hold, with the reason and the figures
// that decided it. autoscaler.ts gathers the samples and acts on the decision.
import type { AutoscaleAction } from '../../api/receiver-pool.ts';

export interface AutoscalePolicy {
  minSets: number;
  maxSets: number;
  targetLagPerSet: number;
  /** Scale in only while lag / (sets - 1) stays below this percent of the target. */
  scaleInBelowPercent: number;
  scaleOutAfterMs: number;
  scaleInAfterMs: number;
  cooldownMs: number;
}

/** One look at the pool's lag. */
export interface LagSample {
  /** Milliseconds since the epoch. */
  at: number;
  /** spec.sets when it was taken. */
  sets: number;
  /** Events behind summed over the partitions whose figures are known. */
  lag: number;
  /** Why some figures were not known (one entry per cube); empty when all were. */
  unknown: string[];
  /** The most partitions any counted cube has: more sets than that would have nothing to read. */
  partitions: number;
}

export interface AutoscaleDecision {
  action: AutoscaleAction;
  /** spec.sets after the decision (the current one for Hold). */
  sets: number;
  /** CamelCase: AboveTarget, BelowThreshold, Cooldown, WithinTarget, ... */
  reason: string;
  message: string;
  /** The latest sample's lag per set at the current size (rounded up), 0 without a sample. */
  lagPerSet: number;
  /** Since when every sample at this size was above the target, if the latest one is. */
  aboveSince?: number;
  /** Since when every sample at this size was comfortably below it, if the latest one is. */
  belowSince?: number;
}

export const perSet = (lag: number, sets: number): number => Math.ceil(lag / Math.max(sets, 1));

/** Whether a sample is above the target: its known lag alone is (unknown figures only add lag). */
export function aboveTarget(policy: AutoscalePolicy, s: LagSample): boolean {
  return s.lag > policy.targetLagPerSet * Math.max(s.sets, 1);
}

/** The lag at or below which `sets` sets are comfortably below the target. */
export function comfortLag(policy: AutoscalePolicy, sets: number): number {
  return (policy.targetLagPerSet * policy.scaleInBelowPercent * sets) / 100;
}

/**
 * Whether a sample is comfortably below the target: every figure known, and the lag over one
 * set fewer still below scaleInBelowPercent of the target (a pool with one set: its own lag).
 */
export function belowThreshold(policy: AutoscalePolicy, s: LagSample): boolean {
  return s.unknown.length === 0 && s.lag < comfortLag(policy, Math.max(s.sets - 1, 1));
}

/** When the unbroken run of samples at the end that all satisfy `test` began, if there is one. */
function runSince(
  samples: readonly LagSample[],
  test: (s: LagSample) => boolean,
): number | undefined {
  let since: number | undefined;
  for (let i = samples.length - 1; i >= 0 && test(samples[i]!); i--) since = samples[i]!.at;
  return since;
}

export function formatMs(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  return s % 60 === 0 ? `${m}m` : `${m}m${s % 60}s`;
}

/**
 * The decision at `now`. `samples`: oldest first, those taken since the last change of spec.sets
 * at the current size count. `lastChangeAt`: when spec.sets last changed (cooldown).
 */
export function decideAutoscale(o: {
  policy: AutoscalePolicy;
  sets: number;
  now: number;
  samples: readonly LagSample[];
  lastChangeAt?: number;
  /** A scale-in in progress: sets Draining still. No further scale-in meanwhile. */
  draining?: boolean;
}): AutoscaleDecision {
  const { policy, sets, now } = o;
  const { minSets, maxSets, targetLagPerSet: target } = policy;
  const samples = o.samples.filter(
    (s) =>
      s.sets === sets && s.at <= now && (o.lastChangeAt === undefined || s.at >= o.lastChangeAt),
  );
  const latest = samples.at(-1);
  const lagPerSet = latest ? perSet(latest.lag, sets) : 0;
  const aboveSince = runSince(samples, (s) => aboveTarget(policy, s));
  const belowSince = runSince(samples, (s) => belowThreshold(policy, s));
  const figures = {
    lagPerSet,
    ...(aboveSince === undefined ? {} : { aboveSince }),
    ...(belowSince === undefined ? {} : { belowSince }),
  };
  const hold = (reason: string, message: string): AutoscaleDecision => ({
    action: 'Hold',
    sets,
    reason,
    message,
    ...figures,
  });

  // Out of range (a user's kubectl scale, or a range just narrowed): clamped at once.
  if (sets < minSets || sets > maxSets) {
    const to = Math.min(Math.max(sets, minSets), maxSets);
    return {
      action: 'Clamp',
      sets: to,
      reason: 'SetsClamped',
      message: `spec.sets ${sets} is ${sets < minSets ? `below spec.autoscale.minSets ${minSets}` : `above spec.autoscale.maxSets ${maxSets}`}: set to ${to}`,
      ...figures,
    };
  }
  if (!latest) return hold('NoFigures', `no look at the lag at ${sets} sets yet`);
  const behind = `${latest.lag} events behind over ${sets} set${sets === 1 ? '' : 's'} (${lagPerSet} per set)`;
  const unknownNote = latest.unknown.length > 0 ? `; not known: ${latest.unknown.join(', ')}` : '';
  if (o.lastChangeAt !== undefined && now - o.lastChangeAt < policy.cooldownMs)
    return hold(
      'Cooldown',
      `${behind}; spec.sets changed ${formatMs(now - o.lastChangeAt)} ago, cooldown ${formatMs(policy.cooldownMs)}${unknownNote}`,
    );

  if (aboveSince !== undefined) {
    const forMs = now - aboveSince;
    const above = `${behind}, above the target ${target} per set for ${formatMs(forMs)}`;
    // More sets than partitions of the largest cube would have nothing to read.
    const ceiling = Math.min(maxSets, Math.max(sets, latest.partitions));
    if (sets >= ceiling)
      return hold(
        sets >= maxSets ? 'AtMaxSets' : 'EveryPartitionHasASet',
        `${above}; ${sets >= maxSets ? `already at spec.autoscale.maxSets ${maxSets}` : `no cube has more than ${latest.partitions} partitions`}${unknownNote}`,
      );
    if (forMs < policy.scaleOutAfterMs)
      return hold(
        'AboveTarget',
        `${above}; scales out once above for ${formatMs(policy.scaleOutAfterMs)} (scaleOutAfter)${unknownNote}`,
      );
    // As the HPA does: the sets the lag asks for at the target, at least one more.
    const to = Math.min(ceiling, Math.max(sets + 1, Math.ceil(latest.lag / target)));
    return {
      action: 'ScaleOut',
      sets: to,
      reason: 'AboveTarget',
      message: `scaled out from ${sets} to ${to} sets: ${above} (scaleOutAfter ${formatMs(policy.scaleOutAfterMs)})${unknownNote}`,
      ...figures,
    };
  }

  if (belowSince !== undefined && sets > minSets) {
    const forMs = now - belowSince;
    const threshold = Math.floor((target * policy.scaleInBelowPercent) / 100);
    const fewer = perSet(latest.lag, sets - 1);
    const below = `${behind}, ${fewer} per set with one set fewer, below ${policy.scaleInBelowPercent}% of the target ${target} (${threshold}) for ${formatMs(forMs)}`;
    if (o.draining) return hold('Draining', `${below}; a scale-in is still draining`);
    if (forMs < policy.scaleInAfterMs)
      return hold(
        'BelowThreshold',
        `${below}; scales in once below for ${formatMs(policy.scaleInAfterMs)} (scaleInAfter)`,
      );
    // The fewest sets still comfortably below the target, never below minSets.
    let to = sets - 1;
    while (to > minSets && latest.lag < comfortLag(policy, to - 1)) to--;
    return {
      action: 'ScaleIn',
      sets: to,
      reason: 'BelowThreshold',
      message: `scaled in from ${sets} to ${to} sets: ${below} (scaleInAfter ${formatMs(policy.scaleInAfterMs)})`,
      ...figures,
    };
  }
  if (latest.unknown.length > 0 && sets > minSets && !aboveTarget(policy, latest))
    return hold('LagUnknown', `${behind}; no scale-in while figures are unknown${unknownNote}`);
  return hold(
    'WithinTarget',
    `${behind}: target ${target} per set${sets > minSets ? `, scale-in below ${policy.scaleInBelowPercent}% of it with one set fewer` : `, at spec.autoscale.minSets ${minSets}`}`,
  );
}
