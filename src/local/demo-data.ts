// The demo cube of `streamcube local`: its schema, and a producer writing a trickle of orders at
// mixed rates (a busy partition, slower ones, one that is silent between bursts) with event time
// = wall clock. The producer keeps a ledger of what it wrote — per partition the offset of its
// first event and how many followed — and the n-th event of a partition is a pure function of
// (partition, n), so the totals of any offset range can be computed again from the ledger alone.
import { renameSync, writeFileSync } from 'node:fs';
import type { Producer } from 'kafkajs';
import type { CubeAssignmentSpecInput } from '../api/cube-assignment.ts';

export const demoSchema = {
  timestampField: 'ts',
  dimensions: ['country', 'device'],
  measures: [
    { name: 'events', function: 'count' },
    { name: 'revenue', function: 'sum', field: 'price' },
  ],
  window: '1h',
  allowedLateness: '5m',
} satisfies CubeAssignmentSpecInput['schema'];

export interface DemoEvent {
  ts: number;
  country: string;
  device: string;
  price: number;
}

const countries = ['de', 'fr', 'jp', 'us', 'br'];
const devices = ['ios', 'android', 'web'];

/** The n-th event (from 0) the demo writes to `partition`; only `ts` depends on when. */
export function demoEvent(partition: number, n: number, ts: number): DemoEvent {
  const k = n * 7 + partition * 104_729;
  return {
    ts,
    country: countries[k % countries.length]!,
    device: devices[Math.floor(k / 5) % devices.length]!,
    price: ((k * 37) % 10_000) / 100,
  };
}

/** How much each partition gets: events per second, or a burst of `burst` every `everySeconds`. */
export type DemoRate = { perSecond: number } | { burst: number; everySeconds: number };

/** Mixed rates: one busy partition, two slow ones, one silent except for bursts. */
export const demoRates: DemoRate[] = [
  { perSecond: 10 },
  { perSecond: 4 },
  { perSecond: 1 },
  { burst: 300, everySeconds: 40 },
];

export interface DemoPartitionLedger {
  /** Offset of the partition's first demo event; null before it has one. */
  firstOffset: string | null;
  /** Demo events written to the partition (acknowledged by the broker). */
  produced: number;
}

export interface DemoLedger {
  topic: string;
  startedAt: string;
  produced: number;
  partitions: Record<string, DemoPartitionLedger>;
}

export interface DemoTotals {
  events: number;
  revenue: number;
  byCountry: Record<string, { events: number; revenue: number }>;
}

/** Totals of events [0, count) of one partition of the demo, added into `into`. */
export function addDemoTotals(into: DemoTotals, partition: number, count: number): DemoTotals {
  for (let n = 0; n < count; n++) {
    const e = demoEvent(partition, n, 0);
    into.events += 1;
    into.revenue += e.price;
    const c = (into.byCountry[e.country] ??= { events: 0, revenue: 0 });
    c.events += 1;
    c.revenue += e.price;
  }
  return into;
}

const tickMs = 250;

/** Writes the demo events until stopped, and the ledger to `ledgerFile` after every send. */
export class DemoProducer {
  readonly ledger: DemoLedger;
  private readonly producer: Producer;
  private readonly ledgerFile: string;
  private running = false;
  private loop: Promise<void> | undefined;
  private readonly owed: number[];

  constructor(producer: Producer, topic: string, ledgerFile: string) {
    this.producer = producer;
    this.ledgerFile = ledgerFile;
    this.ledger = {
      topic,
      startedAt: new Date().toISOString(),
      produced: 0,
      partitions: Object.fromEntries(
        demoRates.map((_, p) => [String(p), { firstOffset: null, produced: 0 }]),
      ),
    };
    this.owed = demoRates.map(() => 0);
    this.writeLedger();
  }

  start(onError: (error: unknown) => void): void {
    this.running = true;
    this.loop = (async () => {
      for (let tick = 0; this.running; tick++) {
        await this.sendTick(tick).catch(onError);
        await new Promise((r) => setTimeout(r, tickMs));
      }
    })();
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
  }

  private async sendTick(tick: number): Promise<void> {
    const now = Date.now();
    const messages: { partition: number; value: string }[] = [];
    const counts = demoRates.map((rate, p) => {
      if ('perSecond' in rate) this.owed[p]! += (rate.perSecond * tickMs) / 1000;
      else if (tick % Math.round((rate.everySeconds * 1000) / tickMs) === 0)
        this.owed[p]! += rate.burst;
      const count = Math.floor(this.owed[p]!);
      const from = this.ledger.partitions[String(p)]!.produced;
      for (let i = 0; i < count; i++)
        messages.push({ partition: p, value: JSON.stringify(demoEvent(p, from + i, now)) });
      return count;
    });
    if (messages.length === 0) return;
    const written = await this.producer.send({ topic: this.ledger.topic, acks: -1, messages });
    for (const meta of written) {
      const p = this.ledger.partitions[String(meta.partition)]!;
      const count = counts[meta.partition]!;
      const expected =
        p.firstOffset === null ? undefined : BigInt(p.firstOffset) + BigInt(p.produced);
      if (expected !== undefined && BigInt(meta.baseOffset ?? '-1') !== expected)
        throw new Error(
          `demo topic ${this.ledger.topic} partition ${meta.partition}: wrote at offset ${meta.baseOffset}, expected ${expected}; another producer writes to it`,
        );
      p.firstOffset ??= meta.baseOffset ?? null;
      p.produced += count;
      this.ledger.produced += count;
      this.owed[meta.partition]! -= count;
    }
    this.writeLedger();
  }

  private writeLedger(): void {
    writeFileSync(`${this.ledgerFile}.tmp`, JSON.stringify(this.ledger, null, 2));
    renameSync(`${this.ledgerFile}.tmp`, this.ledgerFile);
  }
}
