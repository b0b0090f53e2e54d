// The pool controller of one leadership term, beside the cube controller: it starts once its
// caches are synced (never, when the ReceiverPool CRD is not installed, which leaves the cube
// controller alone), and runs until the term ends. A pool runs again when it or one of its sets
// changes, and when a cube changes while the pool has Draining sets waiting for cubes to leave.
import type { Registry } from 'prom-client';
import type { KubernetesObject } from '@kubernetes/client-node';
import type { CubeAssignment } from '../../api/cube-assignment.ts';
import { Controller, type Reconciler } from '../runtime/controller.ts';
import { objectKey, type SupervisedInformer } from '../runtime/informer.ts';
import type { RuntimeLogger } from '../runtime/logger.ts';
import { WorkQueue } from '../runtime/work-queue.ts';
import { eachPoolInformer, type PoolInformers } from './informers.ts';
import { poolOf } from './set-names.ts';

export async function leadPools(o: {
  signal: AbortSignal;
  informers: PoolInformers;
  cubes: SupervisedInformer<CubeAssignment>;
  reconcile: Reconciler;
  /** The operator's --receiver-namespace: its pools serve the cubes of every namespace. */
  receiverNamespace: string | undefined;
  registry: Registry;
  logger: RuntimeLogger;
}): Promise<void> {
  const { signal, informers, cubes, registry, logger } = o;
  const name = 'receiverpool';
  const queue = new WorkQueue({ name, controller: name, registry });
  const controller = new Controller({ name, queue, reconcile: o.reconcile, registry, logger });
  const enqueuePool = (pool: KubernetesObject): void => queue.add(objectKey(pool));
  const enqueueOwner = (object: KubernetesObject): void => {
    const pool = poolOf(object.metadata?.labels);
    if (pool && object.metadata?.namespace) queue.add(`${object.metadata.namespace}/${pool}`);
  };
  const enqueueDraining = (cube: CubeAssignment): void => {
    const pools = o.receiverNamespace
      ? informers.pools.list()
      : informers.pools.list(cube.metadata.namespace);
    for (const pool of pools)
      if (pool.status?.sets?.some((s) => s.state === 'Draining')) enqueuePool(pool);
  };
  const owned = { add: enqueueOwner, update: enqueueOwner, delete: enqueueOwner };
  const removers = [
    informers.pools.addEventHandler({ add: enqueuePool, update: enqueuePool, delete: enqueuePool }),
    informers.statefulSets.addEventHandler(owned),
    informers.services.addEventHandler(owned),
    informers.budgets.addEventHandler(owned),
    cubes.addEventHandler({
      add: enqueueDraining,
      update: enqueueDraining,
      delete: enqueueDraining,
    }),
  ];
  try {
    await Promise.all(eachPoolInformer(informers).map((i) => i.waitForSync(signal)));
    await cubes.waitForSync(signal);
    for (const pool of informers.pools.list()) enqueuePool(pool);
    controller.start();
    logger.info('leading: reconciling receiver pools');
    await new Promise<void>((resolve) =>
      signal.addEventListener('abort', () => resolve(), { once: true }),
    );
  } catch {
    // The term ended before the caches synced.
  } finally {
    for (const remove of removers) remove();
    await controller.stop();
  }
}
