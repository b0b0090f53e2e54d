// `streamcube local`: a whole stack on this machine — Kafka, etcd + kube-apiserver, the CRD, two
// replica sets of receivers (as processes, visible as pods), the operator, a demo topic with a
// steady trickle of events and a demo CubeAssignment — until Ctrl-C.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { logLevel } from 'kafkajs';
import { KubeConfig } from '@kubernetes/client-node';
import { createKafka } from '../../src/kafka/client.ts';
import { settings } from './settings.ts';
import {
  describeEnvironment,
  findRunningEnvironment,
  startEnvironment,
  stopEnvironment,
} from './environment.ts';
import { freePort } from './processes.ts';
import { say } from './progress.ts';
import { ReceiverProcess } from '../support/receiver-process.ts';
import { OperatorProcess, applyCrd, cubeApi, receiverPod } from '../support/cluster.ts';
import { SteadyLoad } from '../support/load.ts';
import { testSchema } from '../support/events.ts';
import { CoreV1Api } from '@kubernetes/client-node';

export async function runLocalStack(): Promise<number> {
  const reused = findRunningEnvironment(settings.stateDir);
  const env = reused ?? (await startEnvironment(settings.stateDir));
  process.env.STREAMCUBE_TEST_ENV = join(env.dir, 'state.json');
  const kc = new KubeConfig();
  kc.loadFromFile(env.kube.kubeconfig);
  const namespace = 'streamcube-local';
  await kc
    .makeApiClient(CoreV1Api)
    .createNamespace({ body: { metadata: { name: namespace } } })
    .catch(() => undefined);
  await applyCrd();

  const deep = join(env.dir, 'deep-storage');
  mkdirSync(deep, { recursive: true });
  const port = await freePort();
  const token = `local-${Date.now()}-streamcube-token`;
  const receivers: ReceiverProcess[] = [];
  for (const [name, rs, ip] of [
    ['rs-a-0', 'rs-a', '127.0.0.2'],
    ['rs-b-0', 'rs-b', '127.0.0.3'],
  ] as const) {
    const r = new ReceiverProcess({
      id: name,
      replicaSet: rs,
      deepStorageDir: deep,
      host: ip,
      port,
      token,
      flushInterval: '1s',
      idleTimeout: '30s',
    });
    await r.start();
    await kc
      .makeApiClient(CoreV1Api)
      .deleteNamespacedPod({ name, namespace })
      .catch(() => undefined);
    await receiverPod(kc, namespace, name, rs, ip);
    receivers.push(r);
    say(`receiver ${name} (${rs}) at ${r.baseUrl}, log ${r.logFile}`);
  }
  const operator = new OperatorProcess({ namespace, receiverToken: token, receiverPort: port });
  await operator.start();
  say(`operator at http://127.0.0.1:${operator.port}/metrics, log ${operator.logFile}`);

  const kafka = createKafka({
    clientId: 'streamcube-local',
    brokers: [env.kafka.bootstrap],
    logLevel: logLevel.NOTHING,
  });
  const admin = kafka.admin();
  await admin.connect();
  const topic = 'orders';
  await admin
    .createTopics({ topics: [{ topic, numPartitions: 4 }], waitForLeaders: true })
    .catch(() => undefined);
  await admin.disconnect();
  const producer = kafka.producer();
  await producer.connect();
  const load = new SteadyLoad(producer, topic, 4, 5, 1000);
  load.start(Date.now());
  const cubes = cubeApi(kc);
  await cubes.delete(namespace, 'orders').catch(() => undefined);
  await cubes
    .create(namespace, 'orders', {
      source: { brokers: [env.kafka.bootstrap], topic, startingOffsets: 'latest' },
      schema: testSchema,
      replicaSets: ['rs-a', 'rs-b'],
      strategy: 'sticky',
    })
    .catch(() => undefined);

  console.log(`
streamcube is running locally.
${describeEnvironment(env)}

  export KUBECONFIG=${env.kube.kubeconfig}
  ${join(settings.cacheDir, 'bin')}/k8s-*/kubectl get cube -n ${namespace}
  ${join(settings.cacheDir, 'bin')}/k8s-*/kubectl describe cube orders -n ${namespace}
  curl -s -H 'Authorization: Bearer ${token}' -X POST ${receivers[0]!.baseUrl}/v1/cubes/orders/query -d '{"groupBy":["country"]}'

A producer writes 20 events/s to topic '${topic}'. Ctrl-C stops everything${reused ? ' (the environment from env:up keeps running)' : ''}.
`);
  await new Promise<void>((resolve) => {
    process.once('SIGINT', () => resolve());
    process.once('SIGTERM', () => resolve());
  });
  say('stopping');
  await load.stop();
  await producer.disconnect();
  await operator.kill('SIGTERM');
  for (const r of receivers) await r.stop();
  if (!reused) await stopEnvironment(env, false);
  return 0;
}

if (import.meta.filename === process.argv[1]) process.exitCode = await runLocalStack();
