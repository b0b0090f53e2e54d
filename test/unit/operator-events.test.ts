// EventRecorder correlates as client-go does: the same object, type and reason make one Event
// whose count and lastTimestamp move; another reason or object makes another Event.
import { ApiException, type CoreV1Event } from '@kubernetes/client-node';
import type { CubeAssignment } from '../../src/api/cube-assignment.ts';
import { EventRecorder, type EventsApi } from '../../src/operator/events.ts';
import { createLogger } from '../../src/observability/logger.ts';

/** An API server's Events, in memory: create names them, patch merges into them. */
function fakeEventsApi() {
  const events = new Map<string, CoreV1Event>();
  let created = 0;
  const writes: string[] = [];
  const api: EventsApi = {
    createNamespacedEvent: ({ body }) => {
      const name = `${body.metadata?.generateName ?? ''}${++created}`;
      const event = { ...body, metadata: { ...body.metadata, name } };
      events.set(name, event);
      writes.push(`create ${name}`);
      return Promise.resolve(event);
    },
    patchNamespacedEvent: ({ name, body }) => {
      writes.push(`patch ${name}`);
      const event = events.get(name);
      if (!event) return Promise.reject(new ApiException(404, 'not found', {}, {}));
      Object.assign(event, body);
      return Promise.resolve(event);
    },
  };
  return { api, events, writes };
}

const cube = (name: string): CubeAssignment =>
  ({
    apiVersion: 'streamcube.io/v1alpha1',
    kind: 'CubeAssignment',
    metadata: { namespace: 'shop', name, uid: `uid-${name}` },
  }) as CubeAssignment;

function setUp() {
  const server = fakeEventsApi();
  const recorder = new EventRecorder(server.api, 'streamcube-operator', createLogger('test'));
  const summary = () =>
    [...server.events.values()].map(
      (e) => `${e.involvedObject.name} ${e.type} ${e.reason} x${e.count}: ${e.message}`,
    );
  return { ...server, recorder, summary };
}

test('the same reason of the same object bumps one Event, however often', async () => {
  const { recorder, summary, writes, events } = setUp();
  for (let i = 0; i < 5; i++)
    recorder.record(cube('orders'), 'Warning', 'DrainIncomplete', 'rs-a-0 has not drained 3');
  await recorder.flush();
  expect(summary()).toEqual(['orders Warning DrainIncomplete x5: rs-a-0 has not drained 3']);
  expect(writes).toEqual([
    'create orders.1',
    'patch orders.1',
    'patch orders.1',
    'patch orders.1',
    'patch orders.1',
  ]);
  const event = [...events.values()][0]!;
  expect(new Date(event.lastTimestamp!).getTime()).toBeGreaterThanOrEqual(
    new Date(event.firstTimestamp!).getTime(),
  );
});

test('a new message of the same reason is the same Event, with the latest message', async () => {
  const { recorder, summary } = setUp();
  recorder.record(cube('orders'), 'Warning', 'ReceiverUnreachable', 'rs-a-0 did not answer');
  recorder.record(cube('orders'), 'Warning', 'ReceiverUnreachable', 'rs-b-0 did not answer');
  await recorder.flush();
  expect(summary()).toEqual(['orders Warning ReceiverUnreachable x2: rs-b-0 did not answer']);
});

test('another reason, type or object is another Event', async () => {
  const { recorder, summary } = setUp();
  recorder.record(cube('orders'), 'Normal', 'ReassignPlanned', 'reassign r-1: 0 rs-a→rs-b');
  recorder.record(cube('orders'), 'Normal', 'ReassignCompleted', 'reassign r-1 moved 1');
  recorder.record(cube('orders'), 'Warning', 'ReassignCompleted', 'odd, but another type');
  recorder.record(cube('clicks'), 'Normal', 'ReassignPlanned', 'reassign r-2: 0 rs-a→rs-b');
  recorder.record(cube('orders'), 'Normal', 'ReassignPlanned', 'reassign r-3: 0 rs-b→rs-a');
  await recorder.flush();
  expect(summary()).toEqual([
    'orders Normal ReassignPlanned x2: reassign r-3: 0 rs-b→rs-a',
    'orders Normal ReassignCompleted x1: reassign r-1 moved 1',
    'orders Warning ReassignCompleted x1: odd, but another type',
    'clicks Normal ReassignPlanned x1: reassign r-2: 0 rs-a→rs-b',
  ]);
});

test('an Event the API server dropped (its TTL) starts a new one', async () => {
  const { recorder, summary, events, writes } = setUp();
  recorder.record(cube('orders'), 'Warning', 'HandOffPending', 'segments not handed off');
  await recorder.flush();
  events.clear();
  recorder.record(cube('orders'), 'Warning', 'HandOffPending', 'segments not handed off');
  recorder.record(cube('orders'), 'Warning', 'HandOffPending', 'segments not handed off');
  await recorder.flush();
  expect(writes).toEqual([
    'create orders.1',
    'patch orders.1',
    'create orders.2',
    'patch orders.2',
  ]);
  expect(summary()).toEqual(['orders Warning HandOffPending x2: segments not handed off']);
});
