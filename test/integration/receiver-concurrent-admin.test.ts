// Admin requests that overlap (an operator retrying, or working on several partitions at once)
// leave one consumer that follows the last word: assigns at once both succeed, and a pause or
// resume that comes while the consumer restarts for another partition holds.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  assignRequest,
  createTopic,
  highWatermarks,
  type TestEvent,
  produceEach,
} from '../support/events.ts';
import {
  expectTiling,
  positionsOf,
  rangesOf,
  metricValue,
  waitForPositions,
  expectQueriedTotals,
} from '../support/receiver-checks.ts';
import { useReceiver } from '../support/receiver-fixture.ts';

const fixture = useReceiver({ id: 'r-concurrent' });
const { env, kafka } = fixture;
const T0 = Date.UTC(2026, 0, 6);

test('assigns of different partitions at once both succeed; the data is exact, also after a crash', async () => {
  const cube = 'at-once';
  const topic = await createTopic(fixture.admin, 3);
  const events = await produceEach(fixture.producer, topic, [0, 1, 2], 200, T0);
  const request = (partitions: number[]) =>
    assignRequest(
      env.kafka.bootstrap,
      topic,
      'rs-a',
      partitions.map((p) => ({ partition: p, position: '0' })),
    );
  await fixture.receiver.client.assign(cube, request([0]));
  // Each of these restarts the consumer; they overlap.
  await Promise.all([
    fixture.receiver.client.assign(cube, request([1])),
    fixture.receiver.client.assign(cube, request([2])),
  ]);
  const end = Object.fromEntries(await highWatermarks(kafka, topic));
  await waitForPositions(fixture.receiver.client, cube, end);
  await expectQueriedTotals([fixture.receiver.client], cube, events.flat());

  await fixture.receiver.kill('SIGKILL');
  await fixture.receiver.start();
  const status = await waitForPositions(fixture.receiver.client, cube, end);
  await expectQueriedTotals([fixture.receiver.client], cube, events.flat());
  for (const p of [0, 1, 2]) expectTiling(rangesOf(p, status.segments), 0n, 200n);
});

test('a pause and a resume that arrive while the consumer restarts for another partition hold', async () => {
  const cube = 'mid-restart';
  const topic = await createTopic(fixture.admin, 3);
  const produced: TestEvent[] = [];
  const more = async (p: number, salt: number) => {
    const batch = await produceEach(
      fixture.producer,
      topic,
      [p],
      50,
      T0 + salt * 100_000,
      1000,
      salt,
    );
    produced.push(...batch.flat());
  };
  const assign = (p: number) =>
    fixture.receiver.client.assign(
      cube,
      assignRequest(env.kafka.bootstrap, topic, 'rs-a', [{ partition: p, position: '0' }]),
    );
  await more(0, 0);
  await assign(0);
  await waitForPositions(fixture.receiver.client, cube, { 0: 50n });

  // A pause racing the restart for partition 1: partition 0 stays where it was.
  const [, paused] = await Promise.all([assign(1), fixture.receiver.client.pause(cube, [0])]);
  expect(paused.partitions).toMatchObject([{ partition: 0, state: 'paused', position: '50' }]);
  await more(0, 1);
  await more(1, 1);
  await waitForPositions(fixture.receiver.client, cube, { 1: 50n });
  expect(positionsOf(await fixture.receiver.client.cubeStatus(cube))[0]).toBe('50');

  // A resume racing the restart for partition 2: partition 0 consumes again.
  const [, resumed] = await Promise.all([assign(2), fixture.receiver.client.resume(cube, [0])]);
  expect(resumed.partitions).toMatchObject([{ partition: 0, state: 'consuming' }]);
  await more(2, 2);
  await more(0, 2);
  await waitForPositions(fixture.receiver.client, cube, { 0: 150n, 1: 50n, 2: 50n });
  await expectQueriedTotals([fixture.receiver.client], cube, produced);
});

test('assigns at once, first of a new cube and then with a changed source, open one channel: every event is ingested once', async () => {
  const cube = 'put-race';
  const topic = await createTopic(fixture.admin, 2);
  const produced = await produceEach(fixture.producer, topic, [0, 1], 300, T0);
  const request = (brokers: string) =>
    assignRequest(brokers, topic, 'rs-a', [
      { partition: 0, position: '0' },
      { partition: 1, position: '0' },
    ]);
  // The same request twice at once, as an operator retrying a call that timed out sends it.
  await Promise.all([
    fixture.receiver.client.assign(cube, request(env.kafka.bootstrap)),
    fixture.receiver.client.assign(cube, request(env.kafka.bootstrap)),
  ]);
  await waitForPositions(fixture.receiver.client, cube, { 0: 300n, 1: 300n });
  // A source roll-out (the same broker under another name), retried: each request would close
  // the channel and open a new one, and two channels would both consume the same data directory.
  const [, port] = env.kafka.bootstrap.split(':');
  await Promise.all([
    fixture.receiver.client.assign(cube, request(`localhost:${port}`)),
    fixture.receiver.client.assign(cube, request(`localhost:${port}`)),
  ]);
  const more = await produceEach(fixture.producer, topic, [0, 1], 200, T0 + 1_000_000, 1000, 7);
  await waitForPositions(fixture.receiver.client, cube, { 0: 500n, 1: 500n });
  const all = [...produced.flat(), ...more.flat()];
  await expectQueriedTotals([fixture.receiver.client], cube, all);
  await new Promise((r) => setTimeout(r, 2_000));
  const metrics = await fetch(`${fixture.receiver.baseUrl}/metrics`).then((r) => r.text());
  expect(metricValue(metrics, 'streamcube_receiver_events_ingested_total', { cube })).toBe(1000);
  const status = await fixture.receiver.client.status();
  expect(status.cubes.filter((c) => c.cube === cube)).toHaveLength(1);
});

test('a restart with one cube that cannot be restored brings the others back; that cube answers 404', async () => {
  const topic = await createTopic(fixture.admin, 1);
  const events = (await produceEach(fixture.producer, topic, [0], 100, T0)).flat();
  const request = assignRequest(env.kafka.bootstrap, topic, 'rs-a', [
    { partition: 0, position: '0' },
  ]);
  for (const cube of ['restored', 'unreadable'])
    await fixture.receiver.client.assign(cube, request);
  for (const cube of ['restored', 'unreadable'])
    await waitForPositions(fixture.receiver.client, cube, { 0: 100n });

  await fixture.receiver.kill('SIGKILL');
  writeFileSync(
    join(fixture.receiver.dataDir, 'cubes', 'default', 'unreadable', 'checkpoint.json'),
    '{"version":',
  );
  await fixture.receiver.start();
  await waitForPositions(fixture.receiver.client, 'restored', { 0: 100n });
  await expectQueriedTotals([fixture.receiver.client], 'restored', events);
  await expect(fixture.receiver.client.cubeStatus('unreadable')).rejects.toMatchObject({
    status: 404,
  });
  const logged = readFileSync(fixture.receiver.logFile, 'utf8')
    .split('\n')
    .filter((line) => line.includes('cannot restore a cube'));
  expect(logged.some((line) => line.includes('"cube":"unreadable"'))).toBe(true);
});
