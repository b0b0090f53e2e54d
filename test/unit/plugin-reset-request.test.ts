// `kubectl streamcube reset-offsets`, the pure part: its flags as the request the annotation
// carries, the flags it refuses (naming them), and what it checks against the cube before writing.
import type { CubeAssignment } from '../../src/api/cube-assignment.ts';
import { precheckReset, resetRequestOf, type ResetFlags } from '../../src/plugin/reset-request.ts';

const now = new Date('2026-03-01T10:20:30.456Z');

test.each<[string, ResetFlags, object]>([
  ['--to-earliest', { 'to-earliest': true }, { id: 'reset-20260301T102030', to: 'earliest' }],
  [
    '--to-latest --partitions 0,2 --id skip',
    { 'to-latest': true, partitions: '0,2', id: 'skip' },
    { id: 'skip', to: 'latest', partitions: [0, 2] },
  ],
  [
    '--to-datetime',
    { 'to-datetime': '2026-03-01T10:00:00Z', id: 't' },
    { id: 't', to: { timestamp: Date.UTC(2026, 2, 1, 10) } },
  ],
  [
    '--to-offset',
    { 'to-offset': '0=120, 3=88', id: 'o' },
    { id: 'o', to: { offsets: { '0': '120', '3': '88' } } },
  ],
])('%s', (_name, flags, request) => {
  expect(resetRequestOf(flags, now)).toEqual({ ok: true, request });
});

test.each<[string, ResetFlags, RegExp]>([
  ['no target', {}, /needs one of --to-earliest/],
  [
    'two targets',
    { 'to-earliest': true, 'to-latest': true },
    /one target, got --to-earliest and --to-latest/,
  ],
  ['a date that is not one', { 'to-datetime': 'yesterday' }, /--to-datetime must be an ISO-8601/],
  ['an offset pair without =', { 'to-offset': '0:12' }, /PARTITION=OFFSET pairs .* got '0:12'/],
  ['offsets with --partitions', { 'to-offset': '0=1', partitions: '0' }, /leave --partitions out/],
  ['a partition that is not a number', { 'to-latest': true, partitions: '0,x' }, /got 'x'/],
  ['an id with a space', { 'to-latest': true, id: 'a b' }, /id: must be letters/],
])('refused: %s', (_name, flags, reason) => {
  const asked = resetRequestOf(flags, now);
  expect(asked.ok).toBe(false);
  if (!asked.ok) expect(asked.message).toMatch(reason);
});

const cube = {
  metadata: { namespace: 'shop', name: 'orders' },
  spec: { suspend: false },
  status: {
    assignment: { 'rs-a': [0, 1], 'rs-b': [2] },
    resets: [{ id: 'old', to: 'latest', result: 'Applied', at: '2026-03-01T00:00:00.000Z' }],
  },
} as unknown as CubeAssignment;

test.each<[string, CubeAssignment, object, string | undefined]>([
  ['a placed partition', cube, { id: 'n', to: 'earliest', partitions: [2] }, undefined],
  [
    'a partition not placed',
    cube,
    { id: 'n', to: { offsets: { '5': '1' } } },
    'partition 5 is not a partition of cube shop/orders (placed: 0, 1, 2)',
  ],
  [
    'an id used before',
    cube,
    { id: 'old', to: 'earliest' },
    'cube shop/orders already has a reset with id old (Applied); a new reset needs a new --id',
  ],
  [
    'a suspended cube',
    { ...cube, spec: { ...cube.spec, suspend: true } },
    { id: 'n', to: 'earliest' },
    'cube shop/orders is suspended: a reset waits until it is resumed (kubectl streamcube resume)',
  ],
])('precheck: %s', (_name, c, request, problem) => {
  expect(precheckReset(c, request as never)).toBe(problem);
});
