// A cube's consumer that fails, whatever the error, is started again with exponential backoff
// from the positions the channel holds, with its paused partitions paused again; until it works
// its live partitions say `failed` with the error, and the metrics count the failures. A fake
// consumer stands in for Kafka and a manual clock for time.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import { cubeSchema } from '../../src/api/cube.ts';
import { ManualClock } from '../../src/operator/runtime/clock.ts';
import type { CubeStatus } from '../../src/protocol/admin-api.ts';
import { CubeChannel } from '../../src/receiver/cube-channel.ts';
import { createReceiverMetrics } from '../../src/receiver/metrics.ts';
import { FakePartitionConsumer, fakeChannelOptions } from '../support/fake-partition-consumer.ts';

const T0 = Date.UTC(2026, 0, 1);

/** An error as kafkajs raises it for a batch it cannot decode. */
function notImplemented(message: string): Error {
  const error = new Error(message);
  error.name = 'KafkaJSNotImplemented';
  return error;
}

/** Lets the channel's promise chains (a start behind another) run. */
async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
}

let dir: string;
let clock: ManualClock;
let consumer: FakePartitionConsumer;
let channel: CubeChannel;
let registry: Registry;

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'streamcube-recovery-'));
  clock = new ManualClock(T0);
  registry = new Registry();
  channel = new CubeChannel(
    fakeChannelOptions(
      dir,
      cubeSchema.parse({
        timestampField: 'ts',
        dimensions: ['country'],
        measures: [{ name: 'revenue', function: 'sum', field: 'price' }],
        window: '1h',
      }),
      (c) => (consumer = c),
      {
        metrics: createReceiverMetrics(registry),
        flushIntervalMs: 3_600_000,
        clock,
      },
    ),
  );
  await channel.open();
  await channel.assign(
    [0, 1, 2].map((partition) => ({ partition, position: '0', epoch: 1, watermark: null })),
  );
  consumer.deliver(0, 0, 3, T0);
  consumer.deliver(1, 0, 2, T0);
  await channel.pause([2]);
});

afterEach(async () => {
  await channel.close();
  rmSync(dir, { recursive: true, force: true });
});

const states = (status: CubeStatus): Record<number, string> =>
  Object.fromEntries(status.partitions.map((p) => [p.partition, p.state]));

async function metric(name: string): Promise<number | undefined> {
  const values = (await registry.getSingleMetric(name)?.get())?.values ?? [];
  return values.find((v) => v.labels.cube === 'orders')?.value;
}

test('a crash: live partitions say failed with the error, paused ones keep their state', async () => {
  consumer.sink.onCrash(notImplemented('LZ4 compression not implemented'));
  const status = channel.status();
  expect(states(status)).toEqual({ 0: 'failed', 1: 'failed', 2: 'paused' });
  expect(status.partitions[0]).toMatchObject({
    intendedState: 'consuming',
    error: 'KafkaJSNotImplemented: LZ4 compression not implemented',
    position: '3',
  });
  expect(status.consumer).toEqual({
    state: 'failed',
    failures: 1,
    error: { name: 'KafkaJSNotImplemented', message: 'LZ4 compression not implemented' },
    failedSince: new Date(T0).toISOString(),
  });
  expect(await metric('streamcube_receiver_consumer_failures_total')).toBe(1);
  expect(await metric('streamcube_receiver_consumer_up')).toBe(0);
});

test('the restart comes after the backoff, from the positions held, with the pauses applied again', async () => {
  const before = consumer.starts.length;
  consumer.sink.onCrash(new Error('broker gone'));
  clock.advance(999);
  await settle();
  expect(consumer.starts.length).toBe(before);
  clock.advance(1);
  await settle();
  expect(consumer.starts.slice(before)).toEqual([{ 0: '3', 1: '2', 2: '0' }]);
  expect([...consumer.paused]).toEqual([2]);
  // Restarted, not yet shown to work: still failed. A delivered batch shows it.
  expect(channel.status().consumer.state).toBe('failed');
  consumer.deliver(0, 3, 2, T0);
  expect(channel.status().consumer).toEqual({ state: 'running', failures: 1 });
  expect(states(channel.status())).toEqual({ 0: 'consuming', 1: 'consuming', 2: 'paused' });
  expect(channel.status().partitions[0]?.position).toBe('5');
  expect(await metric('streamcube_receiver_consumer_up')).toBe(1);
});

test('failed starts back off exponentially up to 30 s; a healthy run resets the backoff', async () => {
  consumer.failingStarts = 7;
  const before = consumer.starts.length;
  consumer.sink.onCrash(new Error('broker gone'));
  const delays: number[] = [];
  let waited = 0;
  while (consumer.starts.length - before < 8) {
    const seen = consumer.starts.length;
    clock.advance(100);
    waited += 100;
    await settle();
    if (consumer.starts.length > seen) {
      delays.push(waited);
      waited = 0;
    }
  }
  expect(delays).toEqual([1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000, 30_000]);
  expect(channel.status().consumer).toMatchObject({
    state: 'failed',
    failures: 8,
    error: { message: 'connect ECONNREFUSED 127.0.0.1:9092' },
    // Since the first failure, through the restarts.
    failedSince: new Date(T0).toISOString(),
  });
  expect(await metric('streamcube_receiver_consumer_failures_total')).toBe(8);

  // The eighth start worked; a quiet topic delivers nothing, so staying up shows it.
  clock.advance(9_999);
  expect(channel.status().consumer.state).toBe('failed');
  clock.advance(1);
  expect(channel.status().consumer.state).toBe('running');

  const now = consumer.starts.length;
  consumer.sink.onCrash(new Error('broker gone again'));
  clock.advance(1_000);
  await settle();
  expect(consumer.starts.length).toBe(now + 1);
});

test('pause, resume and drain while the consumer is down are kept and applied by the restart', async () => {
  consumer.sink.onCrash(new Error('broker gone'));
  // The pause answers with the position it holds, and the partition stays paused through the restart.
  const [paused] = await channel.pause([0]);
  expect(paused).toMatchObject({ partition: 0, state: 'paused', position: '3' });
  await channel.resume([2]);
  expect(states(channel.status())).toEqual({ 0: 'paused', 1: 'failed', 2: 'failed' });
  const drain = channel.drain({ 1: '4' }, 60_000);
  expect(channel.status().partitions[1]).toMatchObject({
    state: 'failed',
    intendedState: 'draining',
  });
  clock.advance(1_000);
  await settle();
  expect(consumer.starts.at(-1)).toEqual({ 0: '3', 1: '2', 2: '0' });
  expect([...consumer.paused]).toEqual([0]);
  // The drain goes on where it was once records come.
  consumer.deliver(1, 2, 2, T0);
  expect(await drain).toMatchObject({ done: true, partitions: [{ state: 'stopped' }] });
  expect(states(channel.status())).toEqual({ 0: 'paused', 1: 'stopped', 2: 'consuming' });
});

/** An error kafkajs marks retriable, as a group join meets it while the coordinator loads. */
function coordinatorLoading(): Error {
  const error = new Error('The coordinator is loading') as Error & { retriable: boolean };
  error.name = 'KafkaJSProtocolError';
  error.retriable = true;
  return error;
}

test('retriable failures are restarted and counted, and reported failed only after 5 s down', async () => {
  consumer.failingStarts = 2;
  consumer.startError = coordinatorLoading();
  consumer.sink.onCrash(coordinatorLoading());
  expect(channel.status().consumer).toEqual({ state: 'running', failures: 1 });
  expect(states(channel.status())).toEqual({ 0: 'consuming', 1: 'consuming', 2: 'paused' });
  clock.advance(1_000); // the first restart fails, retriable again
  await settle();
  expect(channel.status().consumer).toEqual({ state: 'running', failures: 2 });
  clock.advance(2_000); // so does the second
  await settle();
  expect(consumer.starts.length).toBeGreaterThanOrEqual(3);
  expect(channel.status().consumer.state).toBe('running');
  clock.advance(2_000); // down for 5 s: now it is reported, from when it went down
  expect(channel.status().consumer).toMatchObject({
    state: 'failed',
    failures: 3,
    error: { name: 'KafkaJSProtocolError', message: 'The coordinator is loading' },
    failedSince: new Date(T0).toISOString(),
  });
  expect(states(channel.status())).toEqual({ 0: 'failed', 1: 'failed', 2: 'paused' });
  expect(await metric('streamcube_receiver_consumer_failures_total')).toBe(3);
});

test('one retriable failure cured by one restart is not reported, on a quiet topic too', async () => {
  consumer.sink.onCrash(coordinatorLoading());
  clock.advance(1_000); // the restart joins and commits; no record arrives (a quiet topic)
  await settle();
  for (const after of [4_000, 3_000]) {
    clock.advance(after); // 5 s, then 8 s after the failure: still short of healthyAfterMs
    expect(channel.status().consumer).toEqual({ state: 'running', failures: 1 });
    expect(states(channel.status())).toEqual({ 0: 'consuming', 1: 'consuming', 2: 'paused' });
  }
});

test('retriable failures that come back after a restart are reported once past the grace', async () => {
  consumer.sink.onCrash(coordinatorLoading());
  clock.advance(1_000); // the restart works…
  await settle();
  consumer.sink.onCrash(coordinatorLoading()); // …and crashes again
  clock.advance(2_000); // the second restart works too
  await settle();
  expect(channel.status().consumer.state).toBe('running'); // 3 s down: within the grace
  clock.advance(2_000); // 5 s since it went down, and one restart did not cure it
  expect(channel.status().consumer).toMatchObject({
    state: 'failed',
    failures: 2,
    failedSince: new Date(T0).toISOString(),
  });
  clock.advance(10_000); // up for healthyAfterMs: it works again
  expect(channel.status().consumer).toEqual({ state: 'running', failures: 2 });
});

test('a failure that is not retriable, after retriable ones, is reported at once', () => {
  consumer.sink.onCrash(coordinatorLoading());
  expect(channel.status().consumer.state).toBe('running');
  consumer.sink.onCrash(notImplemented('LZ4 compression not implemented'));
  expect(channel.status().consumer).toMatchObject({
    state: 'failed',
    error: { name: 'KafkaJSNotImplemented' },
  });
});

test('a receiver that cannot start its consumer at all keeps answering and retries', async () => {
  consumer.failingStarts = 1;
  consumer.startError = notImplemented('ZSTD compression not implemented');
  // A new epoch restarts the consumer: that start fails and is reported, not thrown.
  const status = await channel.assign([{ partition: 0, position: '3', epoch: 2, watermark: null }]);
  expect(status.consumer).toMatchObject({
    state: 'failed',
    error: { name: 'KafkaJSNotImplemented' },
  });
  clock.advance(1_000);
  await settle();
  consumer.deliver(0, 3, 1, T0);
  expect(channel.status().consumer.state).toBe('running');
});
