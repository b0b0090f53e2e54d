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
    // Exact cents: kept as integer units end to end, answered as a decimal string.
    { name: 'revenue', function: 'sum', field: 'price', scale: 2 },
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
  /**
   * Offset ranges [from, to) after `firstOffset` that another producer wrote between the demo's
   * batches: not demo events, so demo event n sits at `firstOffset + n` plus the foreign offsets
   * before it. Absent while there were none.
   */
  foreignOffsets?: [string, string][];
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
  private onForeign: (message: string) => void = () => {};

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

  /**
   * `onError`: a failed send (retried on the next tick with what is still owed). `onForeign`:
   * another producer wrote to the demo's topic; the demo records where and goes on.
   */
  start(onError: (error: unknown) => void, onForeign: (message: string) => void = () => {}): void {
    this.onForeign = onForeign;
    this.running = true;
    this.loop = (async () => {
      for (let tick = 0; this.running; tick++) {
        await this.produceTick(tick).catch(onError);
        await new Promise((r) => setTimeout(r, tickMs));
      }
    })();
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
  }

  /** One tick of the loop: what each partition is owed by now, in one send. */
  async produceTick(tick: number): Promise<void> {
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
      const base = BigInt(meta.baseOffset ?? '-1');
      const expected = this.nextOffset(p);
      if (expected !== undefined && base < expected) {
        // The topic was emptied or made anew under the demo: its ledger cannot say what is there.
        this.running = false;
        throw new Error(
          `demo topic ${this.ledger.topic} partition ${meta.partition}: wrote at offset ${base}, below the ${expected} already written; the topic was deleted or truncated, so the demo stops`,
        );
      }
      if (expected !== undefined && base > expected) {
        // What was acknowledged is the demo's all the same: accounted below, never sent again.
        (p.foreignOffsets ??= []).push([String(expected), String(base)]);
        this.onForeign(
          `demo topic ${this.ledger.topic} partition ${meta.partition}: another producer wrote offsets [${expected}, ${base}); they are not demo events, and the ledger records them as foreign`,
        );
      }
      p.firstOffset ??= meta.baseOffset ?? null;
      p.produced += count;
      this.ledger.produced += count;
      this.owed[meta.partition]! -= count;
    }
    this.writeLedger();
  }

  /** The offset the partition's next demo event should get, or undefined before its first. */
  private nextOffset(p: DemoPartitionLedger): bigint | undefined {
    if (p.firstOffset === null) return undefined;
    const foreign = (p.foreignOffsets ?? []).reduce(
      (n, [from, to]) => n + BigInt(to) - BigInt(from),
      0n,
    );
    return BigInt(p.firstOffset) + BigInt(p.produced) + foreign;
  }

  private writeLedger(): void {
    writeFileSync(`${this.ledgerFile}.tmp`, JSON.stringify(this.ledger, null, 2));
    renameSync(`${this.ledgerFile}.tmp`, this.ledgerFile);
  }
}
