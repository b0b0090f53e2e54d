// The summary of a cube's observation, without I/O: from the replicas' reports to status rows,
// segment counts, unconsumed partitions, failed consumers and released data not committed.
import type { CubeSummary, PartitionStatus } from '../../src/protocol/admin-api.ts';
import { summarizeObservation } from '../../src/operator/cube/observation.ts';
import { cubeSummary } from '../support/cube-summaries.ts';

const partition = (
  p: number,
  state: PartitionStatus['state'],
  position: string,
  lag: string | null = '0',
): PartitionStatus => ({
  partition: p,
  state,
  epoch: 1,
  position,
  highWatermark: lag === null ? null : String(BigInt(position) + BigInt(lag)),
  lag,
  stopOffset: null,
  watermark: null,
});

function report(receiver: string, extra: Partial<CubeSummary>) {
  return {
    receiver,
    status: { ...cubeSummary('orders', 'd1', 'shop'), receiver, ...extra },
  };
}

test('positions from a replica whose consumer runs; segments of one replica per set; lag summed', () => {
  const summary = summarizeObservation(
    [
      {
        replicaSet: 'rs-a',
        owned: [0, 1],
        reports: [
          report('rs-a-0', {
            partitions: [partition(0, 'failed', '10'), partition(1, 'failed', '20')],
            consumer: {
              state: 'failed',
              failures: 3,
              error: { name: 'KafkaJSError', message: 'down' },
            },
            segments: { active: 9, immutable: 9, handedOff: 9 },
          }),
          report('rs-a-1', {
            partitions: [
              partition(0, 'consuming', '15', '5'),
              partition(1, 'consuming', '25', '2'),
            ],
            segments: { active: 1, immutable: 2, handedOff: 3 },
          }),
        ],
      },
      { replicaSet: 'rs-b', owned: [2], reports: [] },
    ],
    [0, 1, 2],
    {},
  );
  expect(summary.status.partitions.map((r) => [r.partition, r.replicaSet, r.position])).toEqual([
    [0, 'rs-a', '15'],
    [1, 'rs-a', '25'],
  ]);
  expect(summary.status.totalLag).toBe('7');
  expect(summary.status.segments).toEqual({ active: 1, immutable: 2, handedOff: 3 });
  // rs-b has no report: its partition is consumed by nobody.
  expect(summary.unowned).toEqual([2]);
  expect(summary.failed).toEqual([
    {
      reason: 'ConsumerFailed',
      message:
        'the Kafka consumer of receiver rs-a-0 (rs-a) has failed: KafkaJSError: down; partitions 0, 1 not read there; the receiver restarts it with backoff',
    },
  ]);
  expect(summary.releasedUncommitted).toEqual(new Map([['rs-a', []]]));
});

test('a partition paused or released by its owner is not consumed; the topic unknown: nothing unowned', () => {
  const sets = [
    {
      replicaSet: 'rs-a',
      owned: [0, 1],
      reports: [
        report('rs-a-0', {
          partitions: [partition(0, 'draining', '5'), partition(1, 'paused', '5')],
        }),
      ],
    },
  ];
  expect(summarizeObservation(sets, [0, 1], {}).unowned).toEqual([1]);
  expect(summarizeObservation(sets, undefined, {}).unowned).toEqual([]);
});

test('a set keeping data of a partition moved away, not committed: listed for its set', () => {
  const summary = summarizeObservation(
    [
      {
        replicaSet: 'rs-a',
        owned: [0],
        reports: [
          report('rs-a-0', {
            partitions: [partition(0, 'consuming', '5')],
            coverage: {
              '0': { kept: [['0', '5']], handedOff: [] },
              '3': { kept: [['0', '10']], handedOff: [['0', '8']] },
            },
          }),
        ],
      },
    ],
    [0],
    {},
  );
  expect(summary.releasedUncommitted).toEqual(new Map([['rs-a', [3]]]));
});
