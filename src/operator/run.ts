// `streamcube operator`: informers on CubeAssignments, receiver pods and ReceiverPools, the cube and
// pool controllers that run only while this process holds the leader Lease, and /healthz, /readyz,
// /metrics.
import { once } from 'node:events';
import {
  AppsV1Api,
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  PolicyV1Api,
  type V1Pod,
} from '@kubernetes/client-node';
import type { CubeAssignment } from '../api/cube-assignment.ts';
import type { ReceiverPool } from '../api/receiver-pool.ts';
import { createLogger } from '../observability/logger.ts';
import { createProcessRegistry, registerBuildInfo } from '../observability/metrics.ts';
import { tlsReceiverTransport } from '../http/tls.ts';
import { TokenFile } from '../protocol/token-file.ts';
import { Controller } from './runtime/controller.ts';
import { objectKey } from './runtime/informer.ts';
import { createCubeInformers } from './cube-informers.ts';
import { LeaderElector } from './runtime/leader-election.ts';
import { WorkQueue } from './runtime/work-queue.ts';
import { parseOperatorConfig } from './config.ts';
import { replicaSetLabel } from './discovery.ts';
import { EventRecorder } from './events.ts';
import { sweepGroups } from './group-sweep.ts';
import { createOperatorMetrics } from './metrics.ts';
import { OwnWrites } from './own-writes.ts';
import { createGuardedServer } from '../http/guarded-server.ts';
import { createCubeReconciler } from './cube/index.ts';
import { loadKubeConfig } from '../kubernetes/kube-config.ts';
import { secretReaderOf } from '../kubernetes/secrets.ts';
import { TopicMetadata } from './topic-metadata.ts';
import {
  createPoolInformers,
  createPoolReconciler,
  activeSets,
  createPoolMetrics,
  eachPoolInformer,
  leadPools,
  PoolAutoscaler,
  SetWorkloads,
} from './pool/index.ts';
import { keepChartPoolApplied } from './pool/chart-pool.ts';

export async function runOperator(argv: string[]): Promise<number> {
  const config = parseOperatorConfig(argv);
  const logger = createLogger('operator').child({ identity: config.identity });
  const receiverToken = new TokenFile(config.receiverTokenFile, {
    graceMs: config.receiverTokenGraceMs,
    onError: (error) =>
      logger.warn('receiver token file unusable; the current token stays', { error }),
  });
  const receiverTransport = config.receiverCaFile
    ? tlsReceiverTransport(config.receiverCaFile, config.receiverServerName)
    : undefined;
  const kc = loadKubeConfig(config.kubeconfig);
  const custom = kc.makeApiClient(CustomObjectsApi);
  const core = kc.makeApiClient(CoreV1Api);
  const registry = createProcessRegistry();
  registerBuildInfo(registry, 'operator');

  const ns = config.namespace;
  const { cubes, pods } = createCubeInformers({
    kubeConfig: kc,
    namespace: ns,
    receiverNamespace: config.receiverNamespace,
    receiverSelector: config.receiverSelector,
    registry,
    logger,
  });
  cubes.start();
  pods.start();
  // ReceiverPools live beside the receivers.
  const poolNs = config.receiverNamespace ?? ns;
  const poolInformers = createPoolInformers({
    kubeConfig: kc,
    namespace: poolNs,
    registry,
    logger,
  });
  for (const informer of eachPoolInformer(poolInformers)) informer.start();

  /** The leader term of this process (leaseTransitions when it took the Lease); set while leading. */
  let term: number | undefined;
  const metrics = createOperatorMetrics(registry);
  const topics = new TopicMetadata(
    `streamcube-operator-${config.identity}`,
    config.resyncMs,
    secretReaderOf(core),
  );
  const ownWrites = new OwnWrites<CubeAssignment>();
  const events = new EventRecorder(core, 'streamcube-operator', logger);
  const reconcile = createCubeReconciler({
    ownWrites,
    custom,
    getCube: (ns, name) => cubes.get(name, ns),
    listPods: (cubeNs) => pods.list(config.receiverNamespace ?? cubeNs),
    receiverToken: receiverToken.tokens,
    receiverPort: config.receiverPort,
    ...(receiverTransport ? { receiverTransport } : {}),
    topics,
    events,
    metrics,
    logger,
    leaderTerm: () => term,
    // A receiver has seen a later leader's term: this process no longer leads, whatever its
    // lease renewals say. It stops at once; the lost leadership ends the process.
    onStaleLeader: (error) => {
      metrics.staleLeaderRefusals.inc();
      logger.error('a receiver refused a call as coming from a stale leader; stopping', {
        term,
        error: error.message,
        // The usual cause is another operator leading now. If none is (the Lease was deleted
        // and made again, so its transitions restarted at 0), the receivers refuse every leader:
        hint: `if no other operator runs, set spec.leaseTransitions of Lease ${config.leaseNamespace}/${config.leaseName} above the receiver's term (streamcube_receiver_leader_term), or delete the receivers' leader-terms/ files`,
      });
      void elector.stop({ release: false });
    },
    phaseTimeoutMs: config.phaseTimeoutMs,
    drainTimeoutMs: config.drainTimeoutMs,
    resyncMs: config.resyncMs,
    rejectedEventsWindowMs: config.rejectedEventsWindowMs,
    receiverTimeoutMs: config.drainTimeoutMs + 30_000,
    poolSets: (poolNamespace, name) => {
      const pool = poolInformers.pools.get(name, poolNamespace);
      return pool && activeSets(pool);
    },
    receiverNamespace: config.receiverNamespace,
  });

  // With a namespace of their own, the receivers serve the cubes of every namespace watched.
  const cubesUsing = (poolNamespace: string): CubeAssignment[] =>
    config.receiverNamespace ? cubes.list() : cubes.list(poolNamespace);
  const poolMetrics = createPoolMetrics(registry);
  const reconcilePool = createPoolReconciler({
    getPool: (poolNamespace, name) => poolInformers.pools.get(name, poolNamespace),
    statefulSets: (poolNamespace) => poolInformers.statefulSets.list(poolNamespace),
    services: (poolNamespace) => poolInformers.services.list(poolNamespace),
    budgets: (poolNamespace) => poolInformers.budgets.list(poolNamespace),
    cubesUsing,
    workloads: new SetWorkloads({
      apps: kc.makeApiClient(AppsV1Api),
      core,
      policy: kc.makeApiClient(PolicyV1Api),
    }),
    statusApi: custom,
    events,
    resyncMs: config.resyncMs,
    metrics: poolMetrics,
    autoscaler: new PoolAutoscaler({
      cubesUsing,
      highWatermarks: async (cube) => {
        const { offsets } = await topics.resetOffsets(cube.spec.source, cube.metadata.namespace);
        return new Map([...offsets].map(([p, o]) => [p, o.high]));
      },
      scaleApi: custom,
      events,
      metrics: poolMetrics,
      logger,
      resyncMs: config.resyncMs,
    }),
    logger,
  });

  // One queue and controller per leadership term: a lost lease stops them before anyone else leads.
  const lead = async (signal: AbortSignal, leaderTerm: number): Promise<void> => {
    term = leaderTerm;
    const pools = leadPools({
      signal,
      informers: poolInformers,
      cubes,
      reconcile: reconcilePool,
      receiverNamespace: config.receiverNamespace,
      registry,
      logger,
    });
    const controllerName = 'cubeassignment';
    const queue = new WorkQueue({ name: controllerName, controller: controllerName, registry });
    const controller = new Controller({
      name: controllerName,
      queue,
      reconcile,
      workers: config.workers,
      registry,
      logger,
    });
    // A receiver pod serves the cubes of its namespace, or of every namespace when receivers
    // have one of their own.
    const enqueueNamespace = (pod: V1Pod): void => {
      const served = config.receiverNamespace ? cubes.list() : cubes.list(pod.metadata?.namespace);
      for (const cube of served) queue.add(objectKey(cube));
    };
    cubes.addEventHandler({
      add: (o) => queue.add(objectKey(o)),
      // The reconciler's own writes bring it nothing new: they would make every busy cube
      // reconcile again at once, and a status write wake the cube that wrote it.
      update: (o) => {
        if (!ownWrites.isOwnWrite(o)) queue.add(objectKey(o));
      },
      delete: (o) => queue.add(objectKey(o)),
    });
    pods.addEventHandler({
      add: enqueueNamespace,
      update: enqueueNamespace,
      delete: enqueueNamespace,
    });
    // A cube on a pool follows its Active sets: it runs again when they change.
    const enqueuePoolCubes = (pool: ReceiverPool): void => {
      const poolNamespace = pool.metadata.namespace;
      const served = config.receiverNamespace ? cubes.list() : cubes.list(poolNamespace);
      for (const cube of served)
        if (cube.spec.pool === pool.metadata.name) queue.add(objectKey(cube));
    };
    const removePoolHandler = poolInformers.pools.addEventHandler({
      add: enqueuePoolCubes,
      update: (pool, old) => {
        if (pool.spec.sets !== old.spec.sets) enqueuePoolCubes(pool);
      },
      delete: enqueuePoolCubes,
    });
    signal.addEventListener('abort', removePoolHandler, { once: true });
    // The chart's pool (--pool-configmap): applied now, and at every resync when it changed.
    const { poolConfigMap, receiverNamespace } = config;
    if (poolConfigMap && receiverNamespace)
      keepChartPoolApplied({
        namespace: receiverNamespace,
        configMap: poolConfigMap,
        core,
        custom,
        events,
        logger,
        signal,
        resyncMs: config.resyncMs,
        applied: (applied) =>
          poolMetrics.chartPoolApplied(receiverNamespace, poolConfigMap, applied),
      });
    await Promise.all([cubes.waitForSync(signal), pods.waitForSync(signal)]);
    for (const cube of cubes.list()) queue.add(objectKey(cube));
    controller.start();
    logger.info('leading: reconciling cube assignments', { term: leaderTerm });
    let sweeping: Promise<unknown> | undefined;
    const sweep = (): void => {
      sweeping ??= sweepGroups({
        cubes: () => cubes.list(),
        receivers: () =>
          pods
            .list()
            .filter((p) => p.metadata?.labels?.[replicaSetLabel])
            .map((p) => p.metadata!.name!),
        namespace: ns,
        adminOf: (cube) => topics.adminOf(cube.spec.source, cube.metadata.namespace),
        deleted: (reason) => metrics.consumerGroupsDeleted.inc({ reason }),
        logger,
      }).finally(() => (sweeping = undefined));
    };
    const sweeper = config.groupSweepMs > 0 ? setInterval(sweep, config.groupSweepMs) : undefined;
    signal.addEventListener('abort', () => clearInterval(sweeper), { once: true });
    await new Promise<void>((resolve) =>
      signal.addEventListener('abort', () => resolve(), { once: true }),
    );
    await Promise.all([controller.stop(), pools]);
  };
  const elector = new LeaderElector({
    api: kc.makeApiClient(CoordinationV1Api),
    namespace: config.leaseNamespace,
    name: config.leaseName,
    identity: config.identity,
    callbacks: {
      onStartedLeading: lead,
      onStoppedLeading: () => logger.info('stopped leading'),
      onNewLeader: (identity) => logger.info('leader', { leader: identity }),
    },
    registry,
    leaseDurationMs: config.leaseDurationMs,
    renewDeadlineMs: config.renewDeadlineMs,
    retryPeriodMs: config.retryPeriodMs,
    logger,
  });

  // Health and metrics only; the guarded server keeps a malformed request from ending the process.
  const server = createGuardedServer(
    async (_req, res, url) => {
      const path = url.pathname;
      if (path === '/healthz') return void res.writeHead(200).end('ok');
      if (path === '/readyz') {
        const ready = cubes.hasSynced() && pods.hasSynced();
        return void res.writeHead(ready ? 200 : 503).end(ready ? 'ok' : 'informers not synced');
      }
      if (path === '/metrics') {
        const body = await registry.metrics();
        return void res.writeHead(200, { 'content-type': registry.contentType }).end(body);
      }
      res.writeHead(404).end('not found');
    },
    { logger },
  );
  server.listen(config.port, config.host);
  await once(server, 'listening');
  logger.info('operator started', {
    port: config.port,
    lease: `${config.leaseNamespace}/${config.leaseName}`,
  });

  const electing = elector.run();
  const signal = await Promise.race([
    once(process, 'SIGTERM').then(() => 'SIGTERM'),
    once(process, 'SIGINT').then(() => 'SIGINT'),
    electing.then(() => 'lost leadership'),
  ]);
  logger.info('shutting down', { reason: signal });
  await elector.stop({ release: true });
  server.close();
  receiverToken.close();
  receiverTransport?.close();
  await Promise.all([
    cubes.stop(),
    pods.stop(),
    ...eachPoolInformer(poolInformers).map((i) => i.stop()),
    topics.close(),
  ]);
  // Losing the lease ends the process (as controller-runtime does), so a supervisor restarts it clean.
  return signal === 'lost leadership' ? 1 : 0;
}
