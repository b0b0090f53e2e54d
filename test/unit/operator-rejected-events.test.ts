// The share of rejected records over the last minutes, from receivers' cumulative counters: the
// window slides over the operator's observations, a counter that goes down starts over, the worst
// replica decides, and the Event's text stays the same while the counts grow.
import { cubeAssignmentSpec, basisPointsOf, percentage } from '../../src/api/cube-assignment.ts';
import {
  RejectedEventsWindow,
  rejectedEventsProblem,
  type RejectionDelta,
} from '../../src/operator/rejected-events.ts';

const S = 1_000;
const rsA0 = { name: 'rs-a-0', replicaSet: 'rs-a' };

describe('the window over observations', () => {
  test('a first observation says nothing; the next one gives the growth since', () => {
    const w = new RejectedEventsWindow(300 * S);
    expect(w.observe('ns/orders', rsA0, 0, { ingested: 100, rejected: { too_late: 5 } })).toBe(
      undefined,
    );
    expect(
      w.observe('ns/orders', rsA0, 10 * S, {
        ingested: 190,
        rejected: { too_late: 6, bad_json: 9 },
      }),
    ).toEqual({
      receiver: 'rs-a-0',
      replicaSet: 'rs-a',
      read: 100,
      rejected: 10,
      byReason: { too_late: 1, bad_json: 9 },
      spanMs: 10 * S,
    });
  });

  test('what happened before the window no longer counts', () => {
    const w = new RejectedEventsWindow(300 * S);
    // A burst of rejections first, then only good events, observed every minute.
    w.observe('ns/orders', rsA0, 0, { ingested: 0, rejected: {} });
    w.observe('ns/orders', rsA0, 60 * S, { ingested: 0, rejected: { window_sealed: 1000 } });
    let last: RejectionDelta | undefined;
    for (let minute = 2; minute <= 7; minute++) {
      last = w.observe('ns/orders', rsA0, minute * 60 * S, {
        ingested: minute * 100,
        rejected: { window_sealed: 1000 },
      });
    }
    // At 7 min the window starts at 2 min: the burst at 1 min is out of it.
    expect(last).toMatchObject({ rejected: 0, read: 500, spanMs: 300 * S });
  });

  test('counters that went down (the cube assigned anew) start the window over', () => {
    const w = new RejectedEventsWindow(300 * S);
    w.observe('ns/orders', rsA0, 0, { ingested: 500, rejected: { too_late: 50 } });
    expect(w.observe('ns/orders', rsA0, S, { ingested: 10, rejected: {} })).toBe(undefined);
    expect(w.observe('ns/orders', rsA0, 2 * S, { ingested: 20, rejected: {} })).toMatchObject({
      read: 10,
    });
  });

  test('receivers and cubes are kept apart, and forgotten when gone', () => {
    const w = new RejectedEventsWindow(300 * S);
    const rsA1 = { name: 'rs-a-1', replicaSet: 'rs-a' };
    w.observe('ns/orders', rsA0, 0, { ingested: 0, rejected: {} });
    w.observe('ns/orders', rsA1, 0, { ingested: 50, rejected: {} });
    w.observe('ns/clicks', rsA0, 0, { ingested: 7, rejected: {} });
    expect(w.observe('ns/orders', rsA1, S, { ingested: 60, rejected: {} })).toMatchObject({
      read: 10,
    });
    w.retain('ns/orders', new Set(['rs-a-1']));
    expect(w.observe('ns/orders', rsA0, S, { ingested: 5, rejected: {} })).toBe(undefined);
    w.forget('ns/clicks');
    expect(w.observe('ns/clicks', rsA0, S, { ingested: 9, rejected: {} })).toBe(undefined);
  });
});

const delta = (
  receiver: string,
  replicaSet: string,
  read: number,
  rejected: number,
): RejectionDelta => ({
  receiver,
  replicaSet,
  read,
  rejected,
  byReason: rejected > 0 ? { window_sealed: rejected } : {},
  spanMs: 300 * S,
});

describe('EventsRejected', () => {
  test.each<[string, RejectionDelta[], number, boolean]>([
    ['none rejected', [delta('rs-a-0', 'rs-a', 1000, 0)], 100, false],
    ['exactly at the threshold', [delta('rs-a-0', 'rs-a', 1000, 10)], 100, false],
    ['just over the threshold', [delta('rs-a-0', 'rs-a', 1000, 11)], 100, true],
    ['exactly at 29% (no rounding error)', [delta('rs-a-0', 'rs-a', 100, 29)], 2900, false],
    ['0% and a single rejection', [delta('rs-a-0', 'rs-a', 1000, 1)], 0, true],
    ['100% and everything rejected', [delta('rs-a-0', 'rs-a', 1000, 1000)], 10_000, false],
    ['nothing read', [delta('rs-a-0', 'rs-a', 0, 0)], 0, false],
    [
      'one replica over, its peer under: the worst replica counts',
      [delta('rs-a-0', 'rs-a', 1000, 0), delta('rs-a-1', 'rs-a', 1000, 500)],
      100,
      true,
    ],
  ])('%s', (_, deltas, basisPoints, degraded) => {
    expect(rejectedEventsProblem(deltas, basisPoints, `${basisPoints / 100}%`) !== undefined).toBe(
      degraded,
    );
  });

  test('the message has the counts by reason; the Event text does not, so it stays the same', () => {
    const at = (rejected: number) =>
      rejectedEventsProblem(
        [
          delta('rs-b-0', 'rs-b', 4000, rejected),
          { ...delta('rs-a-0', 'rs-a', 1000, 900), byReason: { too_late: 100, bad_json: 800 } },
        ],
        100,
        '1%',
      )!;
    const first = at(3000);
    expect(first).toMatchObject({ reason: 'EventsRejected', keepsReady: true });
    expect(first.message).toBe(
      'receiver rs-a-0 (rs-a) rejected 900 of the 1000 records it read in the last 300s (bad_json 800, too_late 100); ' +
        'receiver rs-b-0 (rs-b) rejected 3000 of the 4000 records it read in the last 300s (window_sealed 3000): ' +
        'more than spec.rejectedEventsThreshold (1%)',
    );
    expect(first.event).toBe(
      'replica sets rs-a, rs-b reject more than 1% of the records read (bad_json, too_late, window_sealed); the Degraded condition has the counts',
    );
    const later = at(3500);
    expect(later.message).not.toBe(first.message);
    expect(later.event).toBe(first.event);
  });
});

describe('spec.rejectedEventsThreshold', () => {
  test.each(['0%', '1%', '0.5%', '12.25%', '100%'])('%s is a threshold', (text) => {
    expect(percentage.safeParse(text).success).toBe(true);
  });
  test.each(['1', '101%', '100.5%', '-1%', '1.125%', '%', ' 1%'])('%s is refused', (text) => {
    expect(percentage.safeParse(text).success).toBe(false);
  });
  test('defaults to 1%; compared in hundredths of a percent', () => {
    const spec = cubeAssignmentSpec.parse({
      source: { brokers: ['kafka:9092'], topic: 'orders' },
      schema: { timestampField: 'ts', measures: [{ name: 'n', function: 'count' }], window: '1h' },
      replicaSets: ['rs-a'],
    });
    expect(spec.rejectedEventsThreshold).toBe('1%');
    expect(basisPointsOf(spec.rejectedEventsThreshold)).toBe(100);
    expect(basisPointsOf('0.5%')).toBe(50);
    expect(basisPointsOf('0.29%')).toBe(29);
  });
});
