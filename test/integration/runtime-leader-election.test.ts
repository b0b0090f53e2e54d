// Leader election on a real Lease: of two candidates one leads; a leader that stops releases the
// lease and its successor takes over at once; a leader that vanishes is succeeded only after the
// lease duration; a leader whose lease is taken stops leading at its next renewal. Each leader
// is handed its term, the Lease's leaseTransitions, which grows with every change of holder.
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  ApiException,
  CoordinationV1Api,
  CoreV1Api,
  V1MicroTime,
  type V1Lease,
} from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { LeaderElector } from '../../src/operator/runtime/leader-election.ts';
import type { RuntimeLogger } from '../../src/operator/runtime/logger.ts';
import { adminKubeConfig } from '../env/connection.ts';

const admin = adminKubeConfig();
const core = admin.makeApiClient(CoreV1Api);
const leases = admin.makeApiClient(CoordinationV1Api);
const namespace = `rt-lease-${randomUUID().slice(0, 8)}`;

interface Timings {
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
}
const short: Timings = { leaseDurationMs: 3_000, renewDeadlineMs: 2_000, retryPeriodMs: 500 };

/** Everything the candidates of one test did, in order, with the wall-clock time. */
class Journal {
  readonly entries: { at: number; who: string; what: string }[] = [];
  readonly leading = new Set<string>();
  maxLeaders = 0;
  readonly log: string[] = [];

  record(who: string, what: string): void {
    this.entries.push({ at: Date.now(), who, what });
  }

  when(who: string, what: string): number | undefined {
    return this.entries.find((e) => e.who === who && e.what === what)?.at;
  }

  logger(who: string): RuntimeLogger {
    const write = (level: string) => (message: string, meta?: Record<string, unknown>) => {
      this.log.push(
        `${new Date().toISOString()} ${who} ${level} ${message} ${JSON.stringify(meta ?? {})}`,
      );
    };
    return {
      debug: write('debug'),
      info: write('info'),
      warn: write('warn'),
      error: write('error'),
    };
  }
}

/** Candidates of the running test; stopped after it even when it failed or timed out. */
const alive: Candidate[] = [];

interface Candidate {
  identity: string;
  elector: LeaderElector;
  registry: Registry;
  running: Promise<void>;
}

function candidate(lease: string, identity: string, timings: Timings, journal: Journal): Candidate {
  const registry = new Registry();
  const elector = new LeaderElector({
    api: leases,
    namespace,
    name: lease,
    identity,
    registry,
    ...timings,
    logger: journal.logger(identity),
    callbacks: {
      onStartedLeading: (signal, term) => {
        journal.record(identity, 'started leading');
        journal.record(identity, `term ${term}`);
        journal.leading.add(identity);
        journal.maxLeaders = Math.max(journal.maxLeaders, journal.leading.size);
        // The leader's work: runs until the signal aborts.
        return new Promise<void>((resolve) =>
          signal.addEventListener('abort', () => {
            journal.leading.delete(identity);
            journal.record(identity, 'work ended');
            resolve();
          }),
        );
      },
      onStoppedLeading: () => journal.record(identity, 'stopped leading'),
      onNewLeader: (leader) => journal.record(identity, `sees leader ${leader}`),
    },
  });
  const c = { identity, elector, registry, running: elector.run() };
  alive.push(c);
  return c;
}

async function masterStatus(c: Candidate, lease: string): Promise<number | undefined> {
  const values = (await c.registry.getSingleMetric('leader_election_master_status')!.get()).values;
  return values.find((v) => v.labels.name === lease)?.value;
}

async function waitFor(what: string, predicate: () => boolean, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

async function readLease(name: string): Promise<V1Lease> {
  return leases.readNamespacedLease({ name, namespace });
}

/** Runs `body`, printing the candidates' logs if it fails. */
async function withCandidates(journal: Journal, body: () => Promise<void>): Promise<void> {
  try {
    await body();
  } catch (error) {
    console.log(journal.log.join('\n'));
    throw error;
  }
}

beforeAll(async () => {
  await core.createNamespace({ body: { metadata: { name: namespace } } });
});

afterEach(async () => {
  await Promise.all(alive.splice(0).map((c) => c.elector.stop()));
});

afterAll(async () => {
  await core.deleteNamespace({ name: namespace }).catch(() => undefined);
});

test('of two candidates exactly one leads, and the lease names it', async () => {
  const lease = `two-${randomUUID().slice(0, 8)}`;
  const journal = new Journal();
  const a = candidate(lease, 'a', short, journal);
  const b = candidate(lease, 'b', short, journal);
  await withCandidates(journal, async () => {
    await waitFor('a leader', () => journal.leading.size > 0);
    const leader = a.elector.isLeader() ? a : b;
    const follower = leader === a ? b : a;
    // Through more than one lease duration of renewals, the leader stays the only one.
    const watchUntil = Date.now() + 4_000;
    while (Date.now() < watchUntil) {
      expect([a.elector.isLeader(), b.elector.isLeader()].filter(Boolean)).toHaveLength(1);
      await sleep(100);
    }
    expect(journal.maxLeaders).toBe(1);
    expect(journal.entries.filter((e) => e.what === 'started leading')).toHaveLength(1);
    expect(leader.elector.isLeader()).toBe(true);
    expect((await readLease(lease)).spec?.holderIdentity).toBe(leader.identity);
    expect(follower.elector.leader()).toBe(leader.identity);
    expect(journal.when(follower.identity, `sees leader ${leader.identity}`)).toBeDefined();
    expect(await masterStatus(leader, lease)).toBe(1);
    expect(await masterStatus(follower, lease)).toBe(0);
  });
}, 60_000);

test('a leader that stops releases the lease after its work ended; the other takes over at once', async () => {
  const lease = `release-${randomUUID().slice(0, 8)}`;
  const journal = new Journal();
  // A long lease: a successor that had to wait for expiry would need a minute, far beyond what a
  // loaded machine adds to a takeover at once.
  const timings: Timings = { leaseDurationMs: 60_000, renewDeadlineMs: 40_000, retryPeriodMs: 500 };
  const a = candidate(lease, 'a', timings, journal);
  await waitFor('a to lead', () => a.elector.isLeader());
  const b = candidate(lease, 'b', timings, journal);
  await withCandidates(journal, async () => {
    await waitFor('b to see a as leader', () => b.elector.leader() === 'a');
    expect(b.elector.isLeader()).toBe(false);

    await a.elector.stop();
    await a.running;
    const released = Date.now();
    const afterRelease = await readLease(lease);
    expect(afterRelease.spec?.holderIdentity ?? '').toBe('');

    await waitFor('b to lead', () => b.elector.isLeader(), timings.leaseDurationMs / 2);
    const bLeads = journal.when('b', 'started leading') as number;
    expect(bLeads - released).toBeLessThan(timings.leaseDurationMs / 2);
    // a's work ended before the lease was given up, so the two never overlapped.
    expect(journal.when('a', 'work ended')).toBeLessThanOrEqual(
      journal.when('a', 'stopped leading') as number,
    );
    expect(journal.when('a', 'stopped leading')).toBeLessThanOrEqual(bLeads);
    expect(journal.maxLeaders).toBe(1);
    const taken = await readLease(lease);
    expect(taken.spec?.holderIdentity).toBe('b');
    expect(taken.spec?.leaseTransitions).toBe((afterRelease.spec?.leaseTransitions ?? 0) + 1);
    // Each leader's term is leaseTransitions as it took the lease: the successor's is higher.
    expect(journal.when('a', 'term 0')).toBeDefined();
    expect(journal.when('b', 'term 1')).toBeDefined();
    expect(taken.spec?.leaseTransitions).toBe(1);
    expect(await masterStatus(a, lease)).toBe(0);
    expect(await masterStatus(b, lease)).toBe(1);
  });
}, 60_000);

test('a leader that vanishes without releasing is succeeded after the lease duration, not before', async () => {
  const lease = `vanish-${randomUUID().slice(0, 8)}`;
  const journal = new Journal();
  const a = candidate(lease, 'a', short, journal);
  await waitFor('a to lead', () => a.elector.isLeader());
  const b = candidate(lease, 'b', short, journal);
  await withCandidates(journal, async () => {
    await waitFor('b to see a as leader', () => b.elector.leader() === 'a');
    await sleep(1_500); // a few renewals observed by b

    await a.elector.stop({ release: false }); // as if the process died: no more calls
    const lastRenewal = Date.parse(String((await readLease(lease)).spec?.renewTime));
    expect((await readLease(lease)).spec?.holderIdentity).toBe('a');

    // The deadline is a hang guard: a loaded machine only makes the takeover later.
    await waitFor('b to lead', () => b.elector.isLeader(), 45_000);
    const bLeads = journal.when('b', 'started leading') as number;
    // b only counts time since it last saw the lease change (its own clock), never a's timestamps.
    expect(bLeads - lastRenewal).toBeGreaterThanOrEqual(short.leaseDurationMs);
    expect((await readLease(lease)).spec?.holderIdentity).toBe('b');
  });
}, 60_000);

test('a leader whose lease is taken over stops leading at its next renewal, not at its renew deadline', async () => {
  const lease = `taken-${randomUUID().slice(0, 8)}`;
  const journal = new Journal();
  // A long renew deadline: a leader that kept retrying until it would still lead long after, far
  // beyond what a loaded machine adds to its next renewal.
  const timings = { leaseDurationMs: 60_000, renewDeadlineMs: 40_000, retryPeriodMs: 500 };
  const a = candidate(lease, 'a', timings, journal);
  await withCandidates(journal, async () => {
    await waitFor('a to lead', () => a.elector.isLeader());
    // Another party writes itself into the lease (its resourceVersion changes under a). A renewal
    // by a between the read and the write makes the write a 409: read again, as any client would.
    for (let written = false, tries = 0; !written; tries++) {
      const current = await readLease(lease);
      const now = new V1MicroTime();
      try {
        await leases.replaceNamespacedLease({
          name: lease,
          namespace,
          body: {
            ...current,
            spec: { ...current.spec, holderIdentity: 'intruder', renewTime: now, acquireTime: now },
          },
        });
        written = true;
      } catch (error) {
        if (!(error instanceof ApiException && error.code === 409) || tries >= 20) throw error;
      }
    }
    const takenAt = Date.now();
    await waitFor('a to stop leading', () => journal.when('a', 'stopped leading') !== undefined);
    await a.running; // the elector ends once leadership is lost
    const stopped = journal.when('a', 'stopped leading') as number;
    expect(journal.when('a', 'work ended')).toBeDefined();
    // It saw another holder at its next renewal (every retry period): nothing gives the lease
    // back, so it stops then, far from the 40 s renew deadline.
    expect(stopped - takenAt).toBeLessThan(timings.renewDeadlineMs / 2);
    expect(a.elector.isLeader()).toBe(false);
    expect(a.elector.leader()).toBe('intruder');
    expect((await readLease(lease)).spec?.holderIdentity).toBe('intruder');
    expect(await masterStatus(a, lease)).toBe(0);
  });
}, 60_000);
