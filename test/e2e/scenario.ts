// The end-to-end scenario, as a user drives streamcube with kubectl and helm on a real cluster:
// the same file runs on the test environment's own node (`npm run test:e2e`) and on kind
// (`test/e2e/kind/run.sh`). What differs between clusters comes in through the environment:
//   KUBECONFIG                        the cluster
//   STREAMCUBE_E2E_BROKERS            the Kafka bootstrap address as pods reach it
//   STREAMCUBE_E2E_IMAGE              repository:tag of the streamcube image, present on the node
//   STREAMCUBE_E2E_KUBECTL / _HELM    the tools (default: kubectl, helm on PATH)
//   STREAMCUBE_E2E_NAMESPACE          where to install (default: streamcube-e2e)
//   STREAMCUBE_E2E_HELM_ARGS          more `helm install` arguments, split at spaces
// Each step is an assertion; the first that fails ends the run with diagnostics.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import {
  type OffsetRange,
  rangesFromJson,
  tilingProblems,
} from '../../src/receiver/offset-ranges.ts';
import type { QueryResponse, SegmentStatus } from '../../src/protocol/admin-api.ts';
import { handOffTotals, handOffs } from '../support/hand-offs.ts';
import { readHandOffsWithPyarrow } from '../support/pyarrow-reader.ts';
import { waitFor } from '../support/wait.ts';

const run = promisify(execFile);
const repositoryRoot = resolve(fileURLToPath(new URL('.', import.meta.url)), '..', '..');
const chart = join(repositoryRoot, 'deploy', 'helm', 'streamcube');

const config = {
  kubectl: process.env.STREAMCUBE_E2E_KUBECTL || 'kubectl',
  helm: process.env.STREAMCUBE_E2E_HELM || 'helm',
  namespace: process.env.STREAMCUBE_E2E_NAMESPACE || 'streamcube-e2e',
  brokers: required('STREAMCUBE_E2E_BROKERS'),
  image: required('STREAMCUBE_E2E_IMAGE'),
  release: 'sc',
  cube: 'orders',
  topic: `orders-${Date.now().toString(36)}`,
  partitions: 4,
  /** Events the producer writes, `perSecond` a second: the ground truth. */
  events: 3000,
  perSecond: 50,
};

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set (see the head of test/e2e/scenario.ts)`);
  return value;
}

const [imageRepository, imageTag] = config.image.split(/:(?=[^:/]+$)/) as [string, string];

/** Event i of the producer. One event-time window holds them all: nothing seals by time. */
function eventAt(i: number): { ts: number; country: string; device: string; price: number } {
  return {
    ts: Date.UTC(2026, 0, 1) + (i % 3_000_000),
    country: ['de', 'fr', 'jp', 'us'][i % 4]!,
    device: ['ios', 'android', 'web'][(i >> 2) % 3]!,
    price: (i % 10) + 1, // whole numbers: sums are exact in any order
  };
}

const expected = {
  events: config.events,
  revenue: Array.from({ length: config.events }, (_, i) => eventAt(i).price).reduce(
    (a, b) => a + b,
  ),
};

async function kubectl(args: string[], input?: string): Promise<string> {
  const child = run(config.kubectl, ['-n', config.namespace, ...args], {
    maxBuffer: 64 * 1024 * 1024,
  });
  if (input !== undefined) child.child.stdin?.end(input);
  return (await child).stdout;
}

async function helm(args: string[]): Promise<string> {
  return (await run(config.helm, ['-n', config.namespace, ...args], { maxBuffer: 16 << 20 }))
    .stdout;
}

/** Polls once a second: a cluster moves in seconds, not milliseconds. */
function waitUntil<T>(
  what: string,
  probe: () => Promise<T | undefined>,
  timeoutMs = 180_000,
): Promise<T> {
  return waitFor(what, probe, timeoutMs, 1000);
}

interface PodInfo {
  name: string;
  ready: boolean;
  uid: string;
  phase: string;
  restarts: number;
}

async function pods(selector: string): Promise<PodInfo[]> {
  const list = JSON.parse(await kubectl(['get', 'pods', '-l', selector, '-o', 'json'])) as {
    items: {
      metadata: { name: string; uid: string; deletionTimestamp?: string };
      status: {
        phase: string;
        conditions?: { type: string; status: string }[];
        containerStatuses?: { restartCount: number }[];
      };
    }[];
  };
  return list.items
    .filter((p) => !p.metadata.deletionTimestamp)
    .map((p) => ({
      name: p.metadata.name,
      uid: p.metadata.uid,
      phase: p.status.phase,
      ready: p.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false,
      restarts: (p.status.containerStatuses ?? []).reduce((a, c) => a + c.restartCount, 0),
    }));
}

const operatorSelector = `app.kubernetes.io/instance=${config.release},app.kubernetes.io/component=operator`;
const receiverSelector = `app.kubernetes.io/instance=${config.release},app.kubernetes.io/component=receiver`;

async function allReady(selector: string, count: number): Promise<PodInfo[] | undefined> {
  const list = await pods(selector);
  return list.length === count && list.every((p) => p.ready) ? list : undefined;
}

let adminToken = '';

/** A call to a receiver's admin API from inside its pod (the admin port is not exposed). */
async function receiverApi<T>(
  pod: string,
  method: string,
  path: string,
  body?: unknown,
): Promise<T> {
  const script = `
    const [path, method, token, body] = process.argv.slice(1);
    fetch('http://127.0.0.1:8080' + path, {
      method, headers: { authorization: 'Bearer ' + token, 'content-type': 'application/json' },
      body: body === '' ? undefined : body,
    }).then(async (r) => { process.stdout.write(JSON.stringify({ status: r.status, body: await r.text() })); });`;
  const out = await kubectl([
    'exec',
    pod,
    '-c',
    'receiver',
    '--',
    'node',
    '-e',
    script,
    path,
    method,
    adminToken,
    body === undefined ? '' : JSON.stringify(body),
  ]);
  const { status, body: text } = JSON.parse(out) as { status: number; body: string };
  if (status === 404) throw new NotHeld(`${pod} ${method} ${path}: 404`);
  if (status >= 300) throw new Error(`${pod} ${method} ${path}: ${status} ${text}`);
  return JSON.parse(text) as T;
}

class NotHeld extends Error {}

interface CubeStatusView {
  /** Whether the status speaks of the current spec (status.observedGeneration = generation). */
  current: boolean;
  assignment?: Record<string, number[]>;
  reassign?: { phase: string };
  conditions?: { type: string; status: string; reason?: string }[];
}

async function cubeStatus(): Promise<CubeStatusView> {
  const cube = JSON.parse(await kubectl(['get', 'cubeassignment', config.cube, '-o', 'json'])) as {
    metadata: { generation: number };
    status?: Omit<CubeStatusView, 'current'> & { observedGeneration?: number };
  };
  return { ...cube.status, current: cube.status?.observedGeneration === cube.metadata.generation };
}

/** Ready for the current spec, with no reassign in flight. */
function isSettled(status: CubeStatusView): boolean {
  return (
    status.current &&
    !status.reassign &&
    (status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false)
  );
}

/**
 * What replica `replica` of every replica set holds, live and handed off: offset ranges per
 * partition and totals. Every replica index must tile each partition's log and add up exactly.
 */
async function heldByReplica(
  replica: number,
  deepStorage: string,
): Promise<{ ranges: Map<number, OffsetRange[]>; events: number; revenue: number }> {
  const ranges = new Map<number, OffsetRange[]>();
  const add = (offsetRanges: Record<string, [string, string][]>): void => {
    for (const [p, list] of Object.entries(offsetRanges)) {
      ranges.set(Number(p), [...(ranges.get(Number(p)) ?? []), ...rangesFromJson(list)]);
    }
  };
  let events = 0;
  let revenue = 0;
  const deep = handOffs(deepStorage, config.cube);
  for (const rs of ['rs-a', 'rs-b']) {
    const pod = `${config.release}-${rs}-${replica}`;
    try {
      const status = await receiverApi<{ segments: SegmentStatus[] }>(
        pod,
        'GET',
        `/v1/cubes/${config.cube}`,
      );
      for (const s of status.segments) if (s.state !== 'HANDED_OFF') add(s.offsetRanges);
      const answer = await receiverApi<QueryResponse>(
        pod,
        'POST',
        `/v1/cubes/${config.cube}/query`,
        {},
      );
      const row = answer.rows[0];
      if (row) {
        events += Number(row[answer.columns.indexOf('events')]);
        revenue += Number(row[answer.columns.indexOf('revenue')]);
      }
    } catch (error) {
      if (!(error instanceof NotHeld)) throw error;
    }
    const own = deep.filter((h) => h.manifest.receiver === pod);
    for (const h of own) add(h.manifest.offsetRanges);
    const handedOff = handOffTotals(own);
    events += handedOff.events;
    revenue += handedOff.revenue;
  }
  return { ranges, events, revenue };
}

/** Copies the deep-storage volume out of a receiver pod (the same on every cluster). */
async function copyDeepStorage(): Promise<{ dir: string; root: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'streamcube-e2e-deep-'));
  const root = join(dir, 'deep-storage');
  await kubectl([
    'cp',
    '-c',
    'receiver',
    `${config.release}-rs-b-0:/var/lib/streamcube/deep-storage`,
    root,
  ]);
  return { dir, root };
}

/** partition → high watermark, as the producer read it back once it had written everything. */
let highWatermarks = new Map<number, bigint>();

async function readHighWatermarks(): Promise<void> {
  const line = (await kubectl(['logs', 'producer']))
    .split('\n')
    .find((l) => l.startsWith('high watermarks '));
  if (!line) throw new Error('the producer did not print its high watermarks');
  const parsed = JSON.parse(line.slice('high watermarks '.length)) as Record<string, string>;
  highWatermarks = new Map(Object.entries(parsed).map(([p, hw]) => [Number(p), BigInt(hw)]));
  const inTopic = [...highWatermarks.values()].reduce((a, b) => a + b, 0n);
  if (highWatermarks.size !== config.partitions || inTopic !== BigInt(config.events)) {
    throw new Error(`the topic holds ${inTopic} records, the producer wrote ${config.events}`);
  }
}

/** Exact totals and tiling of [0, high watermark) for every partition, replica by replica. */
async function expectExactAndTiled(): Promise<void> {
  const deep = await copyDeepStorage();
  try {
    for (const replica of [0, 1]) {
      const held = await heldByReplica(replica, deep.root);
      const problems: string[] = [];
      for (const [p, end] of highWatermarks) {
        for (const x of tilingProblems(held.ranges.get(p) ?? [], 0n, end)) {
          problems.push(`partition ${p}: ${x.kind} [${x.from}, ${x.to})`);
        }
      }
      if (problems.length > 0) throw new Error(`replica ${replica}: ${problems.join('; ')}`);
      if (held.events !== expected.events || held.revenue !== expected.revenue) {
        throw new Error(
          `replica ${replica}: ${held.events} events, revenue ${held.revenue}; produced ${expected.events}, revenue ${expected.revenue}`,
        );
      }
    }
  } finally {
    rmSync(deep.dir, { recursive: true, force: true });
  }
}

/** A pod (restricted Pod Security) that creates the topic and writes the events at a steady rate. */
function producerPod(): string {
  const script = `
    const { Kafka, logLevel } = require('kafkajs');
    const [brokers, topic, total, perSecond, partitions] = process.argv.slice(1);
    const kafka = new Kafka({ clientId: 'e2e-producer', brokers: [brokers], logLevel: logLevel.WARN });
    (async () => {
      const admin = kafka.admin(); await admin.connect();
      await admin.createTopics({ topics: [{ topic, numPartitions: +partitions }], waitForLeaders: true });
      // Idempotent: a retried batch (say after NOT_LEADER on a partition) is never written twice.
      const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
      await producer.connect();
      console.log('topic ready');
      const batch = Math.max(1, Math.round(+perSecond / 10));
      for (let i = 0; i < +total; i += batch) {
        const messages = [];
        for (let j = i; j < Math.min(+total, i + batch); j++) {
          messages.push({ partition: j % +partitions, value: JSON.stringify({
            ts: ${Date.UTC(2026, 0, 1)} + (j % 3000000),
            country: ['de', 'fr', 'jp', 'us'][j % 4], device: ['ios', 'android', 'web'][(j >> 2) % 3],
            price: (j % 10) + 1 }) });
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
    metadata: { name: 'producer', labels: { app: 'e2e-producer' } },
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
            config.topic,
            String(config.events),
            String(config.perSecond),
            String(config.partitions),
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

function cubeManifest(replicaSets: string[]): string {
  return JSON.stringify({
    apiVersion: 'streamcube.io/v1alpha1',
    kind: 'CubeAssignment',
    metadata: { name: config.cube },
    spec: {
      source: { brokers: [config.brokers], topic: config.topic, startingOffsets: 'earliest' },
      schema: {
        timestampField: 'ts',
        dimensions: ['country', 'device'],
        measures: [
          { name: 'events', function: 'count' },
          { name: 'revenue', function: 'sum', field: 'price' },
        ],
        window: '1h',
        allowedLateness: '10m',
      },
      replicaSets,
      strategy: 'sticky',
    },
  });
}

const helmValues = (extra: string[] = []): string[] => [
  '--set',
  `image.repository=${imageRepository}`,
  '--set',
  `image.tag=${imageTag}`,
  '--set',
  'image.pullPolicy=IfNotPresent',
  '--set',
  'receivers.dataVolume.size=1Gi',
  '--set',
  'deepStorage.size=1Gi',
  // Windows close by time only: caught-up partitions must not seal them during the run.
  '--set',
  'receivers.idleTimeout=1h',
  ...(process.env.STREAMCUBE_E2E_HELM_ARGS ?? '').split(' ').filter((a) => a !== ''),
  ...extra,
];

async function leaseHolder(): Promise<string> {
  const lease = JSON.parse(
    await kubectl(['get', 'lease', 'streamcube-operator', '-o', 'json']),
  ) as { spec?: { holderIdentity?: string } };
  return lease.spec?.holderIdentity ?? '';
}

interface Step {
  name: string;
  run: () => Promise<void>;
}

const steps: Step[] = [
  {
    name: 'namespace enforcing Pod Security "restricted"',
    run: async () => {
      // Applied, not created: a cluster script may have put a claim in it beforehand.
      const namespace = {
        apiVersion: 'v1',
        kind: 'Namespace',
        metadata: {
          name: config.namespace,
          labels: { 'pod-security.kubernetes.io/enforce': 'restricted' },
        },
      };
      await kubectl(['apply', '-f', '-'], JSON.stringify(namespace));
    },
  },
  {
    name: 'helm install: two operator pods and two replica sets of two receivers, Ready',
    run: async () => {
      await helm(['install', config.release, chart, '--wait', '--timeout', '5m', ...helmValues()]);
      await waitUntil('2 operator pods Ready', () => allReady(operatorSelector, 2));
      await waitUntil('4 receiver pods Ready', () => allReady(receiverSelector, 4));
      adminToken = Buffer.from(
        await kubectl([
          'get',
          'secret',
          `${config.release}-admin-token`,
          '-o',
          'jsonpath={.data.token}',
        ]),
        'base64',
      ).toString('utf8');
    },
  },
  {
    name: 'a producer pod creates the topic and writes events continuously',
    run: async () => {
      await kubectl(['apply', '-f', '-'], producerPod());
      await waitUntil('the producer to create the topic', async () =>
        (await kubectl(['logs', 'producer']).catch(() => '')).includes('topic ready')
          ? true
          : undefined,
      );
    },
  },
  {
    name: 'kubectl apply a CubeAssignment: Ready, both replica sets assigned',
    run: async () => {
      await kubectl(['apply', '-f', '-'], cubeManifest(['rs-a', 'rs-b']));
      await waitUntil('cube Ready over rs-a and rs-b', async () => {
        const s = await cubeStatus();
        return isSettled(s) && s.assignment?.['rs-a']?.length && s.assignment['rs-b']?.length
          ? true
          : undefined;
      });
    },
  },
  {
    name: 'change spec.replicaSets to [rs-b]: every partition moves, Ready again',
    run: async () => {
      await kubectl(['apply', '-f', '-'], cubeManifest(['rs-b']));
      await waitUntil('all partitions on rs-b, no reassign in flight', async () => {
        const s = await cubeStatus();
        return isSettled(s) &&
          s.assignment?.['rs-b']?.length === config.partitions &&
          !s.assignment['rs-a']?.length
          ? true
          : undefined;
      });
    },
  },
  {
    name: 'kubectl delete the leading operator pod: the other takes the lease',
    run: async () => {
      const leader = await waitUntil(
        'a lease holder',
        async () => (await leaseHolder()) || undefined,
      );
      await kubectl(['delete', 'pod', leader, '--wait=false']);
      await waitUntil(
        'another operator to lead',
        async () => {
          const holder = await leaseHolder();
          return holder && holder !== leader ? holder : undefined;
        },
        60_000,
      );
    },
  },
  {
    name: 'change spec.replicaSets back to [rs-a, rs-b] under the new leader',
    run: async () => {
      await kubectl(['apply', '-f', '-'], cubeManifest(['rs-a', 'rs-b']));
      await waitUntil('partitions on both replica sets, no reassign in flight', async () => {
        const s = await cubeStatus();
        return isSettled(s) && s.assignment?.['rs-a']?.length && s.assignment['rs-b']?.length
          ? true
          : undefined;
      });
    },
  },
  {
    name: 'kubectl delete a receiver pod: its StatefulSet brings it back on its volume',
    run: async () => {
      const pod = `${config.release}-rs-b-0`;
      const claim = (): Promise<string> =>
        kubectl(['get', 'pvc', `data-${pod}`, '-o', 'jsonpath={.metadata.uid}']);
      const [before, claimBefore] = [
        (await pods(receiverSelector)).find((p) => p.name === pod),
        await claim(),
      ];
      await kubectl(['delete', 'pod', pod]);
      await waitUntil('the receiver back and Ready', async () => {
        const now = (await pods(receiverSelector)).find((p) => p.name === pod);
        return now && now.uid !== before?.uid && now.ready ? true : undefined;
      });
      if ((await claim()) !== claimBefore) throw new Error(`${pod} came back on another volume`);
    },
  },
  {
    name: 'the producer finishes; every replica holds exactly what was produced, tiled',
    run: async () => {
      const phase = await waitUntil(
        'the producer to finish',
        async () => {
          const [p] = await pods('app=e2e-producer');
          return p?.phase === 'Succeeded' || p?.phase === 'Failed' ? p.phase : undefined;
        },
        (config.events / config.perSecond) * 1000 + 180_000,
      );
      if (phase === 'Failed')
        throw new Error(`producer failed:\n${await kubectl(['logs', 'producer'])}`);
      await readHighWatermarks();
      await waitUntil('exact totals and tiling', async () => {
        await expectExactAndTiled();
        return true;
      });
    },
  },
  {
    name: 'helm upgrade with a changed value: receivers roll, nothing lost',
    run: async () => {
      const before = new Map((await pods(receiverSelector)).map((p) => [p.name, p.uid]));
      await helm([
        'upgrade',
        config.release,
        chart,
        '--wait',
        '--timeout',
        '5m',
        ...helmValues(['--set', 'receivers.flushInterval=2s']),
      ]);
      await waitUntil('4 new receiver pods Ready after the roll', async () => {
        const now = await allReady(receiverSelector, 4);
        return now?.every((p) => before.get(p.name) !== p.uid) ? true : undefined;
      });
      await waitUntil('exact totals and tiling after the roll', async () => {
        await expectExactAndTiled();
        return true;
      });
    },
  },
  {
    name: 'kubectl delete the cube: the finalizer hands everything off; pyarrow reads the files',
    run: async () => {
      await kubectl(['delete', 'cubeassignment', config.cube, '--timeout=180s']);
      const deep = await copyDeepStorage();
      try {
        const files = await readHandOffsWithPyarrow(join(deep.root, config.cube), {
          timestampField: 'ts',
          dimensions: [],
          measures: [{ name: 'events', function: 'count' }],
          window: '1h',
        });
        const byReceiver = new Map<string, number>();
        for (const h of files) {
          const events = h.rows.reduce((a, r) => a + Number(r[0]), 0);
          byReceiver.set(h.manifest.receiver, (byReceiver.get(h.manifest.receiver) ?? 0) + events);
        }
        // Replica i of rs-a and replica i of rs-b together hold every event once.
        for (const replica of [0, 1]) {
          const sum =
            (byReceiver.get(`${config.release}-rs-a-${replica}`) ?? 0) +
            (byReceiver.get(`${config.release}-rs-b-${replica}`) ?? 0);
          if (sum !== expected.events) {
            throw new Error(
              `pyarrow reads ${sum} events of replica ${replica}, produced ${expected.events}`,
            );
          }
        }
      } finally {
        rmSync(deep.dir, { recursive: true, force: true });
      }
    },
  },
  {
    name: 'helm uninstall leaves only the CRD and the data',
    run: async () => {
      await kubectl(['delete', 'pod', 'producer', '--ignore-not-found']);
      await helm(['uninstall', config.release, '--wait', '--timeout', '3m']);
      await waitUntil('no pods left', async () =>
        (await pods(`app.kubernetes.io/instance=${config.release}`)).length === 0
          ? true
          : undefined,
      );
      const left = (
        await kubectl([
          'get',
          'deployments,statefulsets,services,serviceaccounts,roles,rolebindings,configmaps,secrets,persistentvolumeclaims',
          '-l',
          `app.kubernetes.io/instance=${config.release}`,
          '-o',
          'name',
        ])
      )
        .split('\n')
        .filter((line) => line !== '');
      const data = left.filter(
        (name) =>
          name.startsWith('persistentvolumeclaim/') ||
          name === `secret/${config.release}-admin-token`,
      );
      if (left.length !== data.length) {
        throw new Error(`left behind: ${left.filter((n) => !data.includes(n)).join(', ')}`);
      }
      await run(config.kubectl, ['get', 'crd', 'cubeassignments.streamcube.io']);
    },
  },
];

async function diagnostics(): Promise<void> {
  for (const args of [
    ['get', 'pods,pvc,lease', '-o', 'wide'],
    ['get', 'events', '--sort-by=.lastTimestamp'],
    ['describe', 'cubeassignment', config.cube],
    ['logs', '-l', operatorSelector, '--tail=40', '--prefix'],
  ]) {
    console.error(`\n$ kubectl -n ${config.namespace} ${args.join(' ')}`);
    console.error(await kubectl(args).catch((e: Error) => e.message));
  }
}

export async function runScenario(): Promise<number> {
  let passed = 0;
  const t0 = Date.now();
  for (const [i, s] of steps.entries()) {
    const started = Date.now();
    try {
      await s.run();
      passed += 1;
      console.log(`[e2e] ok   ${s.name} (${((Date.now() - started) / 1000).toFixed(1)}s)`);
    } catch (error) {
      console.log(`[e2e] FAIL ${s.name} (${((Date.now() - started) / 1000).toFixed(1)}s)`);
      console.error(error);
      await diagnostics();
      for (const rest of steps.slice(i + 1)) console.log(`[e2e] skip ${rest.name}`);
      console.log(`e2e: ${passed} passed, 1 failed, ${steps.length - i - 1} skipped`);
      return 1;
    }
  }
  console.log(`[e2e] scenario done in ${((Date.now() - t0) / 1000).toFixed(1)}s`);
  console.log(`e2e: ${passed} passed, 0 failed`);
  return 0;
}

if (import.meta.filename === process.argv[1]) process.exitCode = await runScenario();
