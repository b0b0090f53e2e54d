// Per-replica convergence as tables: what a replica reports of a partition × what its set should
// hold → the calls that bring it there; then the desired states derived at rest (status and the
// siblings' reports) and during a move (the journal).
import type { ReassignJournal } from '../../src/api/cube-assignment.ts';
import {
  type DesiredPartition,
  type ReportedPartition,
  desiredAtRest,
  desiredInMove,
  noRepairs,
  replicaRepairs,
} from '../../src/operator/replica-convergence.ts';

/** Partition 0 as a replica reports it. */
const held = (
  state: ReportedPartition['state'],
  epoch: number,
  position: string,
  stopOffset: string | null = null,
): ReportedPartition => ({ partition: 0, state, epoch, position, stopOffset, watermark: 7 });

const owned = (epoch: number, start = true): DesiredPartition => ({
  partition: 0,
  owned: true,
  epoch,
  ...(start ? { start: { position: '50', watermark: 9 } } : {}),
});
const handedOver = (epoch: number, stop?: string): DesiredPartition => ({
  partition: 0,
  owned: false,
  epoch,
  ...(stop === undefined ? {} : { stop }),
});

/** The repairs in a line: the calls made, in order, and what stays unresolved. */
function calls(reported: ReportedPartition[], desired: DesiredPartition, ownsNothing = false) {
  const r = replicaRepairs(reported, [desired], { suspended: false, ownsNothing });
  const out: string[] = [];
  if (r.release) out.push(`release ${JSON.stringify(r.release.stopOffsets)}`);
  if (r.drain) out.push(`drain ${JSON.stringify(r.drain)}`);
  for (const a of r.assign)
    out.push(`assign ${a.partition}@${a.position}/e${a.epoch}/w${a.watermark}`);
  if (r.resume.length > 0) out.push(`resume [${r.resume.join(',')}]`);
  if (r.pause.length > 0) out.push(`pause [${r.pause.join(',')}]`);
  if (r.seal) out.push('seal');
  for (const u of r.unresolved) out.push(`unresolved: ${u.reason}`);
  return out.join('; ') || 'nothing';
}

describe('replicaRepairs: report × desired → calls', () => {
  const table: [string, ReportedPartition[], DesiredPartition, string][] = [
    // Its set owns the partition under epoch 3.
    ['consuming at the set epoch', [held('consuming', 3, '80')], owned(3), 'nothing'],
    ['draining at the set epoch', [held('draining', 3, '80', '90')], owned(3), 'nothing'],
    ['failed consumer at the set epoch', [held('failed', 3, '80')], owned(3), 'nothing'],
    [
      'paused at the set epoch (a move rolled back, a suspend ended)',
      [held('paused', 3, '80')],
      owned(3),
      'resume [0]',
    ],
    [
      'stopped at the set epoch (a missed release of a move undone)',
      [held('stopped', 3, '80', '80')],
      owned(3),
      'resume [0]',
    ],
    ['not held (a target that missed Starting)', [], owned(3), 'assign 0@50/e3/w9'],
    [
      'released under an older epoch (moved away and back)',
      [held('released', 2, '40', '40')],
      owned(3),
      'assign 0@50/e3/w9',
    ],
    [
      'stopped under an older epoch',
      [held('stopped', 2, '40', '40')],
      owned(3),
      'assign 0@50/e3/w9',
    ],
    [
      'not held, no sibling to take the position from',
      [],
      owned(3, false),
      'unresolved: no replica of its set to take the position from',
    ],
    [
      'held under a newer epoch than status',
      [held('consuming', 4, '80')],
      owned(3),
      "unresolved: held under epoch 4, newer than its set's 3",
    ],
    [
      'released under the set epoch',
      [held('released', 3, '80', '80')],
      owned(3),
      "unresolved: released under its set's epoch 3",
    ],
    // Another set owns it under epoch 3, started from offset 100.
    ['released already', [held('released', 2, '100', '100')], handedOver(3, '100'), 'nothing'],
    ['not held', [], handedOver(3, '100'), 'nothing'],
    [
      'stopped at the stop (missed Starting)',
      [held('stopped', 2, '100', '100')],
      handedOver(3, '100'),
      'release {"0":"100"}',
    ],
    [
      'paused short of the stop (missed Draining)',
      [held('paused', 2, '90')],
      handedOver(3, '100'),
      'drain {"0":"100"}',
    ],
    [
      'consuming short of the stop (missed Pausing)',
      [held('consuming', 2, '90')],
      handedOver(3, '100'),
      'drain {"0":"100"}',
    ],
    [
      'consuming past the stop (missed Pausing, restarted): released, the excess fenced',
      [held('consuming', 2, '130')],
      handedOver(3, '100'),
      'release {"0":"100"}',
    ],
    [
      'stopped, stop not known from status: its own stop offset',
      [held('stopped', 2, '100', '100')],
      handedOver(3),
      'release {"0":"100"}',
    ],
    [
      'consuming, stop not known: paused until it is',
      [held('consuming', 2, '130')],
      handedOver(3),
      'pause [0]; unresolved: held under epoch 2 at 130, and the offset its owner started from is not known',
    ],
    [
      'held under the owner epoch (not ours to judge)',
      [held('consuming', 3, '130')],
      handedOver(3, '100'),
      'nothing',
    ],
  ];
  test.each(
    table.map(([name, reported, desired, expected]) => ({ name, reported, desired, expected })),
  )('$name → $expected', ({ reported, desired, expected }) => {
    expect(calls(reported, desired)).toBe(expected);
  });

  test('a set that owns nothing seals a replica once it holds no partition, releases first', () => {
    expect(calls([held('released', 2, '100', '100')], handedOver(3, '100'), true)).toBe('seal');
    expect(calls([held('stopped', 2, '100', '100')], handedOver(3, '100'), true)).toBe(
      'release {"0":"100"}; seal',
    );
    expect(calls([held('paused', 2, '90')], handedOver(3, '100'), true)).toBe('drain {"0":"100"}');
  });

  test('a suspended cube resumes nothing', () => {
    const r = replicaRepairs([held('paused', 3, '80')], [owned(3)], {
      suspended: true,
      ownsNothing: false,
    });
    expect(noRepairs(r)).toBe(true);
  });
});

describe('desiredAtRest', () => {
  const assignment = { 'rs-a': [0], 'rs-b': [1] };
  const epochs = { '0': 3, '1': 2 };
  const sibling = (partitions: ReportedPartition[], running = true) => ({ running, partitions });

  test("owned partitions at the set's epoch, taken at a running sibling's position and watermark", () => {
    const siblings = [
      sibling([{ ...held('consuming', 3, '70'), watermark: 5 }], false),
      sibling([{ ...held('consuming', 3, '80'), watermark: 6 }]),
    ];
    expect(desiredAtRest(assignment, epochs, 'rs-a', [], siblings)).toEqual([
      { partition: 0, owned: true, epoch: 3, start: { position: '80', watermark: 6 } },
    ]);
  });

  test('a partition held but owned by another set is handed over where a sibling released it', () => {
    const mine = { ...held('paused', 1, '30'), partition: 1 };
    const released = { ...held('released', 1, '45', '40'), partition: 1 };
    expect(desiredAtRest(assignment, epochs, 'rs-a', [mine], [sibling([released])])).toEqual([
      { partition: 0, owned: true, epoch: 3 },
      { partition: 1, owned: false, epoch: 2, stop: '40' },
    ]);
    // Released at another epoch (an earlier move): it says nothing of this one.
    const earlier = { ...released, epoch: 0 };
    expect(desiredAtRest(assignment, epochs, 'rs-a', [mine], [sibling([earlier])])[1]).toEqual({
      partition: 1,
      owned: false,
      epoch: 2,
    });
  });

  test('with no sibling left to say, a replica one move behind hands over where the epoch began; one further behind is not told', () => {
    // rs-a was emptied while this replica was down: its siblings released, sealed and dropped
    // the cube; partition 1 is rs-b's at epoch 2, from offset 40.
    const starts = { '0': '12', '1': '40' };
    const oneBehind = { ...held('paused', 1, '30'), partition: 1 };
    expect(desiredAtRest(assignment, epochs, 'rs-a', [oneBehind], [], starts)[1]).toEqual({
      partition: 1,
      owned: false,
      epoch: 2,
      stop: '40',
    });
    // Two moves behind: where epoch 1 ended is not the start of epoch 2.
    const twoBehind = { ...oneBehind, epoch: 0 };
    expect(desiredAtRest(assignment, epochs, 'rs-a', [twoBehind], [], starts)[1]).toEqual({
      partition: 1,
      owned: false,
      epoch: 2,
    });
    // A sibling that released it under the same epoch still says where.
    const released = { ...held('released', 1, '45', '41'), partition: 1 };
    expect(
      desiredAtRest(assignment, epochs, 'rs-a', [oneBehind], [sibling([released])], starts)[1],
    ).toEqual({ partition: 1, owned: false, epoch: 2, stop: '41' });
  });

  test('a partition without an epoch in status is left alone', () => {
    expect(desiredAtRest({ 'rs-a': [0] }, {}, 'rs-a', [], [])).toEqual([]);
  });
});

describe('desiredInMove', () => {
  const journal: ReassignJournal = {
    id: 'r-1',
    phase: 'Sealing',
    moves: [
      { partition: 0, from: 'rs-a', to: 'rs-b' },
      { partition: 2, to: 'rs-a' },
    ],
    stopOffsets: { '0': '105', '2': '0' },
    watermarks: { '0': 1_500 },
    startedAt: '2026-11-30T10:00:00.000Z',
  };

  test('targets own the moving partitions under the next epoch from the stops; sources hand them over there', () => {
    expect(desiredInMove(journal, { '0': 1 }, 'rs-b')).toEqual([
      { partition: 0, owned: true, epoch: 2, start: { position: '105', watermark: 1_500 } },
    ]);
    expect(desiredInMove(journal, { '0': 1 }, 'rs-a')).toEqual([
      { partition: 0, owned: false, epoch: 2, stop: '105' },
      { partition: 2, owned: true, epoch: 1, start: { position: '0', watermark: null } },
    ]);
    expect(desiredInMove(journal, { '0': 1 }, 'rs-c')).toEqual([]);
  });
});
