// The operator end to end against the real API server, the real broker and real receiver
// processes made visible as pods: initial assignment over two replica sets, one partition moved
// under steady load, then every partition moved to one replica set. Afterwards the segments'
// offset ranges tile each partition and the aggregates equal what was produced. The receivers
// serve their admin API over HTTPS only, and the operator calls them trusting their CA and
// checking their name (--receiver-ca-file), as the chart runs them.
import { ReceiverProcess } from '../support/receiver-process.ts';
import { makeReceiverCertificates } from '../support/receiver-certificates.ts';
import { highWatermarks, totalsOf, type Totals } from '../support/events.ts';
import { cubeApi, kubectl, waitForSettled } from '../support/cluster.ts';
import { addTotals, handOffTotals, handOffs } from '../support/hand-offs.ts';
import {
  expectTiling,
  expectTotals,
  metricValue,
  rangesOf,
  totalsFromQuery,
  waitForPositions,
} from '../support/receiver-checks.ts';
import { rangesFromJson } from '../../src/receiver/offset-ranges.ts';
import { ReceiverApiError } from '../../src/protocol/client.ts';
import { useOperatorStack } from '../support/operator-stack.ts';
import { assigned, loadedCube, useLoads } from '../support/loaded-cube.ts';
import { waitFor } from '../support/wait.ts';
import { tempDir } from '../support/scratch-dirs.ts';

const certificates = await makeReceiverCertificates(tempDir('op-tls'));
const stack = useOperatorStack({
  name: 'op',
  replicaSets: ['rs-a', 'rs-b'],
  receiver: { tls: certificates },
  operatorArgs: [`--receiver-ca-file=${certificates.caFile}`],
});
const { kc, kafka, receivers } = stack;
const suite = useLoads(stack);
const cube = 'orders';

const zero: Totals = { events: 0, revenue: 0, cheapest: Infinity, dearest: -Infinity };

async function localTotals(r: ReceiverProcess): Promise<Totals> {
  try {
    return totalsFromQuery(await r.client.query(cube, {}));
  } catch (error) {
    if (error instanceof ReceiverApiError && error.status === 404) return zero;
    throw error;
  }
}

/** The segments `r` holds that are not handed off yet (those are read from deep storage). */
async function localSegments(r: ReceiverProcess) {
  try {
    return (await r.client.cubeStatus(cube)).segments.filter((s) => s.state !== 'HANDED_OFF');
  } catch (error) {
    if (error instanceof ReceiverApiError && error.status === 404) return [];
    throw error;
  }
}

test('assign, move one partition under load, move every partition: exact and tiled', async () => {
  const { topic, load } = await loadedCube(stack, suite, cube, Date.UTC(2026, 0, 1), {
    perRound: 20,
    pauseMs: 50,
  });
  const api = cubeApi(kc);
  let settled = await api.get(stack.namespace, cube);
  expect(settled.status?.epochs).toEqual({ '0': 1, '1': 1, '2': 1, '3': 1 });

  // One partition moves (2: rs-b → rs-a) while events keep coming, once rs-b holds some of it:
  // its release then seals windows holding partition 2 and hands them off (checked below). A
  // cube is Ready as soon as it is placed, possibly before the load has reached partition 2.
  await waitFor('rs-b: some of partition 2 consumed', async () => {
    const p2 = (await receivers['rs-b']!.client.cubeStatus(cube)).partitions.find(
      (p) => p.partition === 2,
    );
    return BigInt(p2?.position ?? '0') > 0n;
  });
  await api.patchSpec(stack.namespace, cube, { pins: { 'rs-a': [0, 1, 2] } });
  settled = await waitForSettled(
    kc,
    stack.namespace,
    cube,
    assigned({ 'rs-a': [0, 1, 2], 'rs-b': [3] }),
  );
  expect(settled.status?.epochs).toEqual({ '0': 1, '1': 1, '2': 2, '3': 1 });

  // Every partition moves to rs-b; rs-a seals, hands off and drops the cube.
  await api.patchSpec(stack.namespace, cube, { replicaSets: ['rs-b'], pins: null });
  settled = await waitForSettled(kc, stack.namespace, cube, assigned({ 'rs-b': [0, 1, 2, 3] }));
  expect(settled.status?.epochs).toEqual({ '0': 2, '1': 2, '2': 3, '3': 1 });

  await load.stop();
  const hw = await highWatermarks(kafka, topic);
  await waitForPositions(receivers['rs-b']!.client, cube, Object.fromEntries(hw));
  // rs-b's hand-off of what it sealed at its release starts then, but the move does not wait for
  // it (rs-b keeps partition 3): wait until every segment it sealed is in deep storage.
  await waitFor('rs-b: every sealed segment handed off', async () =>
    (await receivers['rs-b']!.client.cubeStatus(cube)).segments.every(
      (s) => s.state !== 'IMMUTABLE',
    ),
  );

  const deepList = handOffs(stack.deepStorageDir, cube);
  expect(deepList.length).toBeGreaterThan(0);
  // rs-a handed off all it held when it was left with nothing; rs-b the windows holding partition
  // 2, sealed when it released it (so that its data of 2 is committed now, not when they close).
  expect(new Set(deepList.map((h) => h.manifest.replicaSet))).toEqual(new Set(['rs-a', 'rs-b']));
  for (const h of deepList.filter((x) => x.manifest.replicaSet === 'rs-b'))
    expect(h.manifest.offsetRanges['2']?.length).toBeGreaterThan(0);
  const total = [
    await localTotals(receivers['rs-a']!),
    await localTotals(receivers['rs-b']!),
    handOffTotals(deepList),
  ].reduce(addTotals);
  expectTotals(total, totalsOf(load.all()));

  const segments = [
    ...(await localSegments(receivers['rs-a']!)),
    ...(await localSegments(receivers['rs-b']!)),
  ];
  for (const [p, end] of hw) {
    const ranges = [
      ...rangesOf(p, segments),
      ...deepList.flatMap((h) => rangesFromJson(h.manifest.offsetRanges[String(p)] ?? [])),
    ];
    expectTiling(ranges, 0n, end);
  }

  // The admin API answers HTTPS only: plain HTTP to its port gets nothing.
  const plain = receivers['rs-a']!.baseUrl.replace('https://', 'http://');
  expect(plain.startsWith('http://')).toBe(true);
  await expect(fetch(`${plain}/v1/status`)).rejects.toThrow();

  // What a person sees: the printer columns and the Events.
  const table = await kubectl('get', 'cube', cube, '-n', stack.namespace);
  expect(table).toMatch(/READY\s+PHASE/);
  expect(table).toMatch(/True/);
  const described = await kubectl('describe', 'cubeassignment', cube, '-n', stack.namespace);
  expect(described).toContain('ReassignCompleted');
  expect(
    metricValue(await stack.operator.metrics(), 'streamcube_reassigns_total', {
      namespace: stack.namespace,
      cube,
      result: 'completed',
    }),
  ).toBe(3);
});
