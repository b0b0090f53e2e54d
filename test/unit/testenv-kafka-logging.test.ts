// The test environment's Kafka gets the slf4j binding for the slf4j API its own POM resolves: a
// binding for the other slf4j major is not found, and the broker then logs nothing at all.
import { type MavenArtifact, loggingArtifacts } from '../env/kafka.ts';

const jar = (group: string, artifact: string, version: string): string =>
  `/m2/${group.replaceAll('.', '/')}/${artifact}/${version}/${artifact}-${version}.jar`;
const classpath = (...jars: string[]): string =>
  [jar('org.apache.kafka', 'kafka-clients', '4.4.0'), ...jars].join(':');
const slf4jApi = (version: string): string => jar('org.slf4j', 'slf4j-api', version);
const log4jCore = (version: string): string =>
  jar('org.apache.logging.log4j', 'log4j-core', version);
const names = (artifacts: MavenArtifact[]): string[] =>
  artifacts.map((a) => `${a.groupId}:${a.artifactId}:${a.version}`);

test.each<[string, string, string, string[]]>([
  [
    '3.9.2: reload4j for slf4j 1.7',
    '3.9.2',
    classpath(slf4jApi('1.7.36')),
    ['org.slf4j:slf4j-api:1.7.36', 'org.slf4j:slf4j-reload4j:1.7.36'],
  ],
  [
    '4.4.0: the slf4j 1.x binding of log4j2, at the log4j version Kafka resolves',
    '4.4.0',
    classpath(slf4jApi('1.7.36'), log4jCore('2.25.5')),
    [
      'org.slf4j:slf4j-api:1.7.36',
      'org.apache.logging.log4j:log4j-core:2.25.5',
      'org.apache.logging.log4j:log4j-slf4j-impl:2.25.5',
    ],
  ],
  [
    '4.0.2: its POM names no log4j, so log4j2 2.24.3 comes with the binding',
    '4.0.2',
    classpath(slf4jApi('1.7.36')),
    [
      'org.slf4j:slf4j-api:1.7.36',
      'org.apache.logging.log4j:log4j-core:2.24.3',
      'org.apache.logging.log4j:log4j-slf4j-impl:2.24.3',
    ],
  ],
  [
    'a Kafka on slf4j 2: the slf4j 2 binding',
    '4.9.0',
    classpath(slf4jApi('2.0.17'), log4jCore('2.26.0')),
    [
      'org.slf4j:slf4j-api:2.0.17',
      'org.apache.logging.log4j:log4j-core:2.26.0',
      'org.apache.logging.log4j:log4j-slf4j2-impl:2.26.0',
    ],
  ],
])('%s', (_name, version, resolved, expected) => {
  expect(names(loggingArtifacts(resolved, version))).toEqual(expected);
});

test('a Kafka that resolves no slf4j-api is refused, not left without logging', () => {
  expect(() => loggingArtifacts(classpath(), '4.4.0')).toThrow(/no slf4j-api/);
});
