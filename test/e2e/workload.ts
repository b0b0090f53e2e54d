// What the e2e scenario runs on the cluster besides the chart: a producer pod that writes a known
// sequence of events (the ground truth), the CubeAssignment, and the chart's values for the run.
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { schemaInput } from '../support/schemas.ts';
import { config } from './cluster.ts';

const repositoryRoot = resolve(fileURLToPath(new URL('.', import.meta.url)), '..', '..');
export const chart = join(repositoryRoot, 'deploy', 'helm', 'streamcube');

export const workload = {
  topic: `orders-${Date.now().toString(36)}`,
  partitions: 4,
  /** Events the producer writes, `perSecond` a second: the ground truth. */
  events: 3000,
  perSecond: 50,
};

/**
 * Event i of the producer. One event-time window holds them all: nothing seals by time. Written
 * without types or outside names: the producer pod runs this very function's source.
 */
export function eventAt(i: number): { ts: number; country: string; device: string; price: number } {
  return {
    ts: 1767225600000 + (i % 3000000), // 2026-01-01T00:00:00Z
    country: ['de', 'fr', 'jp', 'us'][i % 4] ?? '',
    device: ['ios', 'android', 'web'][(i >> 2) % 3] ?? '',
    price: (i % 10) + 1, // whole numbers: sums are exact in any order
  };
}

/** The totals of events 0 to `events` - 1. */
export function totalsOf(events: number): { events: number; revenue: number } {
  return {
    events,
    revenue: Array.from({ length: events }, (_, i) => eventAt(i).price).reduce((a, b) => a + b, 0),
  };
}

/** What the producers have written once they finish: the first producer's events, then more. */
export const expected = totalsOf(workload.events);

/**
 * A pod (restricted Pod Security) that creates the topic (unless it exists) and writes events
 * `from` to `to` - 1 at a steady rate, then prints the topic's high watermarks.
 */
export function producerPod(name = 'producer', from = 0, to = workload.events): string {
  const script = `
    const { Kafka, logLevel } = require('kafkajs');
    const [brokers, topic, from, total, perSecond, partitions] = process.argv.slice(1);
    const eventAt = ${eventAt.toString()};
    const kafka = new Kafka({ clientId: 'e2e-producer', brokers: [brokers], logLevel: logLevel.WARN });
    (async () => {
      const admin = kafka.admin(); await admin.connect();
      await admin.createTopics({ topics: [{ topic, numPartitions: +partitions }], waitForLeaders: true });
      // Idempotent: a retried batch (say after NOT_LEADER on a partition) is never written twice.
      const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
      await producer.connect();
      console.log('topic ready');
      const batch = Math.max(1, Math.round(+perSecond / 10));
      for (let i = +from; i < +total; i += batch) {
        const messages = [];
        for (let j = i; j < Math.min(+total, i + batch); j++) {
          messages.push({ partition: j % +partitions, value: JSON.stringify(eventAt(j)) });
        }
        await producer.send({ topic, acks: -1, messages });
        await new Promise((r) => setTimeout(r, 100));
      }
      await producer.disconnect();
      const offsets = await admin.fetchTopicOffsets(topic);
      await admin.disconnect();
      console.log('high watermarks ' + JSON.stringify(Object.fromEntries(offsets.map((o) => [o.partition, o.high]))));
    })().catch((e) => { console.error(e); process.exit(1); });`;
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, labels: { app: 'e2e-producer' } },
    spec: {
      restartPolicy: 'Never',
      securityContext: {
        runAsNonRoot: true,
        runAsUser: 1000,
        seccompProfile: { type: 'RuntimeDefault' },
      },
      containers: [
        {
          name: 'producer',
          image: config.image,
          imagePullPolicy: 'IfNotPresent',
          command: ['node', '-e', script],
          args: [
            config.brokers,
            workload.topic,
            String(from),
            String(to),
            String(workload.perSecond),
            String(workload.partitions),
          ],
          securityContext: {
            allowPrivilegeEscalation: false,
            capabilities: { drop: ['ALL'] },
            readOnlyRootFilesystem: true,
          },
        },
      ],
    },
  });
}

/** The cube over the replica sets listed, or on the ReceiverPool named. */
export function cubeManifest(placement: string[] | string): string {
  return JSON.stringify({
    apiVersion: 'streamcube.io/v1alpha1',
    kind: 'CubeAssignment',
    metadata: { name: config.cube },
    spec: {
      source: { brokers: [config.brokers], topic: workload.topic, startingOffsets: 'earliest' },
      schema: schemaInput(
        ['country', 'device'],
        { events: 'count', revenue: 'sum(price)' },
        { window: '1h', allowedLateness: '10m' },
      ),
      ...(typeof placement === 'string' ? { pool: placement } : { replicaSets: placement }),
      strategy: 'sticky',
    },
  });
}

/** The chart's values that run `image` (repository:tag). */
export function imageValues(image: string): string[] {
  const [repository, tag] = image.split(/:(?=[^:/]+$)/) as [string, string];
  return ['--set', `image.repository=${repository}`, '--set', `image.tag=${tag}`];
}

/** The chart's values for the run (`extra` last, to change one). */
export const helmValues = (extra: string[] = []): string[] => [
  ...imageValues(config.image),
  '--set',
  'image.pullPolicy=IfNotPresent',
  '--set',
  'receivers.dataVolume.size=1Gi',
  '--set',
  'deepStorage.size=1Gi',
  // Windows close by time only: caught-up partitions must not seal them during the run.
  '--set',
  'receivers.idleTimeout=1h',
  ...config.helmArgs,
  ...extra,
];
