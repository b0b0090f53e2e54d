// The operator's per-cube series: labelled with the cube's namespace and topic, a partition's
// removed once no owner reports it, and every series of a cube removed when the cube is gone.
import { Registry } from 'prom-client';
import {
  createOperatorMetrics,
  forgetCube,
  initCube,
  publishConditions,
  publishPartitions,
  setPhase,
} from '../../src/operator/metrics.ts';

const orders = { namespace: 'shop', cube: 'orders' };
const ordersB = { namespace: 'team-b', cube: 'orders' };

function lines(text: string, name: string): string[] {
  return text
    .split('\n')
    .filter((l) => l.startsWith(`${name}{`))
    .sort();
}

test('partition series carry namespace and topic; one no owner reports any more is removed', async () => {
  const registry = new Registry();
  const metrics = createOperatorMetrics(registry);
  publishPartitions(metrics, { ...orders, topic: 'orders-v1' }, [
    { partition: 0, position: '10', lag: '2' },
    { partition: 1, position: '7' },
  ]);
  publishPartitions(metrics, { ...ordersB, topic: 'b' }, [{ partition: 0, position: '1' }]);
  expect(lines(await registry.metrics(), 'streamcube_partition_position')).toEqual([
    'streamcube_partition_position{namespace="shop",cube="orders",topic="orders-v1",partition="0"} 10',
    'streamcube_partition_position{namespace="shop",cube="orders",topic="orders-v1",partition="1"} 7',
    'streamcube_partition_position{namespace="team-b",cube="orders",topic="b",partition="0"} 1',
  ]);
  expect(lines(await registry.metrics(), 'streamcube_partition_lag')).toEqual([
    'streamcube_partition_lag{namespace="shop",cube="orders",topic="orders-v1",partition="0"} 2',
  ]);
  publishPartitions(metrics, { ...orders, topic: 'orders-v1' }, [{ partition: 1, position: '8' }]);
  expect(lines(await registry.metrics(), 'streamcube_partition_position')).toEqual([
    'streamcube_partition_position{namespace="shop",cube="orders",topic="orders-v1",partition="1"} 8',
    'streamcube_partition_position{namespace="team-b",cube="orders",topic="b",partition="0"} 1',
  ]);
  expect(lines(await registry.metrics(), 'streamcube_partition_lag')).toEqual([]);
});

test('a cube that is gone loses every series; the same name in another namespace keeps its own', async () => {
  const registry = new Registry();
  const metrics = createOperatorMetrics(registry);
  for (const labels of [orders, ordersB]) {
    initCube(metrics, labels);
    setPhase(metrics, labels, 'Draining');
    metrics.partitionsUnassigned.set(labels, 0);
    metrics.segments.set({ ...labels, state: 'active' }, 1);
    metrics.reassignSeconds.observe({ namespace: labels.namespace }, 1.5);
    publishPartitions(metrics, { ...labels, topic: 't' }, [{ partition: 0, position: '1' }]);
  }
  const before = await registry.metrics();
  expect(before).toContain('namespace="shop",cube="orders"');
  forgetCube(metrics, orders);
  const after = await registry.metrics();
  expect(after).not.toContain('namespace="shop",cube=');
  // The reassign durations are the namespace's, kept for its other cubes.
  expect(lines(after, 'streamcube_reassign_duration_seconds_count')).toEqual([
    'streamcube_reassign_duration_seconds_count{namespace="shop"} 1',
    'streamcube_reassign_duration_seconds_count{namespace="team-b"} 1',
  ]);
  const ofB = (text: string): string[] =>
    text.split('\n').filter((l) => l.includes('namespace="team-b"'));
  expect(ofB(after)).toEqual(ofB(before));
  expect(ofB(after).length).toBeGreaterThan(10);
});

test("a cube's Ready and Degraded conditions: one series each, with status and reason, replaced when they change; removed with the cube", async () => {
  const registry = new Registry();
  const metrics = createOperatorMetrics(registry);
  const series = async (): Promise<string[]> =>
    lines(await registry.metrics(), 'streamcube_cube_condition');
  publishConditions(metrics, orders, undefined);
  expect(await series()).toEqual([
    'streamcube_cube_condition{namespace="shop",cube="orders",type="Degraded",status="Unknown",reason=""} 1',
    'streamcube_cube_condition{namespace="shop",cube="orders",type="Ready",status="Unknown",reason=""} 1',
  ]);
  publishConditions(metrics, orders, [
    { type: 'Ready', status: 'False', reason: 'ConsumerFailed' },
    { type: 'Degraded', status: 'True', reason: 'ConsumerFailed' },
    { type: 'Progressing', status: 'True', reason: 'Reassigning' },
  ]);
  publishConditions(metrics, ordersB, [{ type: 'Ready', status: 'True', reason: 'Consuming' }]);
  expect(await series()).toEqual([
    'streamcube_cube_condition{namespace="shop",cube="orders",type="Degraded",status="True",reason="ConsumerFailed"} 1',
    'streamcube_cube_condition{namespace="shop",cube="orders",type="Ready",status="False",reason="ConsumerFailed"} 1',
    'streamcube_cube_condition{namespace="team-b",cube="orders",type="Degraded",status="Unknown",reason=""} 1',
    'streamcube_cube_condition{namespace="team-b",cube="orders",type="Ready",status="True",reason="Consuming"} 1',
  ]);
  forgetCube(metrics, orders);
  expect(await series()).toEqual([
    'streamcube_cube_condition{namespace="team-b",cube="orders",type="Degraded",status="Unknown",reason=""} 1',
    'streamcube_cube_condition{namespace="team-b",cube="orders",type="Ready",status="True",reason="Consuming"} 1',
  ]);
});

test('the reassign phase: one series at 1 for the phase a move is in, none at rest', async () => {
  const registry = new Registry();
  const metrics = createOperatorMetrics(registry);
  const series = async (): Promise<string[]> =>
    lines(await registry.metrics(), 'streamcube_reassign_phase');
  setPhase(metrics, orders, undefined);
  expect(await series()).toEqual([]);
  setPhase(metrics, orders, 'Pausing');
  setPhase(metrics, orders, 'Draining');
  setPhase(metrics, ordersB, 'Starting');
  expect(await series()).toEqual([
    'streamcube_reassign_phase{namespace="shop",cube="orders",phase="Draining"} 1',
    'streamcube_reassign_phase{namespace="team-b",cube="orders",phase="Starting"} 1',
  ]);
  setPhase(metrics, orders, undefined);
  expect(await series()).toEqual([
    'streamcube_reassign_phase{namespace="team-b",cube="orders",phase="Starting"} 1',
  ]);
});

test('two operators on one registry publish into the same partition families', async () => {
  const registry = new Registry();
  const first = createOperatorMetrics(registry);
  const second = createOperatorMetrics(registry);
  publishPartitions(first, { ...orders, topic: 't' }, [{ partition: 0, position: '5', lag: '1' }]);
  publishPartitions(second, { ...ordersB, topic: 'u' }, [{ partition: 3, position: '9' }]);
  const text = await registry.metrics();
  expect(lines(text, 'streamcube_partition_position')).toEqual([
    'streamcube_partition_position{namespace="shop",cube="orders",topic="t",partition="0"} 5',
    'streamcube_partition_position{namespace="team-b",cube="orders",topic="u",partition="3"} 9',
  ]);
  expect(text).toContain('# TYPE streamcube_partition_lag gauge');
  forgetCube(second, ordersB);
  expect(lines(await registry.metrics(), 'streamcube_partition_position')).toEqual([
    'streamcube_partition_position{namespace="shop",cube="orders",topic="t",partition="0"} 5',
  ]);
});
