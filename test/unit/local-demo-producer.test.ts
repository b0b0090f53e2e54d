// The demo producer meets another producer on its topic: what the broker acknowledged is the
// demo's and is never sent again (it re-sent an ever larger batch every tick and flooded its own
// broker), the foreign offsets are recorded in the ledger, and it says so once per write.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Producer } from 'kafkajs';
import { type DemoLedger, DemoProducer, demoRates } from '../../src/local/demo-data.ts';
import { scratchDirs } from '../support/scratch-dirs.ts';

const scratchDir = scratchDirs();

/** A broker's partitions as offsets only: a send appends, `foreign` appends records of another. */
function fakeBroker() {
  const ends = demoRates.map(() => 0);
  const sent: number[] = [];
  const producer = {
    send: ({ messages }: { messages: { partition: number }[] }) => {
      sent.push(messages.length);
      const counts = new Map<number, number>();
      for (const m of messages) counts.set(m.partition, (counts.get(m.partition) ?? 0) + 1);
      return Promise.resolve(
        [...counts].map(([partition, n]) => {
          const baseOffset = String(ends[partition]);
          ends[partition]! += n;
          return { topicName: 'demo', partition, errorCode: 0, baseOffset };
        }),
      );
    },
  } as unknown as Producer;
  return { producer, sent, foreign: (p: number, n: number) => (ends[p]! += n), ends };
}

test('a foreign record is recorded, what was written is accounted, and nothing is sent twice', async () => {
  const broker = fakeBroker();
  const ledgerFile = join(scratchDir('demo-ledger-'), 'ledger.json');
  const demo = new DemoProducer(broker.producer, 'demo', ledgerFile);
  const said: string[] = [];
  (demo as unknown as { onForeign: (m: string) => void }).onForeign = (m) => said.push(m);
  for (let tick = 0; tick < 8; tick++) await demo.produceTick(tick);
  const before = demo.ledger.partitions['0']!.produced;
  broker.foreign(0, 1);
  for (let tick = 8; tick < 40; tick++) await demo.produceTick(tick);

  const ledger = JSON.parse(readFileSync(ledgerFile, 'utf8')) as DemoLedger;
  const p0 = ledger.partitions['0']!;
  expect(p0.foreignOffsets).toEqual([[String(before), String(before + 1)]]);
  expect(said).toHaveLength(1);
  expect(said[0]).toMatch(/another producer wrote offsets \[\d+, \d+\)/);
  // Every offset of the partition is a demo event or a foreign one: the ledger stays true.
  expect(Number(p0.firstOffset) + p0.produced + 1).toBe(broker.ends[0]);
  // Partition 0 is owed 10 events a second: 40 ticks of 250 ms are 100, whatever happened.
  expect(p0.produced).toBe(100);
  // No send grows: the busiest tick holds at most one tick's events and a burst.
  expect(Math.max(...broker.sent)).toBeLessThanOrEqual(3 + 1 + 1 + 300);
});

test('a topic emptied under the demo stops it with a message, rather than guess', async () => {
  const broker = fakeBroker();
  const demo = new DemoProducer(
    broker.producer,
    'demo',
    join(scratchDir('demo-ledger-'), 'ledger.json'),
  );
  await demo.produceTick(0);
  await demo.produceTick(1);
  broker.ends[0] = 0;
  await expect(demo.produceTick(2)).rejects.toThrow(/deleted or truncated, so the demo stops/);
});
