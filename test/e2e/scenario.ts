// The end-to-end scenario, as a user drives streamcube with kubectl and helm on a real cluster:
// the same file runs on the test environment's own node (`npm run test:e2e`) and on kind
// (`test/e2e/kind/run.sh`); ./cluster.ts says which environment variables tell them apart.
// Each step is an assertion; the first that fails ends the run with diagnostics.
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { readCommittedWithPyarrow, readHandOffsWithPyarrow } from '../support/pyarrow-reader.ts';
import {
  allReady,
  config,
  cubeStatus,
  type CubeStatusView,
  helm,
  isSettled,
  kubectl,
  leaseHolder,
  operatorSelector,
  pods,
  readAdminToken,
  receiverSelector,
  waitUntil,
} from './cluster.ts';
import {
  chart,
  cubeManifest,
  expected,
  helmValues,
  imageValues,
  producerPod,
  totalsOf,
  workload,
} from './workload.ts';
import { auditedSets, copyDeepStorage, expectExactAndTiled, readHighWatermarks } from './audit.ts';
import { applyMonitoringCrds, scrapeEveryPod } from './monitoring.ts';
import { previousCommit, previousSources } from './previous-release.ts';

const { previousImage, prometheusImage } = config;

interface Step {
  name: string;
  run: () => Promise<void>;
}

/** Waits until the cube is settled with partitions on both rs-a and rs-b. */
const settledOnBothSets = (what: string) =>
  waitUntil(what, async () => {
    const s = await cubeStatus();
    return isSettled(s) && s.assignment?.['rs-a']?.length && s.assignment['rs-b']?.length
      ? true
      : undefined;
  });

/** Monitoring as a user of the Prometheus Operator gets it (./monitoring.ts); needs its image. */
const monitoringStep = (image: string): Step => ({
  name: "metrics.serviceMonitor on: a Prometheus in the namespace scrapes every operator, receiver and query server pod through the chart's ServiceMonitors, past its NetworkPolicy",
  run: async () => {
    await applyMonitoringCrds();
    await helm([
      'upgrade',
      config.release,
      chart,
      '--reuse-values',
      '--set',
      'metrics.serviceMonitor.enabled=true',
      '--wait',
      '--timeout',
      '5m',
    ]);
    console.log(`[e2e]      ${await scrapeEveryPod(image)}`);
  },
});

/** receivers.replicaSets as the values of charts before the pool gave them. */
const legacyReplicaSets = ['rs-a', 'rs-b'].flatMap((name, i) => [
  '--set',
  `receivers.replicaSets[${i}].name=${name}`,
  '--set',
  `receivers.replicaSets[${i}].replicas=2`,
]);

interface OwnedObject {
  metadata: {
    name: string;
    uid: string;
    ownerReferences?: { kind: string; name: string; controller?: boolean }[];
  };
}

/** The names of the StatefulSets of the namespace whose controller is ReceiverPool `pool`. */
async function statefulSetsOfPool(pool: string): Promise<string[]> {
  const list = JSON.parse(await kubectl(['get', 'statefulsets', '-o', 'json'])) as {
    items: OwnedObject[];
  };
  return list.items
    .filter((s) =>
      s.metadata.ownerReferences?.some(
        (r) => r.kind === 'ReceiverPool' && r.name === pool && r.controller,
      ),
    )
    .map((s) => s.metadata.name)
    .sort();
}

/** claim name → uid of the receivers' data claims (data-<StatefulSet>-<n>). */
async function dataClaims(): Promise<Map<string, string>> {
  const list = JSON.parse(await kubectl(['get', 'pvc', '-o', 'json'])) as { items: OwnedObject[] };
  return new Map(
    list.items
      .filter((c) => c.metadata.name.startsWith('data-'))
      .map((c) => [c.metadata.name, c.metadata.uid]),
  );
}

const setsOf = (s: CubeStatusView): string[] =>
  Object.entries(s.assignment ?? {})
    .filter(([, partitions]) => partitions.length > 0)
    .map(([set]) => set)
    .sort();

/** The pool's scale steps: the chart's pool `sc`, its third set sc-2 (pods sc-2-0, sc-2-1). */
const pool = config.release;
const thirdSet = `${pool}-2`;

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
    name: previousImage
      ? `helm install the previous release (${previousCommit.slice(0, 7)}: its image; its chart with the CRD in crds/, the admin API without TLS): two operator pods and two replica sets of two receivers, Ready`
      : 'helm install: two operator pods and two replica sets of two receivers, Ready',
    run: async () => {
      if (previousImage) {
        const previous = previousSources(['deploy/helm/streamcube']);
        try {
          await helm([
            'install',
            config.release,
            join(previous.dir, 'deploy', 'helm', 'streamcube'),
            '--wait',
            '--timeout',
            '5m',
            ...helmValues(imageValues(previousImage)),
          ]);
        } finally {
          previous.remove();
        }
      } else
        // The values of charts before the pool: rs-a and rs-b become the pool's first sets.
        await helm([
          'install',
          config.release,
          chart,
          '--wait',
          '--timeout',
          '5m',
          ...helmValues(legacyReplicaSets),
        ]);
      await waitUntil('2 operator pods Ready', () => allReady(operatorSelector, 2));
      await waitUntil('4 receiver pods Ready', () => allReady(receiverSelector, 4));
      await readAdminToken();
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
      await settledOnBothSets('cube Ready over rs-a and rs-b');
    },
  },
  {
    name: 'change spec.replicaSets to [rs-b]: every partition moves, Ready again',
    run: async () => {
      await kubectl(['apply', '-f', '-'], cubeManifest(['rs-b']));
      await waitUntil('all partitions on rs-b, no reassign in flight', async () => {
        const s = await cubeStatus();
        return isSettled(s) &&
          s.assignment?.['rs-b']?.length === workload.partitions &&
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
      await settledOnBothSets('partitions on both replica sets, no reassign in flight');
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
        (workload.events / workload.perSecond) * 1000 + 180_000,
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
    name: "helm upgrade to this chart, as its README says (the CRD adopted once), with a changed value: the CRD updated, the admin API on TLS, the receivers run from the chart's ReceiverPool (StatefulSets it owns, the previous names, the same data claims), nothing lost",
    run: async () => {
      const before = new Map((await pods(receiverSelector)).map((p) => [p.name, p.uid]));
      const claimsBefore = await dataClaims();
      // The README's one-time adoption of a CRD an earlier chart installed from crds/.
      const crd = 'crd/cubeassignments.streamcube.io';
      await kubectl([
        'annotate',
        crd,
        `meta.helm.sh/release-name=${config.release}`,
        `meta.helm.sh/release-namespace=${config.namespace}`,
        '--overwrite',
      ]);
      await kubectl(['label', crd, 'app.kubernetes.io/managed-by=Helm', '--overwrite']);
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
      // The CRD is this chart's (a field the previous one does not have), and Helm's now.
      const served = await kubectl([
        'get',
        crd,
        '-o',
        'jsonpath={.spec.versions[0].schema.openAPIV3Schema.properties.status.properties.proposal.properties.uncommitted.type}',
      ]);
      if (served !== 'object')
        throw new Error(
          `the CRD was not updated by helm upgrade (proposal.uncommitted: '${served}')`,
        );
      // The admin API on TLS now (the previous chart served it in plain HTTP): each receiver has
      // the chart's certificate, which receiverApi then trusts and checks the name of.
      for (const p of await pods(receiverSelector)) {
        const volumes = await kubectl([
          'get',
          'pod',
          p.name,
          '-o',
          'jsonpath={.spec.volumes[*].name}',
        ]);
        if (!volumes.split(' ').includes('tls'))
          throw new Error(
            `${p.name} has no TLS certificate after the upgrade (volumes: ${volumes})`,
          );
      }
      // The pool is no resource of the release: the chart renders it into a ConfigMap, which owns
      // it, and the operator applies it, with the value this upgrade changed.
      // (No document of that kind; the CRD names the kind indented.)
      if (/^kind: ReceiverPool$/m.test(await helm(['get', 'manifest', config.release])))
        throw new Error(
          'the ReceiverPool is a resource of the release, not applied by the operator',
        );
      const owners = await kubectl([
        'get',
        'receiverpool',
        pool,
        '-o',
        'jsonpath={.metadata.ownerReferences[*].kind}/{.metadata.ownerReferences[*].name}',
      ]);
      if (owners !== `ConfigMap/${config.release}-receiver-pool`)
        throw new Error(
          `the pool's owners are ${owners}, not ConfigMap ${config.release}-receiver-pool`,
        );
      for (const p of await pods(receiverSelector)) {
        const args = await kubectl([
          'get',
          'pod',
          p.name,
          '-o',
          'jsonpath={.spec.containers[0].args}',
        ]);
        if (!args.includes('--flush-interval=2s'))
          throw new Error(`${p.name} runs without the upgrade's --flush-interval=2s: ${args}`);
      }
      // The receivers run from the chart's ReceiverPool: StatefulSets it owns, named as the
      // previous chart's (its setNames), whose pods restarted on their own data claims.
      const setNames = await kubectl([
        'get',
        'receiverpool',
        pool,
        '-o',
        'jsonpath={.spec.setNames}',
      ]);
      if (setNames !== '["rs-a","rs-b"]')
        throw new Error(`the pool's setNames are ${setNames}, not rs-a and rs-b`);
      await waitUntil('the StatefulSets sc-rs-a and sc-rs-b owned by the ReceiverPool', async () =>
        (await statefulSetsOfPool(pool)).join() === `${pool}-rs-a,${pool}-rs-b` ? true : undefined,
      );
      const claimsAfter = await dataClaims();
      const changed = [...before.keys()].filter(
        (p) => claimsAfter.get(`data-${p}`) !== claimsBefore.get(`data-${p}`),
      );
      if (changed.length > 0 || claimsBefore.size !== before.size)
        throw new Error(
          `receivers not back on their own claims: ${changed.join(', ')} (claims before: ${[...claimsBefore.keys()].join(', ')})`,
        );
      await readAdminToken();
      await waitUntil('exact totals and tiling after the roll', async () => {
        await expectExactAndTiled();
        return true;
      });
      await settledOnBothSets('the cube Ready over both sets after the upgrade');
    },
  },
  {
    name: "every component under its own ServiceAccount, never the namespace's default",
    run: async () => {
      const release = `app.kubernetes.io/instance=${config.release}`;
      const list = JSON.parse(await kubectl(['get', 'pods', '-l', release, '-o', 'json'])) as {
        items: {
          metadata: { name: string; labels: Record<string, string> };
          spec: { serviceAccountName?: string };
        }[];
      };
      const accountOf: Record<string, string> = {
        operator: 'operator',
        receiver: 'receiver',
        'query-server': 'query',
      };
      const wrong = list.items.filter((p) => {
        const account = accountOf[p.metadata.labels['app.kubernetes.io/component'] ?? ''];
        return !account || p.spec.serviceAccountName !== `${config.release}-${account}`;
      });
      if (wrong.length > 0)
        throw new Error(
          `pods not under their component's ServiceAccount: ${wrong.map((p) => `${p.metadata.name} (${p.spec.serviceAccountName})`).join(', ')}`,
        );
    },
  },
  // The pool scaled 2 -> 3 -> 2 (the real node runs it; kind skips it: STREAMCUBE_E2E_POOL_SCALE=0).
  ...(config.poolScale
    ? [
        {
          name: `the cube on the pool (spec.pool: ${pool}); a second producer writes while kubectl scale receiverpool/${pool} --replicas=3: ${thirdSet}'s StatefulSet, owned by the pool, runs two Ready receivers and partitions move onto it`,
          run: async () => {
            await kubectl(['apply', '-f', '-'], cubeManifest(pool));
            await waitUntil("the cube settled on the pool's sets rs-a and rs-b", async () => {
              const s = await cubeStatus();
              return isSettled(s) && setsOf(s).join() === 'rs-a,rs-b' ? true : undefined;
            });
            Object.assign(expected, totalsOf(2 * workload.events));
            await kubectl(
              ['apply', '-f', '-'],
              producerPod('producer-2', workload.events, 2 * workload.events),
            );
            await kubectl(['scale', `receiverpool/${pool}`, '--replicas=3']);
            await waitUntil(`${thirdSet} owned by the pool with 2 Ready receivers`, async () =>
              (await statefulSetsOfPool(pool)).includes(thirdSet) &&
              (await allReady(`streamcube.io/replica-set=${thirdSet}`, 2))
                ? true
                : undefined,
            );
            auditedSets.running.push(thirdSet);
            const placed = await waitUntil(
              `partitions on ${thirdSet}, the cube settled`,
              async () => {
                const s = await cubeStatus();
                return isSettled(s) && setsOf(s).includes(thirdSet) ? s.assignment : undefined;
              },
            );
            console.log(`[e2e]      after scale-out: ${JSON.stringify(placed)}`);
          },
        },
        {
          name: `kubectl scale receiverpool/${pool} --replicas=2 under traffic: the cube moves off ${thirdSet}, whose StatefulSet and pods go (Event SetRemoved)`,
          run: async () => {
            const producing = (await pods('app=e2e-producer')).some(
              (p) => p.name === 'producer-2' && p.phase === 'Running',
            );
            console.log(`[e2e]      producer-2 still writing at scale-in: ${producing}`);
            await kubectl(['scale', `receiverpool/${pool}`, '--replicas=2']);
            await waitUntil(
              `${thirdSet}'s StatefulSet removed`,
              async () => (!(await statefulSetsOfPool(pool)).includes(thirdSet) ? true : undefined),
              300_000,
            );
            const events = JSON.parse(
              await kubectl([
                'get',
                'events',
                '--field-selector',
                `involvedObject.kind=ReceiverPool,involvedObject.name=${pool},reason=SetRemoved`,
                '-o',
                'json',
              ]),
            ) as { items: { message: string }[] };
            if (!events.items.some((e) => e.message.startsWith(`set ${thirdSet} removed`)))
              throw new Error(
                `no SetRemoved Event for ${thirdSet}: ${events.items.map((e) => e.message).join('; ')}`,
              );
            const s = await cubeStatus();
            if (setsOf(s).includes(thirdSet))
              throw new Error(
                `${thirdSet} removed while the cube holds ${JSON.stringify(s.assignment)}`,
              );
            auditedSets.running.splice(auditedSets.running.indexOf(thirdSet), 1);
            auditedSets.removed.push(thirdSet);
            await waitUntil(`${thirdSet}'s pods gone`, async () =>
              (await pods(`streamcube.io/replica-set=${thirdSet}`)).length === 0 ? true : undefined,
            );
            await waitUntil('the cube settled on rs-a and rs-b', async () => {
              const st = await cubeStatus();
              return isSettled(st) && setsOf(st).join() === 'rs-a,rs-b' ? true : undefined;
            });
          },
        },
        {
          name: `the second producer finishes; every replica (with ${thirdSet}'s hand-offs) holds exactly what both producers wrote, tiled`,
          run: async () => {
            const phase = await waitUntil(
              'producer-2 to finish',
              async () => {
                const p = (await pods('app=e2e-producer')).find((x) => x.name === 'producer-2');
                return p?.phase === 'Succeeded' || p?.phase === 'Failed' ? p.phase : undefined;
              },
              (workload.events / workload.perSecond) * 1000 + 180_000,
            );
            if (phase === 'Failed')
              throw new Error(`producer-2 failed:\n${await kubectl(['logs', 'producer-2'])}`);
            await readHighWatermarks('producer-2');
            await waitUntil('exact totals and tiling after the scale-in', async () => {
              await expectExactAndTiled();
              return true;
            });
          },
        },
      ]
    : []),
  ...(prometheusImage ? [monitoringStep(prometheusImage)] : []),
  {
    name: 'kubectl delete the cube: the finalizer hands everything off; pyarrow reads the files',
    run: async () => {
      await kubectl(['delete', 'cubeassignment', config.cube, '--timeout=180s']);
      const deep = await copyDeepStorage();
      try {
        const files = await readHandOffsWithPyarrow(
          join(deep.root, `namespace=${config.namespace}`, config.cube),
          {
            timestampField: 'ts',
            dimensions: [],
            measures: [{ name: 'events', function: 'count' }],
            window: '1h',
          },
        );
        const byReceiver = new Map<string, number>();
        for (const h of files) {
          const events = h.rows.reduce((a, r) => a + Number(r[0]), 0);
          byReceiver.set(h.manifest.receiver, (byReceiver.get(h.manifest.receiver) ?? 0) + events);
        }
        // A reader of committed data (one copy per window and replica set, whichever replica's
        // the commit record names) reads every event once too.
        const committed = (
          await readCommittedWithPyarrow(
            join(deep.root, `namespace=${config.namespace}`, config.cube),
            {
              timestampField: 'ts',
              dimensions: [],
              measures: [{ name: 'events', function: 'count' }],
              window: '1h',
            },
          )
        ).reduce((a, h) => a + h.rows.reduce((b, r) => b + Number(r[0]), 0), 0);
        if (committed !== expected.events)
          throw new Error(
            `pyarrow reads ${committed} committed events, produced ${expected.events}`,
          );
        // Replica i of every set, rs-a, rs-b and the one scaled in, together hold every event once.
        for (const replica of [0, 1]) {
          const sum = [...auditedSets.running, ...auditedSets.removed]
            .map((set) => byReceiver.get(`${set}-${replica}`) ?? 0)
            .reduce((a, b) => a + b, 0);
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
    name: "helm uninstall leaves only the CRDs and the data (the pool, owned by the release's ConfigMap, goes)",
    run: async () => {
      await kubectl(['delete', 'pod', 'producer', 'producer-2', '--ignore-not-found']);
      await helm(['uninstall', config.release, '--wait', '--timeout', '3m']);
      await waitUntil('no pods left', async () =>
        (await pods(`app.kubernetes.io/instance=${config.release}`)).length === 0
          ? true
          : undefined,
      );
      const left = (
        await kubectl([
          'get',
          'deployments,statefulsets,services,serviceaccounts,roles,rolebindings,poddisruptionbudgets,configmaps,secrets,persistentvolumeclaims',
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
          // The tokens are kept (helm.sh/resource-policy: keep): a reinstall keeps them.
          name === `secret/${config.release}-admin-token` ||
          name === `secret/${config.release}-read-token` ||
          name === `secret/${config.release}-receiver-tls`,
      );
      if (left.length !== data.length) {
        throw new Error(`left behind: ${left.filter((n) => !data.includes(n)).join(', ')}`);
      }
      await kubectl(['get', 'crd', 'cubeassignments.streamcube.io']);
      // The pool, owned by the release's ConfigMap, went with it (the garbage collector).
      const pools = await kubectl(['get', 'receiverpools', '-o', 'name']);
      if (pools.trim() !== '') throw new Error(`helm uninstall left ${pools.trim()}`);
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
