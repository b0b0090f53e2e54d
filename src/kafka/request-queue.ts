// kafkajs 2.2.4 keeps every connection it ever received an answer on busy with a 1 ms timer for as
// long as the connection lives (kafkajs #1556, #1704, #1751): after each answer its RequestQueue
// arms a timer to look at the requests held back (throttled, or past maxInFlightRequests), also
// when none are held back and the broker throttles nothing, and that timer arms the next. A
// receiver keeps two or three connections per cube; 100 idle kafkajs consumers took about three
// times the CPU with the loop as without it (`npm run bench:idle`).
//
// The fix kafkajs's maintainers left unmerged: with nothing held back and no throttle, no timer.
// A request held back later arms one itself (RequestQueue.push), and every answer looks at the
// held-back requests again (fulfillRequest), so nothing waits on the timer that is not armed.
import { createRequire } from 'node:module';
import { kafkajsVersion } from './columnar-fetch.ts';

interface KafkajsRequestQueue {
  pending: unknown[];
  throttledUntil: number;
  scheduleCheckPendingRequests: (this: KafkajsRequestQueue) => void;
}

const require = createRequire(import.meta.url);

let installed = false;

/** Replaces RequestQueue.scheduleCheckPendingRequests of kafkajs (once per process). */
export function installIdleRequestQueues(): void {
  if (installed) return;
  const { version } = require('kafkajs/package.json') as { version: string };
  const RequestQueue = require('kafkajs/src/network/requestQueue/index.js') as {
    prototype: KafkajsRequestQueue;
  };
  const schedule = RequestQueue.prototype?.scheduleCheckPendingRequests;
  if (version !== kafkajsVersion || typeof schedule !== 'function') {
    throw new Error(
      `kafkajs is not what src/kafka/request-queue.ts was written against (${kafkajsVersion}): version ${version}${typeof schedule === 'function' ? '' : ', no RequestQueue.scheduleCheckPendingRequests'}`,
    );
  }
  RequestQueue.prototype.scheduleCheckPendingRequests = function (this: KafkajsRequestQueue) {
    // Nothing held back, nothing throttled: nothing for a timer to do.
    if (this.pending.length === 0 && this.throttledUntil <= Date.now()) return;
    schedule.call(this);
  };
  installed = true;
}
