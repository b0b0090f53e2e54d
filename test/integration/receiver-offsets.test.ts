// A receiver consumes from exact offsets: pause reports exact positions, drain stops exactly at
// the stop offsets (an idle partition at once), resume continues with no gap and no overlap.
import { assignRequest, createTopic, produceEach } from '../support/events.ts';
import {
  expectTiling,
  positionsOf,
  rangesOf,
  waitForPositions,
  expectQueriedTotals,
  expectDrainedTo,
} from '../support/receiver-checks.ts';
import { useReceiver } from '../support/receiver-fixture.ts';

const fixture = useReceiver({ id: 'r-offsets' });
const { env } = fixture;
const T0 = Date.UTC(2026, 0, 1);
const cube = 'orders';

test('start at exact offsets, pause, drain to stop offsets, resume: exact aggregates and tiled offsets', async () => {
  const topic = await createTopic(fixture.admin, 4);
  const produced = await produceEach(fixture.producer, topic, [0, 1, 2, 3], 50, T0, 2000);
  const start: Record<number, bigint> = { 0: 0n, 1: 10n, 2: 0n, 3: 0n };
  const client = fixture.receiver.client;

  await client.assign(
    cube,
    assignRequest(
      env.kafka.bootstrap,
      topic,
      'rs-a',
      [0, 1, 2, 3].map((p) => ({ partition: p, position: start[p]!.toString() })),
    ),
  );
  await waitForPositions(client, cube, { 0: 50n, 1: 50n, 2: 50n, 3: 50n });
  const expectedSoFar = [0, 1, 2, 3].flatMap((p) => produced[p]!.slice(Number(start[p])));
  await expectQueriedTotals([client], cube, expectedSoFar);

  // Pause two partitions: their positions are exact, and they stay put while more arrives.
  const paused = await client.pause(cube, [0, 1]);
  expect(paused.partitions.map((p) => [p.partition, p.state, p.position])).toEqual([
    [0, 'paused', '50'],
    [1, 'paused', '50'],
  ]);
  const more = await produceEach(fixture.producer, topic, [0, 1, 2], 20, T0 + 100_000, 2000, 1);
  await waitForPositions(client, cube, { 2: 70n });
  expect(positionsOf(await client.cubeStatus(cube))).toMatchObject({ 0: '50', 1: '50' });
  // Pausing again is the same answer (idempotent).
  expect((await client.pause(cube, [0, 1])).partitions.map((p) => p.position)).toEqual([
    '50',
    '50',
  ]);

  // Drain: partition 0 consumes up to 60 exactly; 1 and 3 are already at their stop offsets.
  await expectDrainedTo(client, cube, { 0: '60', 1: '50', 3: '50' });
  // The same drain again answers the same, with no second effect.
  const again = await client.drain(cube, {
    stopOffsets: { 0: '60', 1: '50', 3: '50' },
    timeoutMs: 1_000,
  });
  expect(again.partitions.map((p) => p.position)).toEqual(['60', '50', '50']);
  // A stop offset behind the position is refused: the receiver cannot un-consume.
  await expect(client.drain(cube, { stopOffsets: { 0: '55' } })).rejects.toMatchObject({
    status: 409,
  });

  // Resume: consumption continues from the exact positions.
  await client.resume(cube, [0, 1, 3]);
  await waitForPositions(client, cube, { 0: 70n, 1: 70n, 2: 70n, 3: 50n });
  const all = [0, 1, 2, 3].flatMap((p) => [
    ...produced[p]!.slice(Number(start[p])),
    ...(more[p] ?? []),
  ]);
  await expectQueriedTotals([client], cube, all);

  const status = await client.cubeStatus(cube);
  const end: Record<number, bigint> = { 0: 70n, 1: 70n, 2: 70n, 3: 50n };
  for (const p of [0, 1, 2, 3]) expectTiling(rangesOf(p, status.segments), start[p]!, end[p]!);
  expect(status.partitions.every((p) => p.lag === '0')).toBe(true);
});

test('a partition assigned with a carried watermark judges lateness by it from the first event', async () => {
  const topic = await createTopic(fixture.admin, 1);
  const client = fixture.receiver.client;
  const carried = T0 + 3 * 3_600_000; // three hours past the events' windows (1h + 5m lateness)
  await produceEach(fixture.producer, topic, [0], 10, T0);
  const request = assignRequest(env.kafka.bootstrap, topic, 'rs-a', [
    { partition: 0, position: '0' },
  ]);
  await client.assign('carried', {
    ...request,
    partitions: request.partitions.map((p) => ({ ...p, watermark: carried })),
  });
  const status = await waitForPositions(client, 'carried', { 0: 10n });
  expect(status.partitions[0]?.watermark).toBe(carried);
  expect(status.rejected).toEqual({ too_late: 10 });
  // The offsets are still accounted for, in the pending range held for the next segment.
  expect(status.segments).toEqual([]);
});
