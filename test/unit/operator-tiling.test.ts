// The tiling check the operator reports: every replica's copy of a partition, with the other
// replica sets' offsets, tiles the log; a gap or an overlap is named with the copies that show it,
// offsets Kafka deleted before they were read are no gap, and how far each partition is handed off.
import { type ReplicaCoverage, checkTiling, offsetsNotTiled } from '../../src/operator/tiling.ts';

type Ranges = [number, number][];

const replica = (
  receiver: string,
  partitions: Record<number, { kept: Ranges; handedOff?: Ranges; lost?: Ranges }>,
): ReplicaCoverage => ({
  receiver,
  replicaSet: receiver.replace(/-\d+$/, ''),
  coverage: Object.fromEntries(
    Object.entries(partitions).map(([p, c]) => [
      p,
      {
        kept: c.kept.map(([a, b]): [string, string] => [String(a), String(b)]),
        handedOff: (c.handedOff ?? []).map(([a, b]): [string, string] => [String(a), String(b)]),
      },
    ]),
  ),
  lost: new Map(
    Object.entries(partitions).map(([p, c]) => [
      Number(p),
      (c.lost ?? []).map(([from, to]) => ({ from: BigInt(from), to: BigInt(to) })),
    ]),
  ),
});

const findings = (
  replicas: ReplicaCoverage[],
  epochStarts: Record<string, string> = {},
): string[] =>
  checkTiling(replicas, epochStarts).findings.map(
    (f) => `${f.partition} ${f.kind} [${f.from}, ${f.to}) ${f.receivers.sort().join(',')}`,
  );

const handedOffTo = (replicas: ReplicaCoverage[]): Record<number, string> =>
  Object.fromEntries([...checkTiling(replicas).handedOffTo].map(([p, to]) => [p, String(to)]));

test.each<[string, ReplicaCoverage[], Record<string, string>, string[]]>([
  [
    'a partition moved from rs-a to rs-b at 100, both replicas of each alike',
    [
      replica('rs-a-0', { 0: { kept: [[0, 100]] } }),
      replica('rs-a-1', { 0: { kept: [[0, 100]] } }),
      replica('rs-b-0', { 0: { kept: [[100, 250]] } }),
      replica('rs-b-1', { 0: { kept: [[100, 240]] } }),
    ],
    { 0: '100' },
    [],
  ],
  [
    'the owner starting short of where its epoch began: a gap in its copies',
    [
      replica('rs-a-0', { 0: { kept: [[0, 100]] } }),
      replica('rs-b-0', { 0: { kept: [[120, 250]] } }),
      replica('rs-b-1', { 0: { kept: [[120, 250]] } }),
    ],
    { 0: '100' },
    ['0 gap [100, 120) rs-b-0,rs-b-1'],
  ],
  [
    'a hole between sets before the current epoch is no finding: the set that kept it dropped the cube',
    [
      replica('rs-b-0', {
        0: {
          kept: [
            [0, 530],
            [542, 700],
          ],
        },
      }),
    ],
    { 0: '542' },
    [],
  ],
  [
    'a source that ran past the stop offset unfenced: an overlap',
    [
      replica('rs-a-0', { 0: { kept: [[0, 120]] } }),
      replica('rs-b-0', { 0: { kept: [[100, 250]] } }),
    ],
    { 0: '100' },
    ['0 overlap [100, 120) rs-a-0,rs-b-0'],
  ],
  [
    'one replica missing offsets its sibling has: a gap in its copy only',
    [
      replica('rs-a-0', { 0: { kept: [[0, 100]] } }),
      replica('rs-a-1', {
        0: {
          kept: [
            [0, 50],
            [60, 100],
          ],
        },
      }),
      replica('rs-b-0', { 0: { kept: [[100, 200]] } }),
    ],
    {},
    ['0 gap [50, 60) rs-a-1'],
  ],
  [
    'a set that starts past where the epoch began, the set before gone: no finding',
    [replica('rs-b-0', { 0: { kept: [[120, 250]] } })],
    { 0: '100' },
    [],
  ],
  [
    'a replica given the partition late (a new one) is compared from where it began',
    [
      replica('rs-a-0', { 0: { kept: [[20, 100]] } }),
      replica('rs-a-1', { 0: { kept: [[70, 100]] } }),
      replica('rs-b-0', { 0: { kept: [[0, 20]] } }),
    ],
    { 0: '20' },
    [],
  ],
  [
    'offsets Kafka deleted before a replica read them are no gap; what they do not cover is',
    [
      replica('rs-a-0', { 0: { kept: [[0, 100]] } }),
      replica('rs-b-0', {
        0: {
          kept: [
            [100, 105],
            [140, 200],
          ],
          lost: [[105, 130]],
        },
      }),
      replica('rs-b-1', { 0: { kept: [[100, 200]] } }),
      replica('rs-b-2', {
        0: {
          kept: [
            [100, 105],
            [140, 200],
          ],
          lost: [[105, 140]],
        },
      }),
    ],
    { 0: '100' },
    ['0 gap [130, 140) rs-b-0'],
  ],
  [
    'partitions are checked apart, and a copy that moved back and forth tiles',
    [
      replica('rs-a-0', {
        0: {
          kept: [
            [0, 100],
            [300, 400],
          ],
        },
        1: { kept: [[0, 10]] },
      }),
      replica('rs-b-0', { 0: { kept: [[100, 300]] }, 1: { kept: [[12, 20]] } }),
    ],
    { 0: '300', 1: '10' },
    ['1 gap [10, 12) rs-b-0'],
  ],
])('%s', (_, replicas, epochStarts, expected) => {
  expect(findings(replicas, epochStarts)).toEqual(expected);
});

test('a replica that does not know its coverage (an older checkpoint) is left out', () => {
  const older: ReplicaCoverage = { ...replica('rs-a-1', {}), coverage: undefined };
  expect(
    findings([
      replica('rs-a-0', { 0: { kept: [[0, 100]] } }),
      older,
      replica('rs-b-0', { 0: { kept: [[100, 200]] } }),
    ]),
  ).toEqual([]);
});

test('handed off to: the end of the handed-off run from the first offset kept anywhere', () => {
  expect(
    handedOffTo([
      replica('rs-a-0', { 0: { kept: [[0, 100]], handedOff: [[0, 100]] }, 1: { kept: [[5, 9]] } }),
      // Its sibling has handed off less: one copy in deep storage is enough.
      replica('rs-a-1', { 0: { kept: [[0, 100]], handedOff: [[0, 40]] } }),
      replica('rs-b-0', {
        0: {
          kept: [[100, 250]],
          handedOff: [
            [100, 180],
            [190, 200],
          ],
        },
        1: { kept: [[9, 30]], handedOff: [[9, 20]] },
      }),
    ]),
  ).toEqual({ 0: '180', 1: '5' });
});

test('handed off to: on through the offsets of a set that has dropped the cube (committed before it did), not through a gap', () => {
  // rs-c consumed [100, 200) and [300, 320), then left the cube (a pool scaled in): its hand-offs
  // are in deep storage, and no receiver reports them any more.
  const afterRsC = [
    replica('rs-a-0', { 0: { kept: [[0, 100]], handedOff: [[0, 100]] } }),
    replica('rs-b-0', {
      0: {
        kept: [
          [200, 300],
          [320, 400],
        ],
        handedOff: [
          [200, 300],
          [320, 350],
        ],
      },
    }),
  ];
  expect(handedOffTo(afterRsC)).toEqual({ 0: '350' });
  // Not past data not handed off yet: rs-b's [300, 320) is kept, not handed off.
  const notYet = [
    replica('rs-a-0', { 0: { kept: [[0, 100]], handedOff: [[0, 100]] } }),
    replica('rs-b-0', { 0: { kept: [[200, 400]], handedOff: [[200, 300]] } }),
  ];
  expect(handedOffTo(notYet)).toEqual({ 0: '300' });
  // rs-a had the partition back at 250, where rs-c's range ended, and has kept nothing since.
  const back = [replica('rs-a-0', { 0: { kept: [[0, 100]], handedOff: [[0, 100]] } })];
  expect(handedOffTo(back)).toEqual({ 0: '100' });
  expect(checkTiling(back, { 0: '250' }).handedOffTo.get(0)).toBe(250n);
  // The owner starting short of where its epoch began: [100, 120) is a gap, not handed off.
  const short = checkTiling(
    [
      replica('rs-a-0', { 0: { kept: [[0, 100]], handedOff: [[0, 100]] } }),
      replica('rs-b-0', { 0: { kept: [[120, 250]], handedOff: [[120, 250]] } }),
    ],
    { 0: '100' },
  );
  expect(short.findings.map((f) => [f.kind, f.from, f.to])).toEqual([['gap', 100n, 120n]]);
  expect(short.handedOffTo.get(0)).toBe(100n);
});

test('the Degraded problem names the first findings and counts the rest; the cube stays Ready', () => {
  const replicas = [
    replica('rs-a-0', { 0: { kept: [[0, 11]] }, 1: { kept: [[0, 12]] }, 2: { kept: [[0, 13]] } }),
    replica('rs-b-0', {
      0: { kept: [[10, 20]] },
      1: { kept: [[10, 20]] },
      2: { kept: [[10, 20]] },
      3: { kept: [[0, 5]] },
    }),
    replica('rs-c-0', { 3: { kept: [[4, 9]] } }),
  ];
  expect(offsetsNotTiled(checkTiling(replicas).findings)).toEqual({
    reason: 'OffsetsNotTiled',
    message:
      "the replicas' offsets do not tile (4 findings): partition 0: overlap [10, 11) in the copy of rs-a-0, rs-b-0; " +
      'partition 1: overlap [10, 12) in the copy of rs-a-0, rs-b-0; partition 2: overlap [10, 13) in the copy of rs-a-0, rs-b-0; and 1 more',
    keepsReady: true,
  });
});

describe('offsets resets skipped or re-read', () => {
  // rs-a read [0, 500), was reset forward to 540 (skipped [500, 540)), then back to 300: its
  // copies keep [0, 500) and [300, …) merged, [540, …) after the skip.
  const copies = [
    replica('rs-a-0', {
      0: {
        kept: [
          [0, 500],
          [540, 700],
        ],
      },
    }),
    replica('rs-a-1', {
      0: {
        kept: [
          [0, 500],
          [540, 690],
        ],
      },
    }),
  ];
  test.each<[string, Map<number, { from: bigint; to: bigint }[]>, string[]]>([
    ['the skipped range told: no finding', new Map([[0, [{ from: 500n, to: 540n }]]]), []],
    ['not told: a gap in both copies', new Map(), ['0 gap [500, 540) rs-a-0,rs-a-1']],
  ])('%s', (_name, skipped, expected) => {
    expect(
      checkTiling(copies, { 0: '300' }, skipped).findings.map(
        (f) => `${f.partition} ${f.kind} [${f.from}, ${f.to}) ${f.receivers.sort().join(',')}`,
      ),
    ).toEqual(expected);
  });
});
