// ReceiverPools of an operator suite's namespace: created, read, scaled through the scale
// subresource as `kubectl scale` does, and waited on by their status.
import { CustomObjectsApi } from '@kubernetes/client-node';
import type { CubeAssignment } from '../../src/api/cube-assignment.ts';
import {
  group,
  plural,
  version,
  type ReceiverPool,
  type ReceiverPoolSpecInput,
} from '../../src/api/receiver-pool.ts';
import { kubectl } from './cluster.ts';
import type { OperatorStack } from './operator-stack.ts';
import { waitFor } from './wait.ts';

/** A pool of `sets` sets of `replicas` receivers; images, tokens and claims are never used here. */
export const poolSpec = (
  sets: number,
  replicas: number,
  more: Partial<ReceiverPoolSpecInput> = {},
): ReceiverPoolSpecInput => ({
  sets,
  replicas,
  image: 'streamcube:test',
  storage: { size: '1Gi', retainOnScaleIn: 'Delete' },
  deepStorage: { claimName: 'deep-storage' },
  receiver: { adminToken: { name: 'admin-token' }, readToken: { name: 'read-token' } },
  ...more,
});

export function createPool(
  stack: OperatorStack,
  name: string,
  spec: ReceiverPoolSpecInput,
): Promise<unknown> {
  return stack.kc.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
    group,
    version,
    plural,
    namespace: stack.namespace,
    body: { apiVersion: `${group}/${version}`, kind: 'ReceiverPool', metadata: { name }, spec },
  });
}

export function getPool(stack: OperatorStack, name: string): Promise<ReceiverPool> {
  return stack.kc.makeApiClient(CustomObjectsApi).getNamespacedCustomObject({
    group,
    version,
    plural,
    namespace: stack.namespace,
    name,
  }) as Promise<ReceiverPool>;
}

/** `kubectl scale receiverpool/<name> --replicas=<sets>`: spec.sets through the scale subresource. */
export async function scalePool(stack: OperatorStack, name: string, sets: number): Promise<void> {
  await kubectl('scale', `receiverpool/${name}`, `--replicas=${sets}`, '-n', stack.namespace);
}

export const poolCondition = (pool: ReceiverPool, type: string) =>
  pool.status?.conditions?.find((c) => c.type === type);

export function waitForPool(
  stack: OperatorStack,
  name: string,
  what: string,
  check: (pool: ReceiverPool) => boolean,
  timeoutMs = 90_000,
): Promise<ReceiverPool> {
  return waitFor(
    `pool ${name}: ${what}`,
    async () => {
      const pool = await getPool(stack, name);
      return check(pool) ? pool : undefined;
    },
    timeoutMs,
    200,
  );
}

/**
 * The pool at rest with exactly `sets` sets, all Active and Ready, its spec observed, not
 * Degraded: every set it scaled in is gone.
 */
export function waitForPoolSettled(
  stack: OperatorStack,
  name: string,
  sets: number,
  timeoutMs?: number,
): Promise<ReceiverPool> {
  return waitForPool(
    stack,
    name,
    `${sets} sets, all Active and Ready`,
    (p) =>
      p.status?.observedGeneration === p.metadata.generation &&
      p.status?.replicas === sets &&
      p.status.readySets === sets &&
      (p.status.sets ?? []).every((s) => s.state === 'Active') &&
      poolCondition(p, 'Ready')?.status === 'True' &&
      poolCondition(p, 'Degraded')?.status === 'False',
    timeoutMs,
  );
}

/** The sets holding partitions of the cube, sorted, with their partitions. */
export function placementOf(cube: CubeAssignment): Record<string, number[]> {
  return Object.fromEntries(
    Object.entries(cube.status?.assignment ?? {})
      .filter(([, partitions]) => partitions.length > 0)
      .map(([rs, partitions]) => [rs, [...partitions].sort((a, b) => a - b)] as const)
      .sort(([a], [b]) => (a < b ? -1 : 1)),
  );
}

/** Partitions whose set differs between two placements, ascending. */
export function movedPartitions(
  before: Record<string, number[]>,
  after: Record<string, number[]>,
): number[] {
  const ownerIn = (placement: Record<string, number[]>): Map<number, string> =>
    new Map(Object.entries(placement).flatMap(([rs, ps]) => ps.map((p) => [p, rs] as const)));
  const [was, now] = [ownerIn(before), ownerIn(after)];
  return [...new Set([...was.keys(), ...now.keys()])]
    .filter((p) => was.get(p) !== now.get(p))
    .sort((a, b) => a - b);
}
