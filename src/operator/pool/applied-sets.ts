// What the operator last applied of each set, and the versions the API server answered with: a
// pass over a set that nobody changed since sends nothing, and an edit or deletion (a new
// generation, a missing object) is applied again. Every resync applies regardless, which also
// takes back what no generation records (an edited label).
import { createHash } from 'node:crypto';
import type { KubernetesObject } from '@kubernetes/client-node';
import type { SetObjects } from './render.ts';

/** The version of the live objects an apply cares about: generation, else resourceVersion. */
export function setFingerprint(live: {
  [K in keyof SetObjects]: KubernetesObject | undefined;
}): string {
  const of = (o: KubernetesObject | undefined): string =>
    o === undefined
      ? '-'
      : `${o.metadata?.uid ?? ''}@${o.metadata?.generation ?? o.metadata?.resourceVersion ?? ''}`;
  return [of(live.statefulSet), of(live.service), of(live.podDisruptionBudget)].join(',');
}

export function desiredDigest(objects: SetObjects): string {
  return createHash('sha256').update(JSON.stringify(objects)).digest('hex');
}

/** Keyed by `namespace/set`: pools of the same name in two namespaces have sets of the same names. */
export class AppliedSets {
  private readonly bySet = new Map<string, { digest: string; fingerprint: string; at: number }>();

  /** Whether `set` was applied as `digest` less than `maxAgeMs` ago and is unchanged since. */
  fresh(set: string, digest: string, fingerprint: string, now: number, maxAgeMs: number): boolean {
    const last = this.bySet.get(set);
    return (
      last !== undefined &&
      last.digest === digest &&
      last.fingerprint === fingerprint &&
      now - last.at < maxAgeMs
    );
  }

  applied(set: string, digest: string, fingerprint: string, now: number): void {
    this.bySet.set(set, { digest, fingerprint, at: now });
  }

  forget(set: string): void {
    this.bySet.delete(set);
  }
}
