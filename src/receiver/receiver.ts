// A receiver process: the cubes it serves (one CubeChannel each, keyed by namespace and name),
// restored from disk at start.
import { type Socket, connect as netConnect, isIP } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import type { ISocketFactory, Kafka } from 'kafkajs';
import { createKafka } from '../kafka/client.ts';
import { consumerGroupId } from '../kafka/consumer-group.ts';
import { closeFetchSession } from '../kafka/fetch-session.ts';
import {
  LiveSourceSecurity,
  type SecretReader,
  connectionKey,
  securityKey,
} from '../kafka/source-security.ts';
import type { KafkaSource } from '../api/cube.ts';
import { type CubeKey, cubeKeyString, defaultCubeNamespace } from '../protocol/cube-paths.ts';
import type { Logger } from '../observability/logger.ts';
import type {
  AssignCubeRequest,
  CubeStatus,
  CubeSummaries,
  ReceiverStatus,
} from '../protocol/admin-api.ts';
import { type FenceResponse, assignCubeRequest, fenceRequest } from '../protocol/admin-api.ts';
import { fenceReplicaSet } from './hand-off-commit.ts';
import { rangeMapToJson } from './offset-ranges.ts';
import type { ReceiverConfig } from './config.ts';
import { ChannelError } from './channel-error.ts';
import { CubeChannel, type CubeSpec } from './cube-channel.ts';
import {
  assertPlaceFree,
  listCubeDirectories,
  migrateCubeDirectories,
  moveCubeDirectory,
} from './cube-directories.ts';
import { type DeepStorage, openDeepStorage } from './deep-storage.ts';
import { LeaderTerms } from './leader-terms.ts';
import {
  type LeaderTermBound,
  type LeaseTransitionsReader,
  defaultMaxTermJump,
  jumpTermBound,
  leaseTermBound,
} from './leader-term-bound.ts';
import { type AssignedSourceReader, checkAssignedSource } from './assigned-source.ts';
import type { ReceiverMetrics } from './metrics.ts';

/** Cubes closed at once when the receiver stops. */
const closeConcurrency = 16;

/** How long a Lease's leaseTransitions read answers terms at or below it. */
const leaseCacheMs = 5_000;

/** What the receiver reads from the API server to check calls; the real API server by default. */
export interface ReceiverApiReads {
  assignedSource?: AssignedSourceReader;
  leaseTransitions?: LeaseTransitionsReader;
}

export class Receiver {
  readonly config: ReceiverConfig;
  readonly metrics: ReceiverMetrics;
  /** The highest leader term seen per cube: calls from a deposed operator are refused. */
  readonly leaderTerms: LeaderTerms;
  /** How far a call may raise a cube's leader term: by the Lease, or by a bounded jump. */
  readonly leaderTermBound: LeaderTermBound;
  private readonly readAssignedSource: AssignedSourceReader;
  private readonly logger: Logger;
  /** By cubeKeyString: `<namespace>/<name>`. */
  private readonly cubes = new Map<string, CubeChannel>();
  /** The last assign or unassign per cube name, which the next one waits for (see `exclusively`). */
  private readonly cubeLocks = new Map<string, Promise<unknown>>();
  private readonly kafkaClients = new Map<string, Kafka>();
  /** The TLS and SASL options of the secured clients, by the same key, reread periodically. */
  private readonly securities = new Map<string, LiveSourceSecurity>();
  private secretRefresh: NodeJS.Timeout | undefined;
  /** Sockets of the Kafka clients still open, closed for good at stop. */
  private readonly kafkaSockets = new Set<Socket>();
  private ready = false;
  private deepStoragePromise: Promise<DeepStorage> | undefined;

  constructor(
    config: ReceiverConfig,
    metrics: ReceiverMetrics,
    logger: Logger,
    apiReads: ReceiverApiReads = {},
  ) {
    this.config = config;
    this.metrics = metrics;
    this.logger = logger;
    // The Kubernetes client is loaded on first use only: a receiver without secured sources or a
    // Lease never needs it.
    let kubeReadsPromise: Promise<typeof import('../kubernetes/receiver-reads.ts')> | undefined;
    const kubeReads = () => (kubeReadsPromise ??= import('../kubernetes/receiver-reads.ts'));
    let sourceReader: AssignedSourceReader | undefined;
    this.readAssignedSource =
      apiReads.assignedSource ??
      (async (cube) => {
        sourceReader ??= (await kubeReads()).kubeAssignedSourceReader();
        return sourceReader(cube);
      });
    const lease = config.leaderLease;
    let leaseReader: LeaseTransitionsReader | undefined;
    this.leaderTermBound = lease
      ? leaseTermBound({
          lease: `${lease.namespace}/${lease.name}`,
          read:
            apiReads.leaseTransitions ??
            (async () => {
              leaseReader ??= (await kubeReads()).kubeLeaseTransitionsReader(
                lease.namespace,
                lease.name,
              );
              return leaseReader();
            }),
          cacheMs: leaseCacheMs,
        })
      : jumpTermBound(config.maxLeaderTermJump ?? defaultMaxTermJump);
    this.leaderTerms = new LeaderTerms({
      dataDir: config.dataDir,
      onStale: ({ namespace, name: cube }) => {
        metrics.staleLeaderRequests.inc({ namespace, cube });
        logger.warn('refused a call from a stale leader term', { namespace, cube });
      },
      onTerm: ({ namespace, name: cube }, term) => {
        metrics.leaderTerm.set({ namespace, cube }, term);
        metrics.staleLeaderRequests.inc({ namespace, cube }, 0);
      },
    });
  }

  isReady(): boolean {
    return this.ready;
  }

  /**
   * The Kafka client of a source, one per brokers and Secret names. TLS and SASL come from the
   * Secrets the source names, which the receiver reads itself in the cube's namespace (its
   * ServiceAccount may `get` Secrets there): the operator's admin call carries their names only.
   */
  private async kafkaFor(source: KafkaSource, namespace: string | undefined): Promise<Kafka> {
    const secured = securityKey(source);
    const key = connectionKey(source, namespace ?? defaultCubeNamespace);
    let kafka = this.kafkaClients.get(key);
    if (!kafka) {
      const security = secured
        ? await LiveSourceSecurity.create(
            source,
            namespace ?? defaultCubeNamespace,
            await this.secretReader(),
          )
        : undefined;
      kafka = createKafka({
        clientId: `streamcube-receiver-${this.config.id}`,
        brokers: source.brokers,
        socketFactory: this.trackedSocket,
        ...security?.options,
      });
      this.kafkaClients.set(key, kafka);
      if (security) {
        this.securities.set(key, security);
        this.secretRefresh ??= setInterval(
          () => void this.refreshSecrets(),
          this.config.secretRefreshMs,
        );
        this.secretRefresh.unref();
      }
    }
    return kafka;
  }

  /**
   * Reads the sources' Secrets again: a rotated password or certificate reaches the next
   * connection of every client using it (a reconnect, a cube assigned later), without a restart.
   */
  async refreshSecrets(): Promise<void> {
    for (const [key, security] of this.securities) {
      const brokers = key.split('|')[0];
      try {
        if (await security.refresh())
          this.logger.info('a source Secret changed; new Kafka connections use it', { brokers });
      } catch (error) {
        this.logger.warn('cannot read a source Secret again; the credentials held stay', {
          brokers,
          error: (error as Error).message,
        });
      }
    }
  }

  private secretReaderPromise: Promise<SecretReader> | undefined;

  /** The hand-off target every cube shares (one S3 client, one connection pool). */
  private deepStorage(): Promise<DeepStorage> {
    this.deepStoragePromise ??= openDeepStorage(this.config.deepStorage);
    return this.deepStoragePromise;
  }

  /** Reads Secrets through the pod's ServiceAccount (or KUBECONFIG), made on first use only. */
  private secretReader(): Promise<SecretReader> {
    this.secretReaderPromise ??= import('../kubernetes/secrets.ts').then((m) =>
      m.kubeSecretReader(),
    );
    return this.secretReaderPromise;
  }

  /**
   * kafkajs's own socket factory, with every socket remembered until it closes. After a
   * connection error kafkajs drops the broker from its pool without disconnecting it, and a
   * request still holding that broker reconnects it once Kafka is back: disconnecting the clients
   * then leaves that socket open, and a stopped receiver would never exit.
   */
  private readonly trackedSocket: ISocketFactory = ({ host, port, ssl, onConnect }) => {
    const socket = ssl
      ? tlsConnect({ host, port, ...(isIP(host) ? {} : { servername: host }), ...ssl }, onConnect)
      : netConnect({ host, port }, onConnect);
    socket.setKeepAlive(true, 60_000);
    this.kafkaSockets.add(socket);
    socket.once('close', () => this.kafkaSockets.delete(socket));
    return socket;
  };

  private async channel(
    cube: string,
    spec: CubeSpec,
    namespace: string | undefined,
    cubeUid: string | undefined,
  ): Promise<CubeChannel> {
    return new CubeChannel({
      cube,
      ...(namespace ? { namespace } : {}),
      cubeUid,
      spec,
      replicaSet: this.config.replicaSet,
      receiverId: this.config.id,
      dataDir: this.config.dataDir,
      deepStorage: await this.deepStorage(),
      handOffRetry: { initialMs: 1_000, maxMs: this.config.handOffRetryMaxMs },
      kafka: await this.kafkaFor(spec.source, namespace),
      metrics: this.metrics,
      logger: this.logger.child({
        cube,
        namespace: namespace ?? defaultCubeNamespace,
        replicaSet: this.config.replicaSet,
      }),
      flushIntervalMs: this.config.flushIntervalMs,
      idleTimeoutMs: this.config.idleTimeoutMs,
      handedOffRetentionMs: this.config.handedOffRetentionMs,
    });
  }

  /**
   * Restores every cube found in the data directory and resumes consuming. The cubes open side by
   * side, and one that cannot open (a checkpoint it cannot read) is logged and left closed — its
   * next assign opens it again — rather than keeping the others down; a cube whose brokers are
   * unreachable opens, and its consumer reports `failed` and retries.
   */
  async start(): Promise<void> {
    const { moved, problems } = migrateCubeDirectories(this.config.dataDir);
    for (const { from, to } of moved)
      this.logger.info('moved a cube directory of before namespaces into its namespace', {
        from,
        namespace: to.namespace,
        cube: to.name,
      });
    for (const { dir, error } of problems)
      this.logger.error('cannot move a cube directory of before namespaces; left where it is', {
        dir,
        error,
      });
    const keys = listCubeDirectories(this.config.dataDir);
    const opened = await Promise.allSettled(keys.map((key) => this.restoreCube(key)));
    opened.forEach((result, i) => {
      if (result.status === 'rejected') {
        this.logger.error('cannot restore a cube; the others go on, and its next assign retries', {
          namespace: keys[i]?.namespace,
          cube: keys[i]?.name,
          error: (result.reason as Error).message,
        });
      }
    });
    this.ready = true;
    this.logger.info('receiver started', {
      cubes: [...this.cubes.keys()].join(','),
      receiver: this.config.id,
    });
  }

  private async restoreCube(key: CubeKey): Promise<void> {
    const spec = CubeChannel.readSpec(this.config.dataDir, key);
    if (!spec) return;
    const where = { namespace: key.namespace, cube: key.name };
    if (spec.replicaSet !== this.config.replicaSet) {
      this.logger.warn('data directory belongs to another replica set; leaving that cube alone', {
        ...where,
        replicaSet: spec.replicaSet,
      });
      return;
    }
    // A checkpoint that names no namespace is of before namespaces: under `default` it waits for
    // the namespace its next assign names; elsewhere it was being adopted by the one it is in.
    const namespace =
      spec.namespace ?? (key.namespace === defaultCubeNamespace ? undefined : key.namespace);
    if (namespace !== undefined && namespace !== key.namespace) {
      this.logger.warn('checkpoint names another namespace than its directory; leaving it alone', {
        ...where,
        checkpointNamespace: namespace,
      });
      return;
    }
    // The channel's spec is compared with later assign requests: source and schema only.
    const channel = await this.channel(
      key.name,
      { source: spec.source, schema: spec.schema },
      namespace,
      spec.cubeUid,
    );
    await channel.open();
    this.cubes.set(cubeKeyString(key), channel);
  }

  /**
   * Runs `step` after every earlier assign or unassign of a cube of that name has finished: two
   * first assigns of a new cube at once (an operator retrying, or two operators) must open one
   * channel over its data directory, not two. By name, not by namespace too: a cube of before
   * namespaces, kept under `default`, moves to the namespace its first assign names.
   */
  private exclusively<T>(cube: string, step: () => Promise<T>): Promise<T> {
    const next = (this.cubeLocks.get(cube) ?? Promise.resolve()).then(step, step);
    const settled = next.catch(() => undefined);
    this.cubeLocks.set(cube, settled);
    void settled.then(() => {
      if (this.cubeLocks.get(cube) === settled) this.cubeLocks.delete(cube);
    });
    return next;
  }

  /** Whether `key` is assigned to this receiver. */
  holds(key: CubeKey): boolean {
    return this.cubes.has(cubeKeyString(key));
  }

  get(key: CubeKey): CubeChannel {
    const channel = this.cubes.get(cubeKeyString(key));
    if (!channel)
      throw new ChannelError(
        'NotFound',
        `cube ${key.name} of namespace ${key.namespace} is not assigned to receiver ${this.config.id}`,
      );
    return channel;
  }

  /** `checked`: checkAssign ran for this very request already (the server's, before the term). */
  assign(key: CubeKey, body: AssignCubeRequest, checked = false): Promise<CubeStatus> {
    return this.exclusively(key.name, () => this.assignNow(key, body, checked));
  }

  /**
   * Throws when `key` cannot be assigned here as `body` says (another namespace or replica set, a
   * source naming Secrets the CubeAssignment does not): checked before the call's leader term is
   * admitted, and again by the assign itself.
   */
  async checkAssign(key: CubeKey, body: AssignCubeRequest): Promise<void> {
    const request = assignCubeRequest.parse(body);
    const { namespace, name: cube } = key;
    if (request.namespace !== undefined && request.namespace !== namespace) {
      throw new ChannelError(
        'Invalid',
        `the request names namespace ${request.namespace}, its path namespace ${namespace}: assign through /v1/namespaces/${request.namespace}/cubes/${cube}`,
        'namespace',
      );
    }
    if (request.replicaSet !== this.config.replicaSet) {
      throw new ChannelError(
        'Conflict',
        `receiver ${this.config.id} belongs to replica set ${this.config.replicaSet}, not ${request.replicaSet}`,
        'replicaSet',
      );
    }
    await checkAssignedSource(key, request.source, this.readAssignedSource);
  }

  private async assignNow(
    key: CubeKey,
    body: AssignCubeRequest,
    checked: boolean,
  ): Promise<CubeStatus> {
    if (!checked) await this.checkAssign(key, body);
    const request = assignCubeRequest.parse(body);
    const { namespace, name: cube } = key;
    let channel = this.cubes.get(cubeKeyString(key));
    const spec: CubeSpec = { source: request.source, schema: request.schema };
    // A cube restored from a checkpoint of before namespaces waits under `default` for the
    // namespace its first assign names, and moves there with its data.
    const waiting = this.cubes.get(cubeKeyString({ namespace: defaultCubeNamespace, name: cube }));
    if (!channel && waiting && waiting.namespace === undefined) channel = waiting;
    if (channel && channel.namespace !== namespace) {
      channel = await this.replaceChannel(channel, channel.spec, namespace);
    }
    if (channel && JSON.stringify(channel.spec) !== JSON.stringify(spec)) {
      if (
        channel.spec.source.topic !== spec.source.topic ||
        JSON.stringify(channel.spec.schema) !== JSON.stringify(spec.schema)
      ) {
        // The CRD refuses such edits; a request with them comes from a stale or foreign caller.
        throw new ChannelError(
          'Conflict',
          `cube ${cube} is assigned here with a different topic or schema; its stored segments mean something else — use a new cube name, or unassign it first`,
          channel.spec.source.topic !== spec.source.topic ? 'source.topic' : 'schema',
        );
      }
      channel = await this.replaceChannel(channel, spec, namespace);
      this.logger.info('cube source changed; consuming through the new source', {
        namespace,
        cube,
        brokers: spec.source.brokers.join(','),
      });
    }
    if (!channel) {
      channel = await this.channel(cube, spec, namespace, request.cubeUid);
      await channel.open();
      this.cubes.set(cubeKeyString(key), channel);
    } else if (request.cubeUid !== undefined) channel.adoptCubeUid(request.cubeUid);
    return channel.assign(request.partitions);
  }

  /**
   * Another way to the same topic (brokers, starting offsets), or a namespace adopted: the channel
   * is closed — flushed and checkpointed — and opened again from that checkpoint with a Kafka
   * client for the new source. Positions, epochs, pauses and segments carry over; nothing is read
   * twice or skipped. A namespace adopted moves the cube's directory there, and a consumer group
   * named after the old namespace is deleted.
   */
  private async replaceChannel(
    channel: CubeChannel,
    spec: CubeSpec,
    namespace: string,
  ): Promise<CubeChannel> {
    const from = channel.key;
    const to: CubeKey = { namespace, name: channel.cube };
    const moves = cubeKeyString(from) !== cubeKeyString(to);
    if (moves) {
      try {
        assertPlaceFree(this.config.dataDir, to);
      } catch (error) {
        // Data of the cube of that namespace this receiver could not restore (its log says why).
        throw new ChannelError(
          'Conflict',
          `cube ${to.name} of namespace ${to.namespace} cannot take the data of before namespaces held here under ${from.namespace}: ${(error as Error).message}`,
          'namespace',
        );
      }
    }
    await channel.close();
    if (channel.namespace !== namespace) {
      if (consumerGroupId(namespace, channel.cube, this.config.id) !== channel.consumerGroup)
        await this.deleteConsumerGroup(channel);
      // Its series name the old namespace (none): the new channel exports them under the new one.
      channel.removeMetrics();
      this.cubes.delete(cubeKeyString(from));
      if (moves) moveCubeDirectory(this.config.dataDir, from, to);
      this.logger.info('a cube of before namespaces adopted the namespace its assign names', {
        namespace,
        cube: channel.cube,
      });
    }
    const next = await this.channel(channel.cube, spec, namespace, channel.cubeUid);
    await next.open();
    this.cubes.set(cubeKeyString(to), next);
    return next;
  }

  /**
   * A closed channel's consumer group, deleted from the broker. A failure is logged, not thrown:
   * the cube is gone from here either way, and its group is then left for an operator to delete.
   */
  private async deleteConsumerGroup(channel: CubeChannel): Promise<void> {
    try {
      await channel.deleteConsumerGroup();
    } catch (error) {
      this.logger.warn('cannot delete the consumer group of a cube that left this receiver', {
        namespace: channel.key.namespace,
        cube: channel.cube,
        group: channel.consumerGroup,
        error: (error as Error).message,
      });
    }
  }

  /**
   * A fence of another replica set of the cube (hand-off-commit.ts): a failover's, of a lost set,
   * or a move's stop fence (`from`). Needs deep storage only, not the cube, which this receiver
   * may not hold yet. The set's commits are refused from the fence on; the answer is what it had
   * committed of the fenced partitions.
   */
  async fence(key: CubeKey, body: unknown): Promise<FenceResponse> {
    const request = fenceRequest.parse(body);
    if (request.replicaSet === this.config.replicaSet)
      throw new ChannelError(
        'Conflict',
        `replica set ${request.replicaSet} is this receiver's own: a fence is written by a receiver of another set`,
        'replicaSet',
      );
    const { committed, records } = await fenceReplicaSet({
      storage: await this.deepStorage(),
      cube: { namespace: key.namespace, cube: key.name },
      replicaSet: request.replicaSet,
      id: request.id,
      partitions: request.partitions,
      from: request.from,
      by: this.config.id,
      graceMs: request.graceMs ?? 5_000,
      // The operator's word, else the cube as this receiver holds it (an operator before uids).
      cubeUid: request.cubeUid ?? this.cubes.get(cubeKeyString(key))?.cubeUid,
    });
    this.logger.warn(
      request.from ? 'replica set fenced from stop offsets' : 'replica set fenced for a failover',
      {
        cube: key.name,
        namespace: key.namespace,
        fenced: request.replicaSet,
        fence: request.id,
        ...(request.from ? { from: request.from } : {}),
        records,
      },
    );
    return { committed: rangeMapToJson(committed), records };
  }

  /** Drops a cube; refused while it holds data not yet handed off, unless forced. */
  unassign(key: CubeKey, force: boolean): Promise<void> {
    return this.exclusively(key.name, () => this.unassignNow(key, force));
  }

  private async unassignNow(key: CubeKey, force: boolean): Promise<void> {
    const channel = this.get(key);
    if (!force && (channel.hasLivePartitions() || !channel.allHandedOff())) {
      throw new ChannelError(
        'Conflict',
        `cube ${key.name} of namespace ${key.namespace} still has ${channel.hasLivePartitions() ? 'assigned partitions' : 'segments not handed off'}; release and seal it first, or force`,
      );
    }
    await channel.close();
    await this.deleteConsumerGroup(channel);
    channel.removeLocalData();
    this.cubes.delete(cubeKeyString(key));
  }

  status(): ReceiverStatus {
    return {
      receiver: this.config.id,
      replicaSet: this.config.replicaSet,
      cubes: [...this.cubes.values()].map((c) => c.status()),
    };
  }

  /** Every cube with its segments counted by state: what the operator needs, whatever their number. */
  summaries(): CubeSummaries {
    return {
      receiver: this.config.id,
      replicaSet: this.config.replicaSet,
      cubes: [...this.cubes.values()].map((c) => c.summary()),
    };
  }

  async stop(): Promise<void> {
    this.ready = false;
    clearInterval(this.secretRefresh);
    // Side by side: a receiver holding hundreds of cubes closed them one by one in over 30 s (each
    // close waits for its consumer's fetch and leaves its group), past a pod's grace period.
    const channels = [...this.cubes.values()];
    await Promise.all(
      Array.from({ length: Math.min(closeConcurrency, channels.length) }, async () => {
        for (let c = channels.shift(); c; c = channels.shift()) await c.close();
      }),
    );
    if (this.deepStoragePromise) (await this.deepStoragePromise).close();
    await Promise.all([...this.kafkaClients.values()].map((kafka) => closeFetchSession(kafka)));
    // With an error, not quietly: kafkajs then disconnects the connection, which stops its
    // request-timeout timer; a socket merely destroyed would leave that timer running.
    for (const socket of this.kafkaSockets) {
      socket.destroy(
        new Error('receiver stopped; closing a connection its Kafka client left open'),
      );
    }
  }
}
