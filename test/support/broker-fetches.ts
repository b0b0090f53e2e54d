// The Fetch requests this process sends to the brokers, seen by wrapping kafkajs's Broker.fetch
// while a test's `run` runs: how many were sent, and how many are held by a broker right now.
import { kafkajsInternals } from '../../src/kafka/columnar-fetch.ts';

export interface BrokerFetches {
  /** Fetches sent since `run` began. */
  readonly sent: number;
  /** Fetches sent and not answered yet: held by a broker for its fetch wait when the log is idle. */
  readonly underWay: number;
}

export async function watchingFetches<T>(run: (fetches: BrokerFetches) => Promise<T>): Promise<T> {
  const { Broker } = kafkajsInternals();
  const fetch = Broker.prototype.fetch;
  const fetches = { sent: 0, underWay: 0 };
  Broker.prototype.fetch = function (this: unknown, args) {
    fetches.sent += 1;
    fetches.underWay += 1;
    return fetch.call(this, args).finally(() => {
      fetches.underWay -= 1;
    });
  };
  try {
    return await run(fetches);
  } finally {
    Broker.prototype.fetch = fetch;
  }
}

/** Counts the Fetch requests this process sends while `run` runs. */
export async function countingFetches(run: () => Promise<void>): Promise<number> {
  return watchingFetches(async (fetches) => {
    await run();
    return fetches.sent;
  });
}
