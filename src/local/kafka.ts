// A single-node Apache Kafka (KRaft, broker + controller) from Maven Central jars: the classpath
// is resolved once with Maven into the cache, storage is formatted with kafka.tools.StorageTool
// and the broker runs as `java kafka.Kafka` on free loopback ports.
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { Socket } from 'node:net';
import { randomBytes } from 'node:crypto';
import { logLevel } from 'kafkajs';
import { createKafka } from '../../src/kafka/client.ts';
import { settings } from './settings.ts';
import { step } from './progress.ts';
import { recordedPorts, runCommand, startService, waitForService } from './processes.ts';
import {
  type KafkaAuth,
  brokerUsers,
  keystorePem,
  makeBrokerCertificates,
  saslSslProperties,
  scramFormatArguments,
} from './kafka-auth.ts';

export interface KafkaBroker {
  version: string;
  /** `host:port` of the PLAINTEXT broker listener (never the controller one). */
  bootstrap: string;
  ports: KafkaPorts;
  /** The SASL_SSL listener: its address, CA and users (absent in a state file of an older run). */
  auth?: KafkaAuth;
  pid: number;
  logFile: string;
  dataDir: string;
}

export interface MavenArtifact {
  groupId: string;
  artifactId: string;
  version: string;
}

function pomWith(artifacts: MavenArtifact[]): string {
  const deps = artifacts.map(
    (a) =>
      `    <dependency><groupId>${a.groupId}</groupId><artifactId>${a.artifactId}</artifactId><version>${a.version}</version></dependency>`,
  );
  return `<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>io.streamcube.testenv</groupId><artifactId>kafka-classpath</artifactId><version>1</version>
  <dependencies>
${deps.join('\n')}
  </dependencies>
</project>
`;
}

/** The version of `artifactId` among the jars of a resolved classpath, if it is there. */
function jarVersion(classpath: string, artifactId: string): string | undefined {
  for (const jar of classpath.split(':')) {
    const name = basename(jar);
    if (name.startsWith(`${artifactId}-`) && name.endsWith('.jar'))
      return name.slice(artifactId.length + 1, -'.jar'.length);
  }
  return undefined;
}

const isKafka4 = (version: string): boolean => Number(version.split('.')[0]) >= 4;

/**
 * Kafka's POM carries the slf4j API but no binding, and without one the broker logs nothing. The
 * binding has to speak the slf4j API that Maven actually resolves: Kafka 3.9.2 and 4.0 … 4.4 (POMs
 * of 4.0.0, 4.1.1, 4.2.0, 4.3.1, 4.4.0 checked) resolve slf4j-api 1.7.36, beside which an slf4j 2
 * binding (`log4j-slf4j2-impl`) is not found and slf4j falls back to its no-op logger. Kafka 4.x
 * logs through log4j2 (KIP-653) and gets the log4j2 binding for the resolved slf4j API, at the
 * log4j version Kafka's own POM asks for (4.1 on; 4.0's names none: 2.24.3). 3.x gets reload4j.
 * slf4j-api is pinned to the version Kafka resolves so that the binding cannot move it.
 */
export function loggingArtifacts(kafkaClasspath: string, kafkaVersion: string): MavenArtifact[] {
  const slf4j = jarVersion(kafkaClasspath, 'slf4j-api');
  if (!slf4j) throw new Error(`Kafka ${kafkaVersion} resolves no slf4j-api: cannot pick a binding`);
  const api: MavenArtifact = { groupId: 'org.slf4j', artifactId: 'slf4j-api', version: slf4j };
  if (!isKafka4(kafkaVersion))
    return [api, { groupId: 'org.slf4j', artifactId: 'slf4j-reload4j', version: slf4j }];
  const log4j = jarVersion(kafkaClasspath, 'log4j-core') ?? '2.24.3';
  const log4jArtifact = (artifactId: string): MavenArtifact => ({
    groupId: 'org.apache.logging.log4j',
    artifactId,
    version: log4j,
  });
  const slf4j2 = Number(slf4j.split('.')[0]) >= 2;
  return [
    api,
    log4jArtifact('log4j-core'),
    log4jArtifact(slf4j2 ? 'log4j-slf4j2-impl' : 'log4j-slf4j-impl'),
  ];
}

/** Whether a resolved classpath logs through log4j2 (else reload4j, the log4j 1 API). */
const logsThroughLog4j2 = (classpath: string): boolean =>
  jarVersion(classpath, 'log4j-core') !== undefined;

// Bumped when the way the classpath is resolved changes, so that a cached classpath resolved
// the old way (for 4.x: with a binding slf4j could not load) is resolved again.
const classpathRecipe = 'kafka + slf4j binding matching the resolved slf4j-api (2)';

async function mavenClasspath(
  dir: string,
  pomFile: string,
  artifacts: MavenArtifact[],
  heartbeat: (detail: string) => void,
): Promise<string> {
  writeFileSync(join(dir, pomFile), pomWith(artifacts));
  // Another process may resolve the same version at the same time: never share a scratch file.
  const output = join(dir, `${pomFile}.${process.pid}.classpath`);
  await runCommand(
    'mvn',
    ['-B', '-f', pomFile, 'dependency:build-classpath', `-Dmdep.outputFile=${output}`],
    {
      cwd: dir,
      onLine: (line) => {
        if (line.includes('Downloaded')) heartbeat(line.replace(/^.*Downloaded from \S+ /, ''));
      },
    },
  );
  const classpath = readFileSync(output, 'utf8').trim();
  rmSync(output, { force: true });
  return classpath;
}

/**
 * Resolves the broker's classpath with Maven (cached per version in
 * `<cache>/kafka-<version>/classpath.txt`, which other tools read too) and returns it. `pom.xml`
 * beside it is the final project, for `mvn dependency:tree`.
 */
export async function resolveKafkaClasspath(version = settings.kafkaVersion): Promise<string> {
  const dir = join(settings.cacheDir, `kafka-${version}`);
  const classpathFile = join(dir, 'classpath.txt');
  const recipeFile = join(dir, 'classpath.recipe');
  if (
    existsSync(classpathFile) &&
    existsSync(recipeFile) &&
    readFileSync(recipeFile, 'utf8').trim() === classpathRecipe
  )
    return readFileSync(classpathFile, 'utf8').trim();
  mkdirSync(dir, { recursive: true });
  const kafka = { groupId: 'org.apache.kafka', artifactId: 'kafka_2.13', version };
  const classpath = await step(
    `resolving Apache Kafka ${version} jars from Maven Central`,
    async (heartbeat) => {
      const kafkaOnly = await mavenClasspath(dir, 'kafka-only.pom.xml', [kafka], heartbeat);
      const logging = loggingArtifacts(kafkaOnly, version);
      const full = await mavenClasspath(dir, 'pom.xml', [kafka, ...logging], heartbeat);
      const resolvedApi = jarVersion(full, 'slf4j-api');
      if (resolvedApi !== logging[0]?.version)
        throw new Error(
          `Kafka ${version}: slf4j-api ${logging[0]?.version} pinned but ${resolvedApi} resolved (${dir}/pom.xml)`,
        );
      return full;
    },
  );
  // Written whole and renamed: a reader never sees half a classpath.
  const tmp = `${classpathFile}.${process.pid}.tmp`;
  writeFileSync(tmp, classpath);
  renameSync(tmp, classpathFile);
  writeFileSync(recipeFile, `${classpathRecipe}\n`);
  return classpath;
}

function writeLoggingConfig(dir: string, classpath: string): string[] {
  if (logsThroughLog4j2(classpath)) {
    const file = join(dir, 'log4j2.properties');
    writeFileSync(
      file,
      [
        'appender.stdout.type = Console',
        'appender.stdout.name = STDOUT',
        'appender.stdout.layout.type = PatternLayout',
        'appender.stdout.layout.pattern = [%d] %p %m (%c)%n',
        'rootLogger.level = INFO',
        'rootLogger.appenderRef.stdout.ref = STDOUT',
        '',
      ].join('\n'),
    );
    return [`-Dlog4j2.configurationFile=${file}`];
  }
  const file = join(dir, 'log4j.properties');
  writeFileSync(
    file,
    [
      'log4j.rootLogger=INFO, stdout',
      'log4j.appender.stdout=org.apache.log4j.ConsoleAppender',
      'log4j.appender.stdout.layout=org.apache.log4j.PatternLayout',
      'log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n',
      '',
    ].join('\n'),
  );
  return [`-Dlog4j.configuration=file:${file}`];
}

function canConnect(host: string, port: number): Promise<boolean> {
  return new Promise((resolvePromise) => {
    const socket = new Socket();
    socket.once('connect', () => {
      socket.destroy();
      resolvePromise(true);
    });
    socket.once('error', () => resolvePromise(false));
    socket.connect(port, host);
  });
}

const nodeId = 1;

/**
 * Whether the broker answers a Metadata request on its PLAINTEXT listener and lists itself among
 * the live brokers, which a KRaft broker does only once it is unfenced and serving. One attempt,
 * bounded in time: the caller polls.
 */
async function brokerListsItself(bootstrap: string, id = nodeId): Promise<boolean> {
  const admin = createKafka({
    clientId: 'streamcube-testenv-readiness',
    brokers: [bootstrap],
    logLevel: logLevel.NOTHING,
    connectionTimeout: 1_000,
    requestTimeout: 2_000,
    retry: { retries: 0 },
  }).admin();
  try {
    await admin.connect();
    const cluster = await admin.describeCluster();
    return cluster.brokers.some((b) => b.nodeId === id);
  } finally {
    await admin.disconnect().catch(() => undefined);
  }
}

export interface KafkaPorts {
  broker: number;
  controller: number;
  /** The SASL_SSL listener (a broker started before it existed had none). */
  saslSsl?: number;
}

/**
 * Formats storage in `dir` and starts a broker there; resolves once it serves requests. Given the
 * ports of a broker stopped earlier in the same `dir`, it starts that broker again on its data.
 * `host` is the address it listens on and advertises (pods of the node reach it on the host's
 * end of the node's veth, not on loopback).
 */
export async function startKafka(
  dir: string,
  version = settings.kafkaVersion,
  ports?: KafkaPorts,
  host = '127.0.0.1',
): Promise<KafkaBroker> {
  const classpath = await resolveKafkaClasspath(version);
  mkdirSync(dir, { recursive: true });
  const recorded =
    ports?.saslSsl !== undefined
      ? ports
      : {
          ...(await recordedPorts(
            join(dir, 'ports.json'),
            ports ? ['saslSsl'] : ['broker', 'controller', 'saslSsl'],
          )),
          ...ports,
        };
  const {
    broker: brokerPort,
    controller: controllerPort,
    saslSsl: saslSslPort,
  } = recorded as Required<KafkaPorts>;
  const dataDir = join(dir, 'data');
  const propsFile = join(dir, 'server.properties');
  const certs = await makeBrokerCertificates(join(dir, 'tls'), host);
  const keystoreFile = join(dir, 'tls', 'broker-keystore.pem');
  writeFileSync(keystoreFile, keystorePem(certs.keyFile, certs.certFile));
  writeFileSync(
    propsFile,
    [
      'process.roles=broker,controller',
      `node.id=${nodeId}`,
      `controller.quorum.voters=${nodeId}@127.0.0.1:${controllerPort}`,
      `listeners=PLAINTEXT://${host}:${brokerPort},SASL_SSL://${host}:${saslSslPort},CONTROLLER://127.0.0.1:${controllerPort}`,
      `advertised.listeners=PLAINTEXT://${host}:${brokerPort},SASL_SSL://${host}:${saslSslPort}`,
      'controller.listener.names=CONTROLLER',
      'listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT',
      ...saslSslProperties(keystoreFile),
      'inter.broker.listener.name=PLAINTEXT',
      `log.dirs=${dataDir}`,
      'num.partitions=1',
      'auto.create.topics.enable=false',
      'offsets.topic.replication.factor=1',
      'offsets.topic.num.partitions=8',
      'transaction.state.log.replication.factor=1',
      'transaction.state.log.min.isr=1',
      'group.initial.rebalance.delay.ms=0',
      'log.flush.interval.messages=9223372036854775807',
      '',
    ].join('\n'),
  );
  // A cluster id is a UUID in URL-safe base64, as `kafka-storage random-uuid` prints; like
  // Kafka's own Uuid.randomUuid, never one starting with '-', which the tool reads as an option.
  let clusterId = randomBytes(16).toString('base64url');
  while (clusterId.startsWith('-')) clusterId = randomBytes(16).toString('base64url');
  const running = await launchBroker({
    dir,
    classpath,
    version,
    clusterId,
    formatArguments: scramFormatArguments(),
    host,
    port: brokerPort,
    id: nodeId,
  });
  return {
    ...running,
    ports: { broker: brokerPort, controller: controllerPort, saslSsl: saslSslPort },
    auth: {
      bootstrap: `${host}:${saslSslPort}`,
      caFile: certs.caFile,
      otherCaFile: certs.otherCaFile,
      users: brokerUsers,
    },
  };
}

/**
 * Another broker (`process.roles=broker`, node `id`, PLAINTEXT only) in the cluster of a broker
 * startKafka started, whose controller it joins: for tests of what spans brokers, such as a
 * fetch to each partition's leader. Stopped and removed as startKafka's are.
 */
export async function startJoiningBroker(
  dir: string,
  controller: KafkaBroker,
  id: number,
): Promise<KafkaBroker> {
  const classpath = await resolveKafkaClasspath(controller.version);
  mkdirSync(dir, { recursive: true });
  const { broker: port } = await recordedPorts(join(dir, 'ports.json'), ['broker']);
  const host = controller.bootstrap.slice(0, controller.bootstrap.lastIndexOf(':'));
  const dataDir = join(dir, 'data');
  writeFileSync(
    join(dir, 'server.properties'),
    [
      'process.roles=broker',
      `node.id=${id}`,
      `controller.quorum.voters=${nodeId}@127.0.0.1:${controller.ports.controller}`,
      `listeners=PLAINTEXT://${host}:${port}`,
      `advertised.listeners=PLAINTEXT://${host}:${port}`,
      'controller.listener.names=CONTROLLER',
      'listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT',
      'inter.broker.listener.name=PLAINTEXT',
      `log.dirs=${dataDir}`,
      'auto.create.topics.enable=false',
      'log.flush.interval.messages=9223372036854775807',
      '',
    ].join('\n'),
  );
  const meta = readFileSync(join(controller.dataDir, 'meta.properties'), 'utf8');
  const clusterId = /^cluster\.id=(.+)$/m.exec(meta)?.[1];
  if (!clusterId) throw new Error(`no cluster.id in ${controller.dataDir}/meta.properties`);
  const running = await launchBroker({
    dir,
    classpath,
    version: controller.version,
    clusterId,
    formatArguments: [],
    host,
    port,
    id,
  });
  return { ...running, ports: { broker: port, controller: controller.ports.controller } };
}

/**
 * Formats `dir/data` (unless an earlier run did) and starts the broker of `dir/server.properties`
 * there; resolves once it serves requests.
 */
async function launchBroker(o: {
  dir: string;
  classpath: string;
  version: string;
  clusterId: string;
  formatArguments: string[];
  /** Of its PLAINTEXT listener. */
  host: string;
  port: number;
  id: number;
}): Promise<Omit<KafkaBroker, 'ports'>> {
  const { dir, classpath, version } = o;
  const dataDir = join(dir, 'data');
  const propsFile = join(dir, 'server.properties');
  const logging = writeLoggingConfig(dir, classpath);
  const java = ['-Xms256m', '-Xmx1g', '-XX:+UseG1GC', '-Djava.awt.headless=true', ...logging];
  const logFile = join(dir, 'kafka.log');
  // Storage formatted by an earlier run is that broker's data: keep it.
  if (!existsSync(join(dataDir, 'meta.properties')))
    await runCommand('java', [
      ...java,
      '-cp',
      classpath,
      'kafka.tools.StorageTool',
      'format',
      '-t',
      o.clusterId,
      '-c',
      propsFile,
      ...o.formatArguments,
    ]);
  // A restarted broker appends to the log of the last run: only what it writes now tells.
  const logStart = existsSync(logFile) ? readFileSync(logFile).length : 0;
  const pid = startService('java', [...java, '-cp', classpath, 'kafka.Kafka', propsFile], logFile);
  const broker = { version, bootstrap: `${o.host}:${o.port}`, pid, logFile, dataDir };
  await waitForService(
    `Kafka ${version} broker`,
    async () =>
      (await canConnect(o.host, o.port)) &&
      // The listener accepts connections before the broker has caught up with the metadata log:
      // ready is the broker saying so in its log, or answering Metadata with itself in it.
      (/Kafka Server started/.test(readFileSync(logFile).subarray(logStart).toString('utf8')) ||
        (await brokerListsItself(broker.bootstrap, o.id))),
    broker,
    90_000,
  );
  return broker;
}

/** The version the running broker reports in its own log (AppInfoParser), not the one we asked for. */
export function brokerReportedVersion(broker: KafkaBroker): string | undefined {
  const match = /Kafka version: (\S+)/.exec(readFileSync(broker.logFile, 'utf8'));
  return match?.[1];
}
