// The status view summarises: every ACTIVE and IMMUTABLE segment is listed, of the handed-off ones
// only the latest, and the counts cover every segment held.
import type { Segment, SegmentState } from '../../src/receiver/segments.ts';
import { segmentsView } from '../../src/receiver/status-view.ts';

const segment = (windowStart: number, state: SegmentState): Segment => ({
  key: windowStart,
  windowStart,
  windowEnd: windowStart + 1,
  state,
  rows: new Map(),
  delta: new Map(),
  ranges: new Map(),
  epochs: new Map(),
});

test.each<[string, SegmentState[], number, number[]]>([
  ['nothing held', [], 2, []],
  ['fewer handed off than listed: all of them', ['HANDED_OFF', 'ACTIVE'], 2, [0, 1]],
  [
    'more handed off than listed: the latest ones, and every other segment',
    ['HANDED_OFF', 'HANDED_OFF', 'IMMUTABLE', 'HANDED_OFF', 'HANDED_OFF', 'ACTIVE'],
    2,
    [2, 3, 4, 5],
  ],
  ['none listed', ['HANDED_OFF', 'IMMUTABLE', 'HANDED_OFF'], 0, [1]],
])('%s', (_name, states, limit, listed) => {
  // Given out of window order: the view sorts.
  const segments = states.map((s, i) => segment(i, s)).reverse();
  const view = segmentsView(segments, limit);
  expect(view.listed.map((s) => s.windowStart)).toEqual(listed);
  const count = (state: SegmentState) => states.filter((s) => s === state).length;
  expect(view.counts).toEqual({
    ACTIVE: count('ACTIVE'),
    IMMUTABLE: count('IMMUTABLE'),
    HANDED_OFF: count('HANDED_OFF'),
  });
});
