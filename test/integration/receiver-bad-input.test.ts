// Bad input never stops a receiver: malformed and too-late records are counted by reason (status
// and /metrics), skipped, and their offsets still accounted for; bad admin requests get a 4xx
// that says what is wrong, and where.
import type { AssignCubeRequest } from '../../src/protocol/admin-api.ts';
import {
  type ProducedRecord,
  assignRequest,
  createTopic,
  highWatermarks,
  makeEvents,
  malformedRecords,
  produceRecords,
  testSchema,
} from '../support/events.ts';
import { modelCube } from '../support/cube-model.ts';
import { expectCountedAsModeled, waitForPositions } from '../support/receiver-checks.ts';
import { useReceiver } from '../support/receiver-fixture.ts';

const fixture = useReceiver({ id: 'r-bad-input' });
const { env, kafka } = fixture;
const T0 = Date.UTC(2026, 0, 3);
const hour = 3_600_000;

test('malformed and too-late records are counted by reason, skipped, and their offsets still tile', async () => {
  const cube = 'bad-input';
  const topic = await createTopic(fixture.admin, 2);
  // Partition 0: malformed records before any event (no segment yet to account them to), between
  // events, and last. Partition 1: events, one two hours later that moves its event time on,
  // events of the first hour now too late, then events of the later hour again.
  const records = new Map<number, ProducedRecord[]>([
    [
      0,
      [
        ...malformedRecords(T0),
        ...makeEvents(0, 30, T0 + 1000),
        ...malformedRecords(T0 + 60_000),
        ...makeEvents(0, 30, T0 + 100_000, 1000, 1),
        ...malformedRecords(T0 + 200_000).slice(0, 3),
      ],
    ],
    [
      1,
      [
        ...makeEvents(1, 20, T0),
        ...makeEvents(1, 1, T0 + 2 * hour),
        ...makeEvents(1, 15, T0 + 30_000, 1000, 2),
        ...malformedRecords(T0 + 2 * hour).slice(4),
        ...makeEvents(1, 10, T0 + 2 * hour + 5_000, 1000, 3),
      ],
    ],
  ]);
  for (const [p, list] of records) await produceRecords(fixture.producer, topic, p, list);
  const model = modelCube(testSchema, records);
  expect(model.rejected).toEqual({
    bad_json: 3,
    not_an_object: 3,
    missing_timestamp: 3,
    bad_timestamp: 2,
    bad_dimension: 3,
    bad_measure: 3,
    missing_measure: 3,
    too_late: 15,
  });

  await fixture.receiver.client.assign(
    cube,
    assignRequest(env.kafka.bootstrap, topic, 'rs-a', [
      { partition: 0, position: '0' },
      { partition: 1, position: '0' },
    ]),
  );
  const end = await highWatermarks(kafka, topic);
  // The consumer went past every bad record: it consumed each partition to its end.
  const status = await waitForPositions(fixture.receiver.client, cube, Object.fromEntries(end));
  expect(status.ingested).toBe(30 + 30 + 20 + 1 + 10);
  // Events after the bad ones were aggregated, in the right windows, and nothing else was; offsets
  // of rejected records belong to segments too: every offset is accounted once.
  expect(status.segments.map((s) => s.windowStart)).toEqual([...model.windows.keys()]);
  await expectCountedAsModeled(fixture.receiver, cube, status, model, end);
});

describe('admin API errors', () => {
  const cube = 'admin-errors';
  let topic: string;
  let request: AssignCubeRequest;

  async function call(
    method: string,
    path: string,
    options: { token?: string | null; body?: string } = {},
  ): Promise<{
    status: number;
    body: { error?: string; reason?: string; field?: string } | string;
  }> {
    const token = options.token === undefined ? fixture.receiver.token : options.token;
    const response = await fetch(`${fixture.receiver.baseUrl}${path}`, {
      method,
      headers: {
        ...(token === null ? {} : { authorization: `Bearer ${token}` }),
        ...(options.body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(options.body === undefined ? {} : { body: options.body }),
    });
    const text = await response.text();
    const json = response.headers.get('content-type')?.includes('application/json');
    return { status: response.status, body: json ? (JSON.parse(text) as object) : text };
  }

  beforeAll(async () => {
    topic = await createTopic(fixture.admin, 2);
    request = assignRequest(env.kafka.bootstrap, topic, 'rs-a', [
      { partition: 0, position: '0', epoch: 2 },
      { partition: 1, position: '0', epoch: 2 },
    ]);
    await fixture.receiver.client.assign(cube, request);
  });

  test('probes and metrics need no token; the admin API needs the right one', async () => {
    for (const path of ['/healthz', '/readyz', '/metrics']) {
      expect([path, (await call('GET', path, { token: null })).status]).toEqual([path, 200]);
    }
    expect(await call('GET', '/v1/status', { token: null })).toMatchObject({
      status: 401,
      body: { error: 'unauthenticated' },
    });
    for (const token of ['wrong', `${fixture.receiver.token.slice(0, -1)}x`]) {
      expect(await call('GET', '/v1/status', { token })).toMatchObject({
        status: 403,
        body: { error: 'forbidden' },
      });
    }
    expect((await call('GET', '/v1/status')).status).toBe(200);
  });

  test('a bad body is refused with 400 naming the field at fault', async () => {
    const badPosition = structuredClone(request);
    badPosition.partitions[0]!.position = 'abc';
    expect(
      await call('PUT', `/v1/cubes/${cube}`, { body: JSON.stringify(badPosition) }),
    ).toMatchObject({
      status: 400,
      body: { error: 'invalid request', field: 'partitions.0.position' },
    });
    expect(
      await call('POST', `/v1/cubes/${cube}/drain`, {
        body: JSON.stringify({ stopOffsets: { 0: -1 } }),
      }),
    ).toMatchObject({ status: 400, body: { field: 'stopOffsets.0' } });
    expect(
      await call('POST', `/v1/cubes/${cube}/query`, {
        body: JSON.stringify({ groupBy: ['planet'] }),
      }),
    ).toMatchObject({ status: 400, body: { field: 'groupBy.0' } });
    expect(
      await call('POST', `/v1/cubes/${cube}/pause`, { body: JSON.stringify({ partitions: [] }) }),
    ).toMatchObject({ status: 400, body: { field: 'partitions' } });
    const notJson = await call('PUT', `/v1/cubes/${cube}`, { body: '{"source": ' });
    expect(notJson).toMatchObject({ status: 400, body: { error: 'invalid request' } });
    expect((notJson.body as { reason: string }).reason).toMatch(/not valid JSON/);
    expect(await call('GET', `/v1/cubes/${cube}?view=everything`)).toMatchObject({
      status: 400,
      body: { error: 'invalid request', field: 'view' },
    });
    expect(await call('GET', '/v1/cubes/Not_A_Label')).toMatchObject({
      status: 400,
      body: { field: 'cube' },
    });
  });

  test('unknown cubes, partitions and routes are 404; stale epochs and other schemas are 409', async () => {
    expect(await call('GET', '/v1/cubes/no-such-cube')).toMatchObject({
      status: 404,
      body: { error: 'not found' },
    });
    expect(
      await call('POST', '/v1/cubes/no-such-cube/pause', {
        body: JSON.stringify({ partitions: [0] }),
      }),
    ).toMatchObject({ status: 404 });
    expect(
      await call('POST', `/v1/cubes/${cube}/pause`, { body: JSON.stringify({ partitions: [7] }) }),
    ).toMatchObject({ status: 404, body: { field: 'partitions' } });
    for (const path of ['/v1/no-such-route', '/no-such-route', '/v1/cubes/x/y/z']) {
      expect([path, (await call('GET', path)).status]).toEqual([path, 404]);
    }
    expect((await call('DELETE', '/v1/status')).status).toBe(405);

    // The receiver holds epoch 2: a request from epoch 1 is from a superseded assignment.
    const stale = structuredClone(request);
    stale.partitions[1]!.epoch = 1;
    expect(await call('PUT', `/v1/cubes/${cube}`, { body: JSON.stringify(stale) })).toMatchObject({
      status: 409,
      body: { error: 'conflict', field: 'partitions' },
    });
    const otherSchema = structuredClone(request);
    otherSchema.schema = { ...testSchema, window: '30m' };
    expect(
      await call('PUT', `/v1/cubes/${cube}`, { body: JSON.stringify(otherSchema) }),
    ).toMatchObject({ status: 409, body: { error: 'conflict', field: 'schema' } });
    const otherReplicaSet = { ...structuredClone(request), replicaSet: 'rs-z' };
    expect(
      await call('PUT', `/v1/cubes/${cube}`, { body: JSON.stringify(otherReplicaSet) }),
    ).toMatchObject({ status: 409, body: { field: 'replicaSet' } });
    // None of the refused requests changed anything: the same assign is still a no-op.
    const again = await fixture.receiver.client.assign(cube, request);
    expect(again.partitions.map((p) => [p.partition, p.epoch, p.state])).toEqual([
      [0, 2, 'consuming'],
      [1, 2, 'consuming'],
    ]);
  });
});
