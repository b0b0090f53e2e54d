// The producer's ledger by partition and offset: how many events, and how many cents of price,
// any offset ranges of a partition hold — to hold a query's answer against the offsets it says it
// covers. Records that are not events (malformed, say) hold an offset and no event.
import type { RangeJson } from '../../src/receiver/offset-ranges.ts';
import type { TestEvent } from './events.ts';
import type { WrittenRecord } from './java-producer.ts';

export interface LedgerFigures {
  events: number;
  /** The sum of the events' prices in cents: exact, as the producer wrote them. */
  cents: bigint;
}

/** One partition's records in offset order, with running sums: figures of a range by two look-ups. */
interface PartitionLedger {
  offsets: bigint[];
  /** events[i]: events among the first i records. */
  events: number[];
  cents: bigint[];
}

const centsOf = (e: TestEvent): bigint => BigInt(Math.round(e.price * 100));

function parseEvent(value: string): TestEvent | undefined {
  try {
    const e = JSON.parse(value) as Partial<TestEvent>;
    return typeof e.ts === 'number' && typeof e.price === 'number' ? (e as TestEvent) : undefined;
  } catch {
    return undefined;
  }
}

export class OffsetLedger {
  private readonly partitions = new Map<number, PartitionLedger>();

  /** `records`: what a read_committed consumer sees (a producer's `visibleRecords()`). */
  constructor(records: readonly WrittenRecord[]) {
    const sorted = [...records].sort(
      (a, b) =>
        a.partition - b.partition || (a.offset < b.offset ? -1 : a.offset > b.offset ? 1 : 0),
    );
    for (const r of sorted) {
      let p = this.partitions.get(r.partition);
      if (!p) this.partitions.set(r.partition, (p = { offsets: [], events: [0], cents: [0n] }));
      const e = parseEvent(r.value);
      p.offsets.push(r.offset);
      p.events.push(p.events.at(-1)! + (e ? 1 : 0));
      p.cents.push(p.cents.at(-1)! + (e ? centsOf(e) : 0n));
    }
  }

  /** The records of `partition` below `offset`. */
  private below(p: PartitionLedger, offset: bigint): number {
    let lo = 0;
    let hi = p.offsets.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (p.offsets[mid]! < offset) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** The events of `partition` at offsets within `ranges` (`[from, to)` each, disjoint). */
  within(partition: number, ranges: readonly RangeJson[]): LedgerFigures {
    const p = this.partitions.get(partition);
    let events = 0;
    let cents = 0n;
    if (!p) return { events, cents };
    for (const [from, to] of ranges) {
      const i = this.below(p, BigInt(from));
      const j = this.below(p, BigInt(to));
      events += p.events[j]! - p.events[i]!;
      cents += p.cents[j]! - p.cents[i]!;
    }
    return { events, cents };
  }

  /** Every partition's records as one offset range each, `[first, last + 1)`, and how many. */
  spans(): Map<number, { from: bigint; to: bigint; records: number }> {
    return new Map(
      [...this.partitions].map(([partition, p]) => [
        partition,
        { from: p.offsets[0]!, to: p.offsets.at(-1)! + 1n, records: p.offsets.length },
      ]),
    );
  }

  /** Every event of every partition. */
  total(): LedgerFigures {
    let events = 0;
    let cents = 0n;
    for (const p of this.partitions.values()) {
      events += p.events.at(-1)!;
      cents += p.cents.at(-1)!;
    }
    return { events, cents };
  }
}
