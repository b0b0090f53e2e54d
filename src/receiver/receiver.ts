// A receiver process: the cubes it serves (one CubeChannel each), restored from disk at start.
import { existsSync, readdirSync } from 'node:fs';
import { type Socket, connect as netConnect, isIP } from 'node:net';
import { join } from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import type { ISocketFactory, Kafka } from 'kafkajs';
import { createKafka } from '../kafka/client.ts';
import { type SecretReader, kafkaSecurityOptions, securityKey } from '../kafka/source-security.ts';
import type { KafkaSource } from '../api/cube.ts';
import { defaultCubeNamespace } from '../kafka/consumer-group.ts';
import type { Logger } from '../observability/logger.ts';
import type {
  AssignCubeRequest,
  CubeStatus,
  CubeSummaries,
  ReceiverStatus,
} from '../protocol/admin-api.ts';
import { assignCubeRequest, cubeSummaryOf } from '../protocol/admin-api.ts';
import type { ReceiverConfig } from './config.ts';
import { ChannelError } from './channel-error.ts';
import { CubeChannel, type CubeSpec } from './cube-channel.ts';
import { type DeepStorage, openDeepStorage } from './deep-storage.ts';
import { LeaderTerms } from './leader-terms.ts';
import type { ReceiverMetrics } from './metrics.ts';

export class Receiver {
  readonly config: ReceiverConfig;
  readonly metrics: ReceiverMetrics;
  /** The highest leader term seen per cube: calls from a deposed operator are refused. */
  readonly leaderTerms: LeaderTerms;
  private readonly logger: Logger;
  private readonly cubes = new Map<string, CubeChannel>();
  /** The last assign or unassign of each cube, which the next one waits for (see `exclusively`). */
  private readonly cubeLocks = new Map<string, Promise<unknown>>();
  private readonly kafkaClients = new Map<string, Kafka>();
  /** Sockets of the Kafka clients still open, closed for good at stop. */
  private readonly kafkaSockets = new Set<Socket>();
  private ready = false;
  private deepStoragePromise: Promise<DeepStorage> | undefined;

  constructor(config: ReceiverConfig, metrics: ReceiverMetrics, logger: Logger) {
    this.config = config;
    this.metrics = metrics;
    this.logger = logger;
    this.leaderTerms = new LeaderTerms({
      dataDir: config.dataDir,
      onStale: (cube) => {
        metrics.staleLeaderRequests.inc({ cube });
        logger.warn('refused a call from a stale leader term', { cube });
      },
      onTerm: (cube, term) => {
        metrics.leaderTerm.set({ cube }, term);
        metrics.staleLeaderRequests.inc({ cube }, 0);
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
    const key = `${source.brokers.join(',')}${secured ? `|${namespace ?? defaultCubeNamespace}|${secured}` : ''}`;
    let kafka = this.kafkaClients.get(key);
    if (!kafka) {
      const security = secured
        ? await kafkaSecurityOptions(
            source,
            namespace ?? defaultCubeNamespace,
            await this.secretReader(),
          )
        : {};
      kafka = createKafka({
        clientId: `streamcube-receiver-${this.config.id}`,
        brokers: source.brokers,
        socketFactory: this.trackedSocket,
        ...security,
      });
      this.kafkaClients.set(key, kafka);
    }
    return kafka;
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
  ): Promise<CubeChannel> {
    return new CubeChannel({
      cube,
      ...(namespace ? { namespace } : {}),
      spec,
      replicaSet: this.config.replicaSet,
      receiverId: this.config.id,
      dataDir: this.config.dataDir,
      deepStorage: await this.deepStorage(),
      handOffRetry: { initialMs: 1_000, maxMs: this.config.handOffRetryMaxMs },
      kafka: await this.kafkaFor(spec.source, namespace),
      metrics: this.metrics,
      logger: this.logger.child({ cube, replicaSet: this.config.replicaSet }),
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
    const dir = join(this.config.dataDir, 'cubes');
    const names = existsSync(dir) ? readdirSync(dir) : [];
    const opened = await Promise.allSettled(names.map((cube) => this.restoreCube(cube)));
    opened.forEach((result, i) => {
      if (result.status === 'rejected') {
        this.logger.error('cannot restore a cube; the others go on, and its next assign retries', {
          cube: names[i],
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

  private async restoreCube(cube: string): Promise<void> {
    const spec = CubeChannel.readSpec(this.config.dataDir, cube);
    if (!spec) return;
    if (spec.replicaSet !== this.config.replicaSet) {
      this.logger.warn('data directory belongs to another replica set; leaving that cube alone', {
        cube,
        replicaSet: spec.replicaSet,
      });
      return;
    }
    // The channel's spec is compared with later assign requests: source and schema only.
    const channel = await this.channel(
      cube,
      { source: spec.source, schema: spec.schema },
      spec.namespace,
    );
    await channel.open();
    this.cubes.set(cube, channel);
  }

  /**
   * Runs `step` after every earlier assign or unassign of `cube` has finished: two first assigns
   * of a new cube at once (an operator retrying, or two operators) must open one channel over
   * its data directory, not two.
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

  get(cube: string): CubeChannel {
    const channel = this.cubes.get(cube);
    if (!channel)
      throw new ChannelError(
        'NotFound',
        `cube ${cube} is not assigned to receiver ${this.config.id}`,
      );
    return channel;
  }

  assign(cube: string, body: AssignCubeRequest): Promise<CubeStatus> {
    return this.exclusively(cube, () => this.assignNow(cube, body));
  }

  private async assignNow(cube: string, body: AssignCubeRequest): Promise<CubeStatus> {
    const request = assignCubeRequest.parse(body);
    if (request.replicaSet !== this.config.replicaSet) {
      throw new ChannelError(
        'Conflict',
        `receiver ${this.config.id} belongs to replica set ${this.config.replicaSet}, not ${request.replicaSet}`,
        'replicaSet',
      );
    }
    let channel = this.cubes.get(cube);
    const spec: CubeSpec = { source: request.source, schema: request.schema };
    const namespace = request.namespace ?? channel?.namespace ?? defaultCubeNamespace;
    if (channel && channel.namespace !== namespace) {
      if (channel.namespace !== undefined) {
        // Cubes are still keyed by name alone here: two namespaces' cubes of one name would mix.
        throw new ChannelError(
          'Conflict',
          `cube ${cube} of namespace ${channel.namespace} is assigned to receiver ${this.config.id}; a cube of namespace ${namespace} cannot have the same name here`,
          'namespace',
        );
      }
      // Restored from a checkpoint written before receivers knew namespaces: adopt the one named.
      channel = await this.replaceChannel(cube, channel, channel.spec, namespace);
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
      channel = await this.replaceChannel(cube, channel, spec, namespace);
      this.logger.info('cube source changed; consuming through the new source', {
        cube,
        brokers: spec.source.brokers.join(','),
      });
    }
    if (!channel) {
      channel = await this.channel(cube, spec, namespace);
      await channel.open();
      this.cubes.set(cube, channel);
    }
    return channel.assign(request.partitions);
  }

  /**
   * Another way to the same topic (brokers, starting offsets), or a namespace adopted: the channel
   * is closed — flushed and checkpointed — and opened again from that checkpoint with a Kafka
   * client for the new source. Positions, epochs, pauses and segments carry over; nothing is read
   * twice or skipped. A consumer group named after the old namespace is deleted.
   */
  private async replaceChannel(
    cube: string,
    channel: CubeChannel,
    spec: CubeSpec,
    namespace: string,
  ): Promise<CubeChannel> {
    await channel.close();
    if (channel.namespace !== namespace) {
      await this.deleteConsumerGroup(channel);
      // Its series name the old namespace (none): the new channel exports them under the new one.
      channel.removeMetrics();
    }
    const next = await this.channel(cube, spec, namespace);
    await next.open();
    this.cubes.set(cube, next);
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
        cube: channel.cube,
        group: channel.consumerGroup,
        error: (error as Error).message,
      });
    }
  }

  /** Drops a cube; refused while it holds data not yet handed off, unless forced. */
  unassign(cube: string, force: boolean): Promise<void> {
    return this.exclusively(cube, () => this.unassignNow(cube, force));
  }

  private async unassignNow(cube: string, force: boolean): Promise<void> {
    const channel = this.get(cube);
    if (!force && (channel.hasLivePartitions() || !channel.allHandedOff())) {
      throw new ChannelError(
        'Conflict',
        `cube ${cube} still has ${channel.hasLivePartitions() ? 'assigned partitions' : 'segments not handed off'}; release and seal it first, or force`,
      );
    }
    await channel.close();
    await this.deleteConsumerGroup(channel);
    channel.removeLocalData();
    this.cubes.delete(cube);
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
      cubes: [...this.cubes.values()].map((c) => cubeSummaryOf(c.status())),
    };
  }

  async stop(): Promise<void> {
    this.ready = false;
    for (const channel of this.cubes.values()) await channel.close();
    if (this.deepStoragePromise) (await this.deepStoragePromise).close();
    // With an error, not quietly: kafkajs then disconnects the connection, which stops its
    // request-timeout timer; a socket merely destroyed would leave that timer running.
    for (const socket of this.kafkaSockets) {
      socket.destroy(
        new Error('receiver stopped; closing a connection its Kafka client left open'),
      );
    }
  }
}
