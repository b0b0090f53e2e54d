// ReceiverPools of an operator suite's namespace: created, read, scaled through the scale
// subresource as `kubectl scale` does, waited on by their status, and their Events, metrics and
// StatefulSets read.
import {
  ApiException,
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  PolicyV1Api,
  type CoreV1Event,
  type KubeConfig,
  type V1StatefulSet,
} from '@kubernetes/client-node';
import type { CubeAssignment } from '../../src/api/cube-assignment.ts';
import {
  group,
  plural,
  version,
  type ReceiverPool,
  type ReceiverPoolSpecInput,
} from '../../src/api/receiver-pool.ts';
import { cubeEvents, kubectl, type OperatorProcess } from './cluster.ts';
import { operatorCubeRules, operatorPoolRules } from './operator-rules.ts';
import { serviceAccountKubeconfig } from './receiver-kubeconfig.ts';
import type { OperatorStack } from './operator-stack.ts';
import { applyChartPool, type ChartPoolOutcome } from '../../src/operator/pool/chart-pool.ts';
import { EventRecorder } from '../../src/operator/events.ts';
import { createLogger } from '../../src/observability/logger.ts';
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

/** The API clients of the objects a pool owns and of the pool itself, on the stack's cluster. */
export const poolApis = (stack: OperatorStack) => ({
  custom: stack.kc.makeApiClient(CustomObjectsApi),
  apps: stack.kc.makeApiClient(AppsV1Api),
  core: stack.kc.makeApiClient(CoreV1Api),
  policy: stack.kc.makeApiClient(PolicyV1Api),
});

export function createPool(
  stack: OperatorStack,
  name: string,
  spec: ReceiverPoolSpecInput,
): Promise<unknown> {
  return poolApis(stack).custom.createNamespacedCustomObject({
    group,
    version,
    plural,
    namespace: stack.namespace,
    body: { apiVersion: `${group}/${version}`, kind: 'ReceiverPool', metadata: { name }, spec },
  });
}

export function getPool(stack: OperatorStack, name: string): Promise<ReceiverPool> {
  return poolApis(stack).custom.getNamespacedCustomObject({
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

/** The result of a read, or undefined where the object is not there (404). */
export async function orUndefined<T>(call: Promise<T>): Promise<T | undefined> {
  try {
    return await call;
  } catch (error) {
    if (error instanceof ApiException && error.code === 404) return undefined;
    throw error;
  }
}

/** StatefulSet `name` of the stack's namespace, or undefined once it is gone. */
export const statefulSet = (
  stack: OperatorStack,
  name: string,
): Promise<V1StatefulSet | undefined> =>
  orUndefined(poolApis(stack).apps.readNamespacedStatefulSet({ name, namespace: stack.namespace }));

/** The Events of ReceiverPool `name`, oldest first. */
export async function poolEvents(stack: OperatorStack, name: string): Promise<CoreV1Event[]> {
  const events = await cubeEvents(stack.kc, stack.namespace, name);
  return events.filter((e) => e.involvedObject.kind === 'ReceiverPool');
}

/**
 * The suite's operator (of a stack made with `operator: false`), started in beforeAll with the
 * chart's rights and no others, looking at a stable pool again every `resyncMs`: a right the
 * operator needs and the chart lacks fails the suite.
 */
export function useChartRightsOperator(
  stack: OperatorStack,
  resyncMs: number,
): () => OperatorProcess {
  let operator: OperatorProcess | undefined;
  beforeAll(async () => {
    const kubeconfig = await serviceAccountKubeconfig(stack.kc, stack.namespace, 'operator', [
      ...operatorCubeRules,
      ...operatorPoolRules('receiver-pool'),
    ]);
    operator = await stack.startOperator({}, undefined, [`--resync=${resyncMs}ms`], kubeconfig);
  });
  return () => {
    if (!operator) throw new Error('the operator starts in beforeAll');
    return operator;
  };
}

/**
 * The operator's series `metric` of pool `name` from its /metrics at `port`, one line a series,
 * without the namespace label (every series of a suite has the same).
 */
export async function poolSeries(
  stack: OperatorStack,
  port: number,
  name: string,
  metric: string,
): Promise<string[]> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  return text
    .split('\n')
    .filter((l) => l.startsWith(`${metric}{`) && l.includes(`pool="${name}"`))
    .map((l) => l.replace(`namespace="${stack.namespace}",`, ''));
}

/**
 * The API server shares its CRDs with every suite: one run from an older checkout re-applies a
 * ReceiverPool CRD without spec.autoscale, which the API server then prunes from every pool.
 */
export async function expectAutoscaleInCrd(): Promise<void> {
  const crd = await kubectl('get', 'crd', 'receiverpools.streamcube.io', '-o', 'json');
  if (!crd.includes('"targetLagPerSet"'))
    throw new Error(
      'the ReceiverPool CRD in the API server has no spec.autoscale: another suite applied an older CRD',
    );
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

/**
 * What the operator's leader does at each resync with --pool-configmap (none runs in the chart
 * suites): applies the ReceiverPool of ConfigMap `configMap` in `namespace`, as the admin.
 */
export function applyChartPoolAsLeader(
  kc: KubeConfig,
  namespace: string,
  configMap: string,
): Promise<ChartPoolOutcome> {
  const logger = createLogger('chart-pool-test');
  const core = kc.makeApiClient(CoreV1Api);
  return applyChartPool({
    namespace,
    configMap,
    core,
    custom: kc.makeApiClient(CustomObjectsApi),
    events: new EventRecorder(core, 'chart-pool-test', logger),
    logger,
  });
}
