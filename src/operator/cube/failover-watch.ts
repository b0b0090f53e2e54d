// Which of a cube's replica sets are unavailable (no ready receiver pod), since when, and which of
// those are lost (unavailable for longer than spec.failoverAfter) and so failed over. What this
// process learns across reconciles to decide it is kept here, per replica set of a cube:
//   - since when it saw each set unavailable (status.unavailableSince holds an earlier leader's);
//   - the partitions each set keeps released but uncommitted data of (released-uncommitted.ts),
//     which block its failover;
//   - the sets it failed over, until each is wholly back.
import type { V1Pod } from '@kubernetes/client-node';
import type { CubeAssignment } from '../../api/cube-assignment.ts';
import { parseDuration } from '../../api/duration.ts';
import { cubeKeyString, type CubeKey } from '../../protocol/cube-paths.ts';
import { notReadySince, unavailableSince } from '../unavailable-since.ts';

/** spec.failoverAfter when the spec leaves it out. */
const defaultFailoverAfterMs = 300_000;

/** The cube's replica sets that hold partitions and have no ready receiver pod. */
export interface UnavailableSets {
  /** Unavailable for longer than spec.failoverAfter, keeping no uncommitted data: failed over. */
  lost: Set<string>;
  /** Unavailable for less than spec.failoverAfter: when each will be lost (epoch ms). */
  failoverAt: Map<string, number>;
  /**
   * Unavailable for longer than spec.failoverAfter but keeping data of partitions moved away that
   * is not committed yet: by set, those partitions. A failover would lose that data.
   */
  failoverBlocked: Map<string, readonly number[]>;
  /** Since when each set has been unavailable (epoch ms), for status.unavailableSince. */
  since: Map<string, number>;
}

export class FailoverWatch {
  private readonly now: () => number;
  /**
   * Per `<namespace>/<replica set>`: since when this process has seen the set unavailable. A
   * set's pods serve every cube of the namespace that names it, so this is not per cube.
   */
  private readonly unavailableSeenAt = new Map<string, number>();
  /** Per `<namespace>/<cube>/<replica set>`: its released, uncommitted partitions, as observed. */
  private readonly releasedUncommitted = new Map<string, number[]>();
  /** `<namespace>/<cube>/<replica set>` failed over by this process and not wholly back yet. */
  private readonly failedOver = new Set<string>();

  constructor(now: () => number = Date.now) {
    this.now = now;
  }

  /**
   * The cube's replica sets holding partitions that are unavailable, lost or blocked from failing
   * over; sets with a ready receiver (`available`) are forgotten as unavailable. `pods` bound how
   * long ago a set became unavailable (unavailable-since.ts).
   */
  unavailableSets(
    object: CubeAssignment,
    available: ReadonlySet<string>,
    pods: readonly V1Pod[],
  ): UnavailableSets {
    const cube = cubeKeyOf(object);
    const now = this.now();
    const afterMs = parseDuration(object.spec.failoverAfter) ?? defaultFailoverAfterMs;
    const out: UnavailableSets = {
      lost: new Set(),
      failoverAt: new Map(),
      failoverBlocked: new Map(),
      since: new Map(),
    };
    // Read from the pods only when a set is unavailable: most reconciles find every set available.
    let podsNotReadySince: Map<string, number> | undefined;
    const sets = new Set([
      ...(object.spec.replicaSets ?? []),
      ...Object.keys(object.status?.assignment ?? {}),
    ]);
    for (const rs of sets) {
      const seenKey = `${cube.namespace}/${rs}`;
      if (available.has(rs)) {
        this.unavailableSeenAt.delete(seenKey);
        continue;
      }
      const seen = this.unavailableSeenAt.get(seenKey) ?? now;
      this.unavailableSeenAt.set(seenKey, seen);
      if (!(object.status?.assignment?.[rs] ?? []).length) continue;
      const since = unavailableSince(
        seen,
        object.status?.unavailableSince?.[rs],
        (podsNotReadySince ??= notReadySince(pods)).get(rs),
      );
      out.since.set(rs, since);
      // A new leader knows a set gone since before it started from status alone.
      const released =
        this.releasedUncommittedOf(cube, rs) ?? object.status?.releasedUncommitted?.[rs];
      if (now - since < afterMs) out.failoverAt.set(rs, since + afterMs);
      else if (released?.length) out.failoverBlocked.set(rs, released);
      else out.lost.add(rs);
    }
    return out;
  }

  /** The set's released, uncommitted partitions as last observed; undefined: not observed. */
  releasedUncommittedOf(cube: CubeKey, replicaSet: string): readonly number[] | undefined {
    return this.releasedUncommitted.get(setKey(cube, replicaSet));
  }

  /** What the set's replicas reported now (partitionsReleasedUncommitted). */
  observedReleasedUncommitted(cube: CubeKey, replicaSet: string, partitions: number[]): void {
    this.releasedUncommitted.set(setKey(cube, replicaSet), partitions);
  }

  /**
   * A move completed with the set as a source: status.releasedUncommitted, written with the
   * completion, stands for it until the set is observed again.
   */
  releasedUncommittedWritten(cube: CubeKey, replicaSet: string): void {
    this.releasedUncommitted.delete(setKey(cube, replicaSet));
  }

  /** A failover (or a lost set's fence) moved the set's partitions away. */
  failedOverSet(cube: CubeKey, replicaSet: string): void {
    this.failedOver.add(setKey(cube, replicaSet));
  }

  /** The set was failed over by this process and is not wholly back yet. */
  isFailedOver(cube: CubeKey, replicaSet: string): boolean {
    return this.failedOver.has(setKey(cube, replicaSet));
  }

  /** Every pod of a failed-over set is back and none holds partitions: it is a set like others. */
  setBack(cube: CubeKey, replicaSet: string): void {
    this.failedOver.delete(setKey(cube, replicaSet));
  }

  /** The cube is gone: what was kept of its sets goes with it. */
  forget(cube: CubeKey): void {
    const prefix = `${cubeKeyString(cube)}/`;
    for (const k of [...this.releasedUncommitted.keys()])
      if (k.startsWith(prefix)) this.releasedUncommitted.delete(k);
    for (const k of [...this.failedOver]) if (k.startsWith(prefix)) this.failedOver.delete(k);
  }
}

/** The object's key: its namespace (`default` when unset) and name. */
export function cubeKeyOf(object: CubeAssignment): CubeKey {
  return { namespace: object.metadata?.namespace ?? 'default', name: object.metadata?.name ?? '' };
}

function setKey(cube: CubeKey, replicaSet: string): string {
  return `${cubeKeyString(cube)}/${replicaSet}`;
}
