// Offset resets, the pure parts: the annotation's request and its refusals, where each partition
// restarts against the brokers' range, what a reset did to a partition's offsets (skipped or
// re-read, never lost or double) and the records a completed reset writes.
import {
  parseResetRequest,
  withResetRecord,
  type ResetRecord,
} from '../../src/api/offset-reset.ts';
import { replayOf, resetRange, resetRanges, resetRangeReason } from '../../src/api/reset-ranges.ts';
import {
  resolveResetTargets,
  type BrokerOffsets,
} from '../../src/operator/offset-reset/targets.ts';
import { completionStatus, resetPartitions } from '../../src/operator/reassign/completion.ts';
import { restartedByReset } from '../../src/operator/reassign/moves.ts';
import type { CubeAssignment } from '../../src/api/cube-assignment.ts';

describe('parseResetRequest', () => {
  test.each([
    ['{"id":"r1","to":"earliest"}', { id: 'r1', to: 'earliest' }],
    [
      '{"id":"r1","to":"latest","partitions":[0,2]}',
      { id: 'r1', to: 'latest', partitions: [0, 2] },
    ],
    [
      '{"id":"r1","to":{"timestamp":1700000000000}}',
      { id: 'r1', to: { timestamp: 1700000000000 } },
    ],
    ['{"id":"r1","to":{"offsets":{"0":"12"}}}', { id: 'r1', to: { offsets: { '0': '12' } } }],
  ])('%s is a request', (text, request) => {
    expect(parseResetRequest(text)).toEqual({ ok: true, request });
  });

  test.each([
    ['not json', /is not JSON/],
    ['{"to":"earliest"}', /id: /],
    ['{"id":"r1","to":"yesterday"}', /\(id r1\): to: /],
    ['{"id":"r1","to":{"offsets":{"0":"-1"}}}', /to/],
    ['{"id":"r1","to":{"offsets":{}}}', /at least one partition/],
    ['{"id":"r1","to":"earliest","partitions":[1,1]}', /partitions must be unique/],
    ['{"id":"r1","to":{"offsets":{"0":"1"}},"partitions":[0]}', /leave partitions out/],
    ['{"id":"r1","to":"earliest","extra":1}', /extra|Unrecognized/],
  ])('%s is refused with a reason', (text, reason) => {
    const parsed = parseResetRequest(text);
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) {
      expect(parsed.message).toMatch(/^streamcube\.io\/reset-offsets/);
      expect(parsed.message).toMatch(reason);
    }
  });
});

describe('resolveResetTargets', () => {
  const owners = new Map([
    [0, 'rs-a'],
    [1, 'rs-a'],
    [2, 'rs-b'],
  ]);
  const offsets = new Map<number, BrokerOffsets>([
    [0, { low: 0n, high: 100n }],
    [1, { low: 10n, high: 50n }],
    [2, { low: 0n, high: 0n }],
    [3, { low: 0n, high: 7n }],
  ]);
  const resolve = (text: string, atTimestamp?: Map<number, bigint>) => {
    const parsed = parseResetRequest(text);
    if (!parsed.ok) throw new Error(parsed.message);
    return resolveResetTargets({
      request: parsed.request,
      topic: 'orders',
      owners,
      offsets,
      ...(atTimestamp ? { atTimestamp } : {}),
    });
  };

  test.each([
    ['{"id":"a","to":"earliest"}', { '0': '0', '1': '10', '2': '0' }],
    ['{"id":"a","to":"latest"}', { '0': '100', '1': '50', '2': '0' }],
    ['{"id":"a","to":"latest","partitions":[1]}', { '1': '50' }],
    ['{"id":"a","to":{"offsets":{"0":"100","1":"10"}}}', { '0': '100', '1': '10' }],
  ])('%s restarts at %j', (text, targets) => {
    const resolved = resolve(text);
    expect(resolved.ok && resolved.targets).toEqual(targets);
  });

  test('a timestamp restarts at its first record at or after it; none: the high watermark', () => {
    const at = new Map([
      [0, 42n],
      [1, -1n],
    ]);
    expect(resolve('{"id":"t","to":{"timestamp":1000},"partitions":[0,1]}', at)).toEqual({
      ok: true,
      targets: { '0': '42', '1': '50' },
      to: 'timestamp 1970-01-01T00:00:01.000Z',
    });
  });

  test.each([
    [
      '{"id":"a","to":"earliest","partitions":[9]}',
      'partition 9 is not a partition of topic orders (it has 0-3)',
    ],
    ['{"id":"a","to":"earliest","partitions":[3]}', 'partition 3 has no owner yet'],
    [
      '{"id":"a","to":{"offsets":{"0":"101"}}}',
      'partition 0: offset 101 is outside what the brokers hold, [0, 100]',
    ],
    [
      '{"id":"a","to":{"offsets":{"1":"9"}}}',
      'partition 1: offset 9 is outside what the brokers hold, [10, 50]',
    ],
  ])('%s is refused: %s', (text, reason) => {
    const resolved = resolve(text);
    expect(resolved.ok).toBe(false);
    if (!resolved.ok) {
      expect(resolved.message).toContain('reset a refused, nothing changed: ');
      expect(resolved.message).toContain(reason);
    }
  });
});

describe('what a reset does to a partition', () => {
  test.each([
    ['forward: skipped', '100', '150', { kind: 'skipped', from: 100n, to: 150n }],
    ['backward: re-read', '100', '40', { kind: 'reread', from: 40n, to: 100n }],
    ['in place: nothing', '100', '100', undefined],
  ])('%s', (_name, from, to, range) => {
    expect(resetRange('r1', { partition: 0, from, to, epoch: 3 })).toEqual(
      range && { ...range, partition: 0, reset: 'r1', epoch: 3 },
    );
  });

  test('the reasons answers give', () => {
    expect(resetRangeReason({ kind: 'skipped', reset: 'r1' })).toBe('skipped by reset r1');
    expect(resetRangeReason({ kind: 'reread', reset: 'r2' })).toBe('re-read after reset r2');
  });

  const records: ResetRecord[] = [
    {
      id: 'back',
      to: 'earliest',
      result: 'Applied',
      at: '2026-01-01T00:00:00.000Z',
      partitions: [
        { partition: 0, from: '100', to: '0', epoch: 2 },
        { partition: 1, from: '50', to: '50', epoch: 2 },
      ],
    },
    { id: 'bad', to: 'latest', result: 'Refused', message: 'no', at: '2026-01-01T00:00:01.000Z' },
    {
      id: 'fwd',
      to: 'latest',
      result: 'Applied',
      at: '2026-01-01T00:00:02.000Z',
      partitions: [{ partition: 0, from: '130', to: '200', epoch: 3 }],
    },
  ];

  test('every applied reset, oldest first; refused ones and resets in place leave none', () => {
    expect(resetRanges(records).map((r) => [r.reset, r.kind, r.from, r.to])).toEqual([
      ['back', 'reread', 0n, 100n],
      ['fwd', 'skipped', 130n, 200n],
    ]);
  });

  test.each([
    [0, 1, 0],
    [0, 2, 1],
    [0, 3, 1],
    [1, 3, 0],
  ])('partition %i under epoch %i is in replay %i', (partition, epoch, replay) => {
    expect(replayOf(resetRanges(records), partition, epoch)).toBe(replay);
  });

  test('status.resets keeps the last ten, a repeated id once', () => {
    let list: ResetRecord[] = [];
    for (let i = 0; i < 12; i++) list = withResetRecord(list, { ...records[1]!, id: `r${i}` });
    list = withResetRecord(list, { ...records[1]!, id: 'r5', result: 'Applied' });
    expect(list.map((r) => r.id)).toEqual([
      'r2',
      'r3',
      'r4',
      'r6',
      'r7',
      'r8',
      'r9',
      'r10',
      'r11',
      'r5',
    ]);
  });
});

describe("a reset's completion", () => {
  const journal = {
    id: 'x-1-abc',
    phase: 'Sealing' as const,
    moves: [
      { partition: 1, from: 'rs-a', to: 'rs-a' },
      { partition: 0, from: 'rs-a', to: 'rs-a' },
    ],
    stopOffsets: { '0': '120', '1': '80' },
    reset: { id: 'r1', to: 'given offsets', targets: { '0': '0', '1': '90' } },
    startedAt: '2026-01-01T00:00:00.000Z',
  };
  const object = {
    spec: { replicaSets: ['rs-a'] },
    status: {
      assignment: { 'rs-a': [0, 1] },
      epochs: { '0': 1, '1': 4 },
      releasedUncommitted: undefined,
    },
  } as unknown as CubeAssignment;

  test('each partition from where it was drained to where it restarted, under its new epoch', () => {
    expect(resetPartitions(journal, { '0': 2, '1': 5 })).toEqual([
      { partition: 0, from: '120', to: '0', epoch: 2 },
      { partition: 1, from: '80', to: '90', epoch: 5 },
    ]);
  });

  test('the owner keeps its partitions; the epochs start at the targets; the reset is recorded', () => {
    const status = completionStatus(object, { ...journal, startedUncommitted: true });
    expect(status.assignment).toEqual({ 'rs-a': [0, 1] });
    expect(status.epochs).toEqual({ '0': 2, '1': 5 });
    expect(status.epochStarts).toEqual({ '0': '0', '1': '90' });
    // Nothing moved away from rs-a: no released data to wait for.
    expect(status.releasedUncommitted).toBeUndefined();
    expect(status.resets).toEqual([
      expect.objectContaining({ id: 'r1', result: 'Applied', to: 'given offsets' }),
    ]);
  });
});

describe('restartedByReset: a reset resumed in Starting releases no partition twice', () => {
  const reported = [
    { partition: 0, epoch: 3 },
    { partition: 1, epoch: 2 },
    { partition: 2, epoch: 3 },
  ];
  const epochs = { '0': 2, '1': 2, '2': 2 };
  test.each<[string, boolean, number[], number[]]>([
    ['a reset: those already under the next epoch', true, [0, 1], [0]],
    ['a reset of all', true, [0, 1, 2], [0, 2]],
    ['a move (source and target differ): none', false, [0, 1, 2], []],
  ])('%s', (_name, reset, partitions, restarted) => {
    const journal = reset ? { reset: { id: 'r', to: 'earliest', targets: {} } } : {};
    expect(restartedByReset(journal, epochs, reported, partitions)).toEqual(restarted);
  });
});
