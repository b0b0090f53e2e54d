// Rejected records in an answer: each piece says how many of its offsets were rejected records,
// per partition and reason (the segment counted them as it consumed; checkpoints, manifests and
// commit records keep the count); the answer adds those of the counted pieces, and a piece that
// does not say makes its partitions' count "not known", never a clean zero.
import { completenessNote } from '../../src/query/query-command.ts';
import { type PendingRun, countRejected } from '../../src/query/rejected.ts';
import {
  partitionCheckpoint,
  restoredPartition,
  restoredSegment,
  segmentCheckpoint,
} from '../../src/receiver/checkpoint.ts';
import { type Segment, reasonCountsFromJson } from '../../src/receiver/segments.ts';
import { MemoryDeepStorage } from '../support/memory-deep-storage.ts';
import {
  commitSegments,
  countByCountry,
  oneReceiverService,
  oneSetCube,
  receiverOver,
} from '../support/query-fixtures.ts';

const M = 60_000;
const schema = countByCountry;
const r = (from: number, to: number) => [{ from: BigInt(from), to: BigInt(to) }];

test.each<{
  name: string;
  counted: Parameters<typeof countRejected>[0];
  pending: PendingRun[];
  expected: Record<number, unknown>;
}>([
  {
    name: 'counted pieces add up per partition and reason',
    counted: [
      { ranges: new Map([[0, r(0, 10)]]), rejected: new Map([[0, { too_late: 2 }]]) },
      {
        ranges: new Map([
          [0, r(10, 20)],
          [1, r(0, 5)],
        ]),
        rejected: new Map([[0, { too_late: 1, bad_json: 1 }]]),
      },
    ],
    pending: [],
    expected: {
      0: { byReason: { too_late: 3, bad_json: 1 }, known: true },
      1: { byReason: {}, known: true },
    },
  },
  {
    name: 'a piece that does not say: its partitions not known',
    counted: [{ ranges: new Map([[0, r(0, 10)]]) }],
    pending: [],
    expected: { 0: { byReason: {}, known: false } },
  },
  {
    name: 'a pending run adds its own; one inside counted offsets is left out; one across them is not known',
    counted: [{ ranges: new Map([[0, r(0, 10)]]), rejected: new Map() }],
    pending: [
      { partition: 0, ranges: r(10, 12), rejected: { bad_json: 2 } },
      { partition: 0, ranges: r(10, 11), rejected: { bad_json: 1 } },
      { partition: 1, ranges: r(0, 3), rejected: { missing_timestamp: 3 } },
      { partition: 1, ranges: r(2, 5), rejected: { missing_timestamp: 1 } },
    ],
    expected: {
      0: { byReason: { bad_json: 2 }, known: true },
      1: { byReason: { missing_timestamp: 3 }, known: false },
    },
  },
])('$name', ({ counted, pending, expected }) => {
  expect(Object.fromEntries(countRejected(counted, pending))).toEqual(expected);
});

const segment = (w: number, from: number, to: number, rejected?: Segment['rejected']): Segment => ({
  key: w * M,
  windowStart: w * M,
  windowEnd: (w + 1) * M,
  state: 'IMMUTABLE',
  rows: new Map([['de', { dimensions: ['de'], values: [to - from - 1] }]]),
  delta: new Map(),
  ranges: new Map([[0, r(from, to)]]),
  epochs: new Map([[0, 1]]),
  ...(rejected ? { rejected } : {}),
});
const counts = (json: Record<string, number>) => reasonCountsFromJson(json);

test('checkpoints keep the counts; one written before them leaves them not known', () => {
  const s = segment(0, 0, 10, new Map([[0, counts({ too_late: 1 })]]));
  expect(restoredSegment(segmentCheckpoint(s, [], undefined), 0).rejected).toEqual(s.rejected);
  const before = segmentCheckpoint(s, [], undefined);
  delete before.rejected;
  expect(restoredSegment(before, 0).rejected).toBeUndefined();

  const ps = {
    partition: 0,
    epoch: 1,
    state: 'consuming' as const,
    position: 12n,
    stopOffset: null,
    highWatermark: null,
    lastRecordAt: 0,
    generation: 0,
  };
  const clock = {
    watermark: null,
    currentWindow: null,
    pending: r(10, 12),
    pendingRejected: counts({ bad_json: 2 }),
  };
  const written = partitionCheckpoint(ps, clock);
  expect(restoredPartition(written, 0).clock.pendingRejected).toEqual(clock.pendingRejected);
  delete written.pendingRejected;
  expect(restoredPartition(written, 0).clock.pendingRejected).toBeNull();
  expect(
    restoredPartition({ ...written, pending: [] }, 0).clock.pendingRejected?.every((n) => n === 0),
  ).toBe(true);
});

test('the answer says per partition how many of its offsets were rejected records, and the table says it too', async () => {
  const storage = new MemoryDeepStorage();
  // Committed: window 0 with 2 records too late; window 1 from a receiver that did not count.
  await commitSegments(storage, schema, [
    segment(0, 0, 10, new Map([[0, counts({ too_late: 2 })]])),
    segment(1, 10, 20),
  ]);
  // Live: window 2 with one malformed record, and a pending run with two more.
  const live = [segment(2, 20, 30, new Map([[0, counts({ bad_json: 1 })]]))];
  const clocks = new Map([[0, { pending: r(30, 32), pendingRejected: counts({ bad_json: 2 }) }]]);
  const service = oneReceiverService({
    cube: oneSetCube(schema),
    storage,
    answer: receiverOver(schema, live, clocks),
  });
  const answer = await service.answer('shop', 'orders', {});
  expect(answer.complete).toBe(true);
  expect(answer.partitions).toMatchObject([
    { partition: 0, rejected: { too_late: 2, bad_json: 3 }, rejectedKnown: false },
  ]);
  expect(answer).toMatchObject({ rejected: 5, rejectedKnown: false });
  expect(completenessNote(answer)).toBe(
    'complete: every offset of 1 partitions counted once; 5 of them rejected records, in no row (bad_json: 3, too_late: 2); rejected records not known for partitions 0\n',
  );
});

test('a clean answer says nothing more; an answer with rejected records says how many', () => {
  const p = { partition: 0, from: '0', to: '10', covered: [], complete: true, missing: [] };
  expect(
    completenessNote({ complete: true, partitions: [{ ...p, rejected: {}, rejectedKnown: true }] }),
  ).toBe('complete: every offset of 1 partitions counted once\n');
  expect(
    completenessNote({
      complete: true,
      partitions: [{ ...p, rejected: { too_late: 4 }, rejectedKnown: true }],
    }),
  ).toBe(
    'complete: every offset of 1 partitions counted once; 4 of them rejected records, in no row (too_late: 4)\n',
  );
});
