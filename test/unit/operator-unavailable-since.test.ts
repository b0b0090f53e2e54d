// Since when a replica set has had no ready pod, what a failover's wait counts from: this process's
// own sight, what an earlier leader recorded in status, and the pods' own Ready transitions.
import type { V1Pod } from '@kubernetes/client-node';
import {
  notReadySince,
  unavailableSince,
  unavailableSincePatch,
} from '../../src/operator/unavailable-since.ts';

const t = (iso: string): number => Date.parse(iso);

test.each([
  {
    name: 'nothing recorded, no pod time: what this process saw',
    seen: t('2026-12-02T10:00:30Z'),
    recorded: undefined,
    pods: undefined,
    expected: t('2026-12-02T10:00:30Z'),
  },
  {
    name: 'an earlier leader saw it first: its time',
    seen: t('2026-12-02T10:00:30Z'),
    recorded: '2026-12-02T10:00:05.250Z',
    pods: t('2026-12-02T10:00:05Z'),
    expected: t('2026-12-02T10:00:05.250Z'),
  },
  {
    name: 'recorded after this process saw it: what this process saw',
    seen: t('2026-12-02T10:00:05Z'),
    recorded: '2026-12-02T10:00:30Z',
    pods: undefined,
    expected: t('2026-12-02T10:00:05Z'),
  },
  {
    name: 'a record older than the pods stopped being Ready (back and gone again unseen): the pods',
    seen: t('2026-12-02T10:20:00Z'),
    recorded: '2026-12-02T10:00:00Z',
    pods: t('2026-12-02T10:15:00Z'),
    expected: t('2026-12-02T10:15:00Z'),
  },
  {
    name: 'an unreadable record is left out',
    seen: t('2026-12-02T10:00:30Z'),
    recorded: 'yesterday',
    pods: undefined,
    expected: t('2026-12-02T10:00:30Z'),
  },
])('$name', ({ seen, recorded, pods, expected }) => {
  expect(unavailableSince(seen, recorded, pods)).toBe(expected);
});

const pod = (
  name: string,
  rs: string | undefined,
  ready: 'True' | 'False' | 'Unknown' | undefined,
  at?: string,
  deleting = false,
): V1Pod => ({
  metadata: {
    name,
    labels: rs ? { 'streamcube.io/replica-set': rs } : {},
    ...(deleting ? { deletionTimestamp: new Date('2026-12-02T10:00:00Z') } : {}),
  },
  status: {
    conditions: ready
      ? [
          {
            type: 'Ready',
            status: ready,
            ...(at ? { lastTransitionTime: new Date(at) } : {}),
          },
        ]
      : [],
  },
});

test('pods: the latest time a pod of each set stopped being Ready; Ready, deleted, unlabelled and undated pods left out', () => {
  const since = notReadySince([
    pod('rs-a-0', 'rs-a', 'False', '2026-12-02T10:00:00Z'),
    pod('rs-a-1', 'rs-a', 'Unknown', '2026-12-02T10:00:07Z'),
    pod('rs-b-0', 'rs-b', 'True', '2026-12-02T09:00:00Z'),
    pod('rs-c-0', 'rs-c', 'False', '2026-12-02T10:30:00Z', true),
    pod('rs-c-1', 'rs-c', 'False'),
    pod('rs-d-0', 'rs-d', undefined),
    pod('other', undefined, 'False', '2026-12-02T10:00:00Z'),
  ]);
  expect(Object.fromEntries(since)).toEqual({ 'rs-a': t('2026-12-02T10:00:07Z') });
});

test.each<{
  name: string;
  previous: Record<string, string> | undefined;
  away: Record<string, number>;
  expected: Record<string, string | null> | undefined;
}>([
  { name: 'nothing away, nothing recorded', previous: undefined, away: {}, expected: undefined },
  {
    name: 'a set newly away is recorded',
    previous: undefined,
    away: { 'rs-a': t('2026-12-02T10:00:05.250Z') },
    expected: { 'rs-a': '2026-12-02T10:00:05.250Z' },
  },
  {
    name: 'the same time again: no write',
    previous: { 'rs-a': '2026-12-02T10:00:05.250Z' },
    away: { 'rs-a': t('2026-12-02T10:00:05.250Z') },
    expected: undefined,
  },
  {
    name: 'a set back (or holding nothing) is deleted, another kept',
    previous: { 'rs-a': '2026-12-02T10:00:05Z', 'rs-b': '2026-12-02T10:01:00Z' },
    away: { 'rs-b': t('2026-12-02T10:01:00Z') },
    expected: { 'rs-a': null },
  },
  {
    name: 'a new time replaces the old',
    previous: { 'rs-a': '2026-12-02T10:00:00Z' },
    away: { 'rs-a': t('2026-12-02T10:15:00Z') },
    expected: { 'rs-a': '2026-12-02T10:15:00.000Z' },
  },
])('status.unavailableSince patch: $name', ({ previous, away, expected }) => {
  expect(unavailableSincePatch(previous, new Map(Object.entries(away)))).toEqual(expected);
});
