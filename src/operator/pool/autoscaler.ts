// The autoscaler of the pools with spec.autoscale, run by the pool reconciler at each pass (every
// --resync): it reads the lag of the cubes on the pool (pool-lag.ts), keeps the samples of the
// current leadership term, decides (autoscale-decision.ts) and acts: spec.sets through the scale
// subresource under the operator's field manager, guarded by the pool's resourceVersion so that
// a concurrent kubectl scale is never overwritten, an Event with the figures, the metrics, and
// status.autoscale (written only when something in it is worth a write).
import { ApiException, type CustomObjectsApi } from '@kubernetes/client-node';
import type { CubeAssignment } from '../../api/cube-assignment.ts';
import { parseDuration } from '../../api/duration.ts';
import {
  autoscaleDefaults,
  group,
  plural,
  version,
  type PoolAutoscaleStatus,
  type ReceiverPool,
} from '../../api/receiver-pool.ts';
import { mergePatch } from '../../kubernetes/cube-api.ts';
import type { Logger } from '../../observability/logger.ts';
import type { EventRecorder } from '../events.ts';
import { lagBucket } from '../status-changes.ts';
import {
  decideAutoscale,
  type AutoscaleDecision,
  type AutoscalePolicy,
  type LagSample,
} from './autoscale-decision.ts';
import type { PoolMetrics } from './metrics.ts';
import { cubeLag, cubeUsesPool, LastPositions, sumLag, type HighWatermarks } from './pool-lag.ts';
import { apiErrorMessage, fieldManager } from './workloads.ts';

export interface AutoscalerDeps {
  /** The cubes that may use the receivers of `namespace`. */
  cubesUsing(namespace: string): CubeAssignment[];
  /** The brokers' high watermark of each partition of the cube's topic. */
  highWatermarks(cube: CubeAssignment): Promise<Map<number, bigint>>;
  scaleApi: Pick<CustomObjectsApi, 'patchNamespacedCustomObjectScale'>;
  events: EventRecorder;
  metrics?: PoolMetrics;
  logger: Logger;
  /**
   * The --resync: passes more than three of it apart (this process was not leading meanwhile, or
   * a pass was held up) break the runs of samples, which claim every look in between.
   */
  resyncMs?: number;
}

export function autoscalePolicy(pool: ReceiverPool): AutoscalePolicy | undefined {
  const a = pool.spec.autoscale;
  if (!a) return undefined;
  const ms = (text: string | undefined, fallback: string): number =>
    parseDuration(text ?? fallback) ?? parseDuration(fallback)!;
  return {
    minSets: a.minSets ?? autoscaleDefaults.minSets,
    maxSets: a.maxSets,
    targetLagPerSet: a.targetLagPerSet,
    scaleInBelowPercent: a.scaleInBelowPercent ?? autoscaleDefaults.scaleInBelowPercent,
    scaleOutAfterMs: ms(a.scaleOutAfter, autoscaleDefaults.scaleOutAfter),
    scaleInAfterMs: ms(a.scaleInAfter, autoscaleDefaults.scaleInAfter),
    cooldownMs: ms(a.cooldown, autoscaleDefaults.cooldown),
  };
}

/** What the reconciler merges into the status patch: the new status.autoscale, or null to remove it. */
export type AutoscaleStatusPatch = Record<string, unknown> | null | undefined;

interface PoolMemory {
  samples: LagSample[];
  /** The positions the pool's cubes' status last recorded. */
  positions: LastPositions;
  /** A write of spec.sets the informer cache may not show yet. */
  pending?: { from: number; to: number; at: number };
  lastChangeAt?: number;
  /** spec.sets as the autoscaler last knew it current (its own write, or another's it took in). */
  known?: number;
  /** Its last change of spec.sets, for status.autoscale.lastScale. */
  lastScale?: NonNullable<PoolAutoscaleStatus['lastScale']>;
}

const iso = (ms: number): string => new Date(ms).toISOString();

export class PoolAutoscaler {
  private readonly deps: AutoscalerDeps;
  private readonly pools = new Map<string, PoolMemory>();

  constructor(deps: AutoscalerDeps) {
    this.deps = deps;
  }

  forget(namespace: string, name: string): void {
    this.pools.delete(`${namespace}/${name}`);
    this.deps.metrics?.forgetAutoscale(namespace, name);
  }

  /**
   * One look at `pool` (read from the cache) at `now`: returns the status.autoscale patch. May
   * change spec.sets.
   */
  async evaluate(
    pool: ReceiverPool,
    namespace: string,
    now: Date,
    draining: boolean,
  ): Promise<AutoscaleStatusPatch> {
    const name = pool.metadata.name ?? '';
    const key = `${namespace}/${name}`;
    const policy = autoscalePolicy(pool);
    const previous = pool.status?.autoscale;
    if (!policy) {
      this.forget(namespace, name);
      return previous ? null : undefined;
    }
    const at = now.getTime();
    const memory = this.pools.get(key) ?? { samples: [], positions: new LastPositions() };
    this.pools.set(key, memory);
    const sets = pool.spec.sets;

    // Our own write not in the cache yet: nothing to decide on a spec we know is old.
    if (memory.pending) {
      if (sets === memory.pending.to) memory.pending = undefined;
      else if (sets === memory.pending.from && at - memory.pending.at < policy.cooldownMs)
        return undefined;
      else memory.pending = undefined;
    }
    // When spec.sets last changed: the status says, or (another writer) now.
    const recorded = previous?.lastScaleTime ? Date.parse(previous.lastScaleTime) : undefined;
    memory.lastChangeAt ??= recorded;
    memory.known ??= previous?.desiredSets;
    let external: string | undefined;
    if (memory.known !== undefined && memory.known !== sets) {
      external = `spec.sets changed from ${memory.known} to ${sets} by another writer`;
      memory.lastChangeAt = at;
      memory.samples = [];
    }
    memory.known = sets;

    const { setNames } = pool.spec;
    const cubes = this.deps.cubesUsing(namespace).filter((c) => cubeUsesPool(c, name, setNames));
    memory.positions.keepOnly(cubes);
    const reads = new Map<string, Promise<HighWatermarks>>();
    const figures = await Promise.all(
      cubes.map(async (cube) => {
        const positions = memory.positions.update(cube);
        if (cube.spec.suspend) return cubeLag(cube, name, positions, undefined, setNames);
        const source = cube.spec.source;
        const readKey = JSON.stringify([cube.metadata.namespace, source.brokers, source.topic]);
        let read = reads.get(readKey);
        if (!read) {
          read = this.deps.highWatermarks(cube).then(
            (m): HighWatermarks => m,
            (error: unknown) => ({ error: error instanceof Error ? error.message : String(error) }),
          );
          reads.set(readKey, read);
        }
        return cubeLag(cube, name, positions, await read, setNames);
      }),
    );
    const sample: LagSample = { at, sets, ...sumLag(figures) };
    const newest = memory.samples.at(-1);
    if (newest && this.deps.resyncMs !== undefined && at - newest.at > 3 * this.deps.resyncMs)
      memory.samples = [];
    const keepMs = Math.max(policy.scaleOutAfterMs, policy.scaleInAfterMs) * 2;
    memory.samples = [
      ...memory.samples.filter((s) => s.sets === sets && s.at >= at - keepMs),
      sample,
    ];

    const decision = decideAutoscale({
      policy,
      sets,
      now: at,
      samples: memory.samples,
      ...(memory.lastChangeAt === undefined ? {} : { lastChangeAt: memory.lastChangeAt }),
      draining,
    });
    let outcome: AutoscaleDecision = decision;
    if (decision.action !== 'Hold')
      outcome = await this.write(pool, namespace, decision, memory, at);
    const changed = outcome.action !== 'Hold';
    this.deps.metrics?.publishAutoscale(namespace, name, {
      target: policy.targetLagPerSet,
      lagPerSet: decision.lagPerSet,
      desiredSets: outcome.sets,
      minSets: policy.minSets,
      maxSets: policy.maxSets,
    });

    const next: PoolAutoscaleStatus = {
      desiredSets: outcome.sets,
      totalLag: sample.lag,
      lagPerSet: decision.lagPerSet,
      targetLagPerSet: policy.targetLagPerSet,
      cubes: cubes.length,
      ...(sample.unknown.length > 0 ? { unknown: sample.unknown.slice(0, 16) } : {}),
      // The runs are of the size before a change: a new size starts with none.
      ...(decision.aboveSince === undefined || changed
        ? {}
        : { aboveTargetSince: iso(decision.aboveSince) }),
      ...(decision.belowSince === undefined || changed
        ? {}
        : { belowThresholdSince: iso(decision.belowSince) }),
      observedTime: iso(at),
      ...(memory.lastChangeAt === undefined ? {} : { lastScaleTime: iso(memory.lastChangeAt) }),
      ...((memory.lastScale ?? previous?.lastScale)
        ? { lastScale: memory.lastScale ?? previous!.lastScale! }
        : {}),
      lastDecision: {
        action: outcome.action,
        reason: external && outcome.action === 'Hold' ? 'SetsChanged' : outcome.reason,
        message:
          external && outcome.action === 'Hold'
            ? `${external}: cooldown ${Math.round(policy.cooldownMs / 1000)}s from now`
            : outcome.message,
        time: iso(at),
      },
    };
    if (previous && !worthWriting(previous, next)) return undefined;
    // A merge patch: fields absent now are removed explicitly.
    return {
      ...next,
      unknown: next.unknown ?? null,
      aboveTargetSince: next.aboveTargetSince ?? null,
      belowThresholdSince: next.belowThresholdSince ?? null,
    };
  }

  /** Writes the decided spec.sets; on success records the Event and the change. */
  private async write(
    pool: ReceiverPool,
    namespace: string,
    decision: AutoscaleDecision,
    memory: PoolMemory,
    at: number,
  ): Promise<AutoscaleDecision> {
    const name = pool.metadata.name ?? '';
    const from = pool.spec.sets;
    try {
      await this.deps.scaleApi.patchNamespacedCustomObjectScale(
        {
          group,
          version,
          namespace,
          plural,
          name,
          // Refused (409) when the pool changed since the cache read it: decided again next pass.
          body: {
            metadata: { resourceVersion: pool.metadata.resourceVersion },
            spec: { replicas: decision.sets },
          },
          fieldManager,
        },
        mergePatch,
      );
    } catch (error) {
      const message = apiErrorMessage(error);
      const conflict = error instanceof ApiException && error.code === 409;
      this.deps.logger[conflict ? 'info' : 'warn']('cannot write spec.sets of a receiver pool', {
        pool: `${namespace}/${name}`,
        sets: decision.sets,
        error: message,
      });
      if (!conflict)
        this.deps.events.record(
          pool,
          'Warning',
          'ScaleFailed',
          `cannot set spec.sets from ${from} to ${decision.sets}: ${message}`,
        );
      return {
        ...decision,
        action: 'Hold',
        sets: from,
        reason: conflict ? 'Conflict' : 'ScaleFailed',
        message: `${decision.message}; not written: ${message}`,
      };
    }
    memory.pending = { from, to: decision.sets, at };
    memory.known = decision.sets;
    memory.lastScale = {
      action: decision.action === 'Hold' ? 'Clamp' : decision.action,
      fromSets: from,
      toSets: decision.sets,
      message: decision.message,
      time: iso(at),
    };
    memory.lastChangeAt = at;
    memory.samples = [];
    const [type, reason, direction] =
      decision.action === 'Clamp'
        ? (['Warning', 'SetsClamped', 'clamp'] as const)
        : decision.action === 'ScaleOut'
          ? (['Normal', 'ScaledOut', 'out'] as const)
          : (['Normal', 'ScaledIn', 'in'] as const);
    this.deps.events.record(pool, type, reason, decision.message);
    this.deps.metrics?.decided(namespace, name, direction);
    this.deps.logger.info('autoscaled a receiver pool', {
      pool: `${namespace}/${name}`,
      from,
      to: decision.sets,
      message: decision.message,
    });
    return decision;
  }
}

/** Whether `next` says something `previous` does not: not the figures' every move. */
export function worthWriting(previous: PoolAutoscaleStatus, next: PoolAutoscaleStatus): boolean {
  return (
    previous.desiredSets !== next.desiredSets ||
    previous.targetLagPerSet !== next.targetLagPerSet ||
    previous.cubes !== next.cubes ||
    previous.lastScaleTime !== next.lastScaleTime ||
    previous.lastScale?.time !== next.lastScale?.time ||
    (previous.aboveTargetSince ?? undefined) !== next.aboveTargetSince ||
    (previous.belowThresholdSince ?? undefined) !== next.belowThresholdSince ||
    (previous.unknown ?? []).join('\n') !== (next.unknown ?? []).join('\n') ||
    previous.lastDecision.action !== next.lastDecision.action ||
    previous.lastDecision.reason !== next.lastDecision.reason ||
    lagBucket(String(previous.lagPerSet)) !== lagBucket(String(next.lagPerSet))
  );
}
