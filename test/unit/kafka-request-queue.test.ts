// kafkajs 2.2.4's RequestQueue as streamcube installs it (src/kafka/request-queue.ts): no timer
// while nothing is held back and nothing throttled (kafkajs re-armed a 1 ms one forever after each
// answer), and the timer still armed for held-back or throttled requests.
import { createRequire } from 'node:module';
import { installIdleRequestQueues } from '../../src/kafka/request-queue.ts';

const require = createRequire(import.meta.url);

interface Queue {
  pending: unknown[];
  throttledUntil: number;
  throttleCheckTimeoutId: NodeJS.Timeout | null;
  scheduleCheckPendingRequests(this: Queue): void;
  checkPendingRequests(this: Queue): void;
  destroy(this: Queue): void;
}

const RequestQueue = require('kafkajs/src/network/requestQueue/index.js') as new (options: {
  maxInFlightRequests: number | null;
  requestTimeout: number;
  enforceRequestTimeout: boolean;
  clientId: string;
  broker: string;
  logger: unknown;
}) => Queue;

const logger = {
  debug: () => undefined,
  warn: () => undefined,
  error: () => undefined,
  info: () => undefined,
};
const queue = (): Queue =>
  new RequestQueue({
    maxInFlightRequests: null,
    requestTimeout: 30_000,
    enforceRequestTimeout: false,
    clientId: 'test',
    broker: 'localhost:9092',
    logger,
  });

beforeAll(() => installIdleRequestQueues());

test('an answer with nothing held back and no throttle arms no timer', () => {
  const q = queue();
  q.checkPendingRequests(); // what every answer (fulfillRequest) runs
  expect(q.throttleCheckTimeoutId).toBeNull();
});

test('a held-back request still arms the timer that sends it', () => {
  const q = queue();
  q.pending.push({});
  q.scheduleCheckPendingRequests();
  expect(q.throttleCheckTimeoutId).not.toBeNull();
  q.destroy();
});

test('a throttle still arms the timer that ends it, even with nothing held back yet', () => {
  const q = queue();
  q.throttledUntil = Date.now() + 60_000;
  q.scheduleCheckPendingRequests();
  expect(q.throttleCheckTimeoutId).not.toBeNull();
  q.destroy();
});

test('installing twice changes nothing', () => {
  installIdleRequestQueues();
  const q = queue();
  q.checkPendingRequests();
  expect(q.throttleCheckTimeoutId).toBeNull();
});
