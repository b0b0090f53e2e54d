// A single-node Apache Kafka (KRaft, broker + controller) from Maven Central jars: the classpath
// is resolved once with Maven into the cache, storage is formatted with kafka.tools.StorageTool
// and the broker runs as `java kafka.Kafka` on free loopback ports.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Socket } from 'node:net';
import { randomBytes } from 'node:crypto';
import { settings } from './settings.ts';
import { step } from './progress.ts';
import { freePort, runCommand, startService, waitForService } from './processes.ts';

export interface KafkaBroker {
  version: string;
  /** `host:port` of the PLAINTEXT broker listener (never the controller one). */
  bootstrap: string;
  ports: KafkaPorts;
  pid: number;
  logFile: string;
  dataDir: string;
}

const isKafka4 = (version: string): boolean => Number(version.split('.')[0]) >= 4;

function loggingDependencies(version: string): string {
  // Kafka's POM carries no logging binding: 3.x logs through reload4j, 4.x through log4j2.
  const dep = (g: string, a: string, v: string): string =>
    `<dependency><groupId>${g}</groupId><artifactId>${a}</artifactId><version>${v}</version></dependency>`;
  return isKafka4(version)
    ? dep('org.apache.logging.log4j', 'log4j-core', '2.24.3') +
        dep('org.apache.logging.log4j', 'log4j-slf4j2-impl', '2.24.3')
    : dep('org.slf4j', 'slf4j-reload4j', '1.7.36');
}

/** Resolves the broker's classpath with Maven (cached per version) and returns it. */
export async function resolveKafkaClasspath(version = settings.kafkaVersion): Promise<string> {
  const dir = join(settings.cacheDir, `kafka-${version}`);
  const classpathFile = join(dir, 'classpath.txt');
  if (existsSync(classpathFile)) return readFileSync(classpathFile, 'utf8').trim();
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, 'pom.xml'),
    `<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>io.streamcube.testenv</groupId><artifactId>kafka-classpath</artifactId><version>1</version>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>${version}</version></dependency>
    ${loggingDependencies(version)}
  </dependencies>
</project>
`,
  );
  await step(`resolving Apache Kafka ${version} jars from Maven Central`, (heartbeat) =>
    runCommand(
      'mvn',
      ['-B', 'dependency:build-classpath', `-Dmdep.outputFile=${classpathFile}.tmp`],
      {
        cwd: dir,
        onLine: (line) => {
          if (line.includes('Downloaded')) heartbeat(line.replace(/^.*Downloaded from \S+ /, ''));
        },
      },
    ),
  );
  const classpath = readFileSync(`${classpathFile}.tmp`, 'utf8').trim();
  writeFileSync(classpathFile, classpath);
  return classpath;
}

function writeLoggingConfig(dir: string, version: string): string[] {
  if (isKafka4(version)) {
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

export interface KafkaPorts {
  broker: number;
  controller: number;
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
  const [brokerPort, controllerPort] = ports
    ? [ports.broker, ports.controller]
    : [await freePort(), await freePort()];
  const dataDir = join(dir, 'data');
  const propsFile = join(dir, 'server.properties');
  writeFileSync(
    propsFile,
    [
      'process.roles=broker,controller',
      'node.id=1',
      `controller.quorum.voters=1@127.0.0.1:${controllerPort}`,
      `listeners=PLAINTEXT://${host}:${brokerPort},CONTROLLER://127.0.0.1:${controllerPort}`,
      `advertised.listeners=PLAINTEXT://${host}:${brokerPort}`,
      'controller.listener.names=CONTROLLER',
      'listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT',
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
  const logging = writeLoggingConfig(dir, version);
  const java = ['-Xms256m', '-Xmx1g', '-XX:+UseG1GC', '-Djava.awt.headless=true', ...logging];
  const logFile = join(dir, 'kafka.log');
  // A cluster id is a UUID in URL-safe base64, as `kafka-storage random-uuid` prints; like
  // Kafka's own Uuid.randomUuid, never one starting with '-', which the tool reads as an option.
  let clusterId = randomBytes(16).toString('base64url');
  while (clusterId.startsWith('-')) clusterId = randomBytes(16).toString('base64url');
  // Storage formatted by an earlier run is that broker's data: keep it.
  if (!existsSync(join(dataDir, 'meta.properties')))
    await runCommand('java', [
      ...java,
      '-cp',
      classpath,
      'kafka.tools.StorageTool',
      'format',
      '-t',
      clusterId,
      '-c',
      propsFile,
    ]);
  // A restarted broker appends to the log of the last run: only what it writes now tells.
  const logStart = existsSync(logFile) ? readFileSync(logFile).length : 0;
  const pid = startService('java', [...java, '-cp', classpath, 'kafka.Kafka', propsFile], logFile);
  const broker = {
    version,
    bootstrap: `${host}:${brokerPort}`,
    ports: { broker: brokerPort, controller: controllerPort },
    pid,
    logFile,
    dataDir,
  };
  await waitForService(
    `Kafka ${version} broker`,
    async () =>
      (await canConnect(host, brokerPort)) &&
      // The listener accepts connections before the broker has caught up with the metadata log.
      /Kafka Server started|\[KafkaRaftServer nodeId=1\] Kafka Server started/.test(
        readFileSync(logFile).subarray(logStart).toString('utf8'),
      ),
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
