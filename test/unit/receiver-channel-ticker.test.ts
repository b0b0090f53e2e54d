// A cube's periodic work against fake owners: each tick seals, purges and flushes, then a
// hand-off pass in the background is flushed in its turn; the log ends are asked for at most every
// 2 s; whenIdle() waits for all of it; once stopped, nothing more starts.
import { jest } from '@jest/globals';
import winston from 'winston';
import { ChannelTicker } from '../../src/receiver/channel-ticker.ts';

const T0 = 1_000_000;

function ticker(intervalMs: number) {
  const calls: string[] = [];
  let passDone: () => void = () => undefined;
  const t = new ChannelTicker({
    cube: 'orders',
    intervalMs,
    logger: winston.createLogger({ silent: true }),
    consumer: {
      highWatermarks: () => {
        calls.push('highWatermarks');
        return Promise.resolve(new Map([[0, 5n]]));
      },
    },
    onHighWatermarks: (hws) => calls.push(`onHighWatermarks ${[...hws].join()}`),
    upkeep: {
      sealReadyWindows: () => calls.push('seal'),
      purgeExpired: () => calls.push('purge'),
    },
    checkpoints: {
      flush: () => {
        calls.push('flush');
        return Promise.resolve();
      },
    },
    handOffs: {
      handOffSealed: () => {
        calls.push('handOff');
        return new Promise<void>((resolve) => (passDone = resolve));
      },
    },
  });
  return { t, calls, endPass: () => passDone() };
}

beforeEach(() => jest.useFakeTimers({ now: T0 }));
afterEach(() => jest.useRealTimers());

test('a tick seals, purges and flushes, then hands off in the background and flushes that', async () => {
  const { t, calls, endPass } = ticker(500);
  t.start();
  await jest.advanceTimersByTimeAsync(500);
  expect(calls).toEqual([
    'highWatermarks',
    'onHighWatermarks 0,5',
    'seal',
    'purge',
    'flush',
    'handOff',
  ]);
  let idle = false;
  const whenIdle = t.whenIdle().then(() => (idle = true));
  await jest.advanceTimersByTimeAsync(0);
  expect(idle).toBe(false);
  endPass();
  await whenIdle;
  expect(calls.at(-1)).toBe('flush');
  t.stop();
});

test('the log ends are asked for at most every 2 s, however short the interval', async () => {
  const { t, calls, endPass } = ticker(500);
  t.start();
  for (let i = 0; i < 8; i++) {
    await jest.advanceTimersByTimeAsync(500);
    endPass();
  }
  expect(calls.filter((c) => c === 'highWatermarks')).toHaveLength(2);
  t.stop();
});

test('once stopped, no tick and no hand-off pass starts', async () => {
  const { t, calls } = ticker(500);
  t.start();
  t.stop();
  t.startHandOffs();
  await jest.advanceTimersByTimeAsync(2_000);
  await t.whenIdle();
  expect(calls).toEqual([]);
});
