// The chaos scenario of issue 9 on a useOperatorStack: every cube reassigned every few seconds to
// a random valid spec while a seeded fault schedule kills, freezes and restarts receivers and
// operators. One seed gives one sequence of choices (the timing is the machine's), so a failing
// run is replayed with its seed.
import type { ChildProcess } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  assignmentStrategies,
  type AssignmentStrategy,
  type CubeAssignment,
} from '../../src/api/cube-assignment.ts';
import { ReceiverApiError } from '../../src/protocol/client.ts';
import {
  cubeApi,
  leaseHolder,
  setPodReady,
  waitForSettled,
  type OperatorProcess,
} from './cluster.ts';
import type { SteadyLoad } from './load.ts';
import type { OperatorStack } from './operator-stack.ts';
import type { ReceiverProcess } from './receiver-process.ts';
import { processStopped } from './child-process-state.ts';
import { waitFor } from './wait.ts';

/** mulberry32: small, fast and good enough to pick faults; the same seed, the same picks. */
export class Random {
  private state: number;

  constructor(seed: number) {
    this.state = seed >>> 0;
  }

  /** Uniform in [0, 1). */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** An integer in [min, max]. */
  between(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }

  chance(p: number): boolean {
    return this.next() < p;
  }

  pick<T>(list: readonly T[]): T {
    if (list.length === 0) throw new Error('pick from an empty list');
    return list[Math.floor(this.next() * list.length)]!;
  }

  /** A random order of `list`. */
  shuffle<T>(list: readonly T[]): T[] {
    const out = [...list];
    for (let i = out.length - 1; i > 0; i--) {
      const j = Math.floor(this.next() * (i + 1));
      [out[i], out[j]] = [out[j]!, out[i]!];
    }
    return out;
  }

  /** An independent stream for a concurrent loop, so that one loop's draws never shift another's. */
  fork(): Random {
    return new Random(Math.floor(this.next() * 4294967296));
  }
}

export const newSeed = (): number => randomInt(1, 2 ** 31);

/** The placement part of a CubeAssignment spec. */
export interface PlacementSpec {
  replicaSets: string[];
  strategy: AssignmentStrategy;
  pins?: Record<string, number[]>;
}

/**
 * A random valid placement: a non-empty list of the replica sets in random order, a strategy,
 * and in about half the draws pins of some partitions to listed sets (disjoint, in range).
 */
export function randomPlacement(
  random: Random,
  replicaSets: readonly string[],
  partitions: number,
): PlacementSpec {
  const listed = random.shuffle(replicaSets).slice(0, random.between(1, replicaSets.length));
  const spec: PlacementSpec = { replicaSets: listed, strategy: random.pick(assignmentStrategies) };
  if (random.chance(0.5)) {
    const pins: Record<string, number[]> = {};
    for (let p = 0; p < partitions; p++)
      if (random.chance(0.5)) (pins[random.pick(listed)] ??= []).push(p);
    if (Object.keys(pins).length > 0) spec.pins = pins;
  }
  return spec;
}

/**
 * The JSON merge patch that makes the spec's placement exactly `spec`: pins merge key by key, so
 * every replica set not pinned now is deleted by name (or all pins at once).
 */
export function placementPatch(
  spec: PlacementSpec,
  replicaSets: readonly string[],
): Record<string, unknown> {
  const pins = spec.pins
    ? Object.fromEntries(replicaSets.map((rs) => [rs, spec.pins![rs] ?? null]))
    : null;
  return { replicaSets: spec.replicaSets, strategy: spec.strategy, pins };
}

export function describePlacement(spec: PlacementSpec): string {
  const pins = spec.pins
    ? ` pins ${Object.entries(spec.pins)
        .map(([rs, ps]) => `${rs}:${ps.join(',')}`)
        .join(' ')}`
    : '';
  return `[${spec.replicaSets.join(', ')}] ${spec.strategy}${pins}`;
}

export const faultKinds = [
  'receiver-kill',
  'operator-kill',
  'leader-freeze',
  'broker-restart',
  'apiserver-restart',
  'replica-set-loss',
  'receiver-freeze',
] as const;
export type FaultKind = (typeof faultKinds)[number];

/**
 * When a receiver may be killed: `at-rest` waits until no move is in flight and holds new
 * placements back until it is up and every cube has settled again; `any-time` kills it whenever
 * the schedule says, in the middle of a move or while its set loses or regains partitions (issue
 * 9: moves wait in Pausing and Sealing for a replica of their sets that is not Ready). So for a
 * whole set's loss: `any-time` loses it mid-move too, placements going on meanwhile (a move then
 * waits for it, rolls back, or, lost in Starting, fails it over within the move).
 */
export type ReceiverKills = 'at-rest' | 'any-time';

export interface ChaosOptions {
  stack: OperatorStack;
  /** The cubes to reassign, with their topics' partition counts; created and settled already. */
  cubes: { name: string; partitions: number }[];
  durationMs: number;
  seed: number;
  faults: readonly FaultKind[];
  receiverKills: ReceiverKills;
  /** Where the timeline goes, line by line, as it happens. */
  say: (line: string) => void;
  /**
   * The loads writing to the cubes' topics: paused through a broker restart, so that what they
   * wrote stays known exactly.
   */
  loads: SteadyLoad[];
}

export interface ChaosSummary {
  seed: number;
  /** Placements patched into a spec. */
  placements: number;
  /** Placements that settled with another assignment than before. */
  reassigns: number;
  /** Faults drawn from the schedule, by kind. */
  drawn: Record<FaultKind, number>;
  /** Faults that ran and did what they say (a process killed, frozen, a server restarted). */
  faults: Record<FaultKind, number>;
  /** Faults drawn that did not do what they say, and why: none, in a run that means anything. */
  notRun: string[];
}

const lease = 'streamcube-operator';
/** The operators' lease (OperatorProcess: --lease-duration=4s): a freeze lasts longer. */
const leaseMs = 4_000;
/** How long one placement may take to settle, faults included, before it counts as stuck. */
const settleMs = 120_000;

/**
 * Runs reassigns (one loop per cube) and faults (one at a time) until `durationMs` has passed or
 * one of them failed, and leaves every receiver up and Ready and two operators running, one
 * leading. Throws the first failure: a placement that never settled is a stuck move.
 */
export async function runChaos(o: ChaosOptions): Promise<ChaosSummary> {
  const { stack, say } = o;
  const { kc, namespace } = stack;
  const t0 = Date.now();
  const log = (line: string): void => say(`+${((Date.now() - t0) / 1000).toFixed(1)}s ${line}`);
  const random = new Random(o.seed);
  const summary: ChaosSummary = {
    seed: o.seed,
    placements: 0,
    reassigns: 0,
    drawn: Object.fromEntries(faultKinds.map((k) => [k, 0])) as Record<FaultKind, number>,
    faults: Object.fromEntries(faultKinds.map((k) => [k, 0])) as Record<FaultKind, number>,
    notRun: [],
  };
  const replicaSets = Object.keys(stack.replicas);
  const operators: OperatorProcess[] = [stack.operator];
  let failed = false;
  const over = (): boolean => failed || Date.now() - t0 >= o.durationMs;
  // Receiver kills at rest: moves in flight, and whether new ones are held back.
  let moving = 0;
  let holdMoves = false;
  const settled = (cube: string): Promise<CubeAssignment> =>
    waitForSettled(kc, namespace, cube, () => true, settleMs);
  // Through an API-server restart the harness's own calls wait, and one caught by the stop is
  // made again (a placement patch is the same merge patch twice).
  let apiDown = false;
  let apiBackAt = -Infinity;
  const viaApi = async <T>(call: () => Promise<T>): Promise<T> => {
    for (;;) {
      while (apiDown && !failed) await sleep(100);
      try {
        return await call();
      } catch (error) {
        if (!apiDown && Date.now() - apiBackAt > 10_000) throw error;
        await sleep(200);
      }
    }
  };

  /** Two operators on the Lease: one that exited (a stale leader stops) or was killed, replaced. */
  const keepTwoOperators = async (): Promise<void> => {
    for (let i = operators.length - 1; i >= 0; i--)
      if (!operators[i]!.alive) operators.splice(i, 1);
    while (operators.length < 2) {
      const started = await stack.startOperator();
      operators.push(started);
      log(`operator ${started.identity} started`);
    }
  };
  const leader = async (): Promise<OperatorProcess> => {
    const holder = await waitFor(
      'a leader',
      async () => {
        const id = await leaseHolder(kc, namespace, lease);
        return operators.find((op) => op.identity === id && op.alive && !op.stopped);
      },
      30_000,
      200,
    );
    return holder;
  };

  const reassignLoop = async (cube: { name: string; partitions: number }, random: Random) => {
    const api = cubeApi(kc);
    while (!over()) {
      while (holdMoves && !failed) await sleep(100);
      // Counted before anything is awaited: a receiver kill at rest waits for it.
      moving += 1;
      const before = (await viaApi(() => api.get(namespace, cube.name))).status?.assignment;
      const placements = random.chance(0.2) ? 2 : 1;
      for (let i = 0; i < placements; i++) {
        // A second placement lands while the first one moves: the spec changes mid-move.
        if (i > 0) await sleep(random.between(200, 1_500));
        const spec = randomPlacement(random, replicaSets, cube.partitions);
        await viaApi(() => api.patchSpec(namespace, cube.name, placementPatch(spec, replicaSets)));
        summary.placements += 1;
        log(`${cube.name}: placement ${describePlacement(spec)}${i > 0 ? ' (mid-move)' : ''}`);
      }
      let done: CubeAssignment;
      try {
        done = await settled(cube.name);
      } catch (error) {
        const now = await api.get(namespace, cube.name);
        throw new Error(
          `seed ${o.seed}: cube ${cube.name} did not settle within ${settleMs} ms (a stuck move?); status: ${JSON.stringify(now.status)}`,
          { cause: error },
        );
      } finally {
        moving -= 1;
      }
      const after = done.status?.assignment;
      if (JSON.stringify(after) !== JSON.stringify(before)) summary.reassigns += 1;
      log(
        `${cube.name}: settled ${JSON.stringify(after)} epochs ${JSON.stringify(done.status?.epochs)}`,
      );
      await sleep(random.between(1_000, 4_000));
    }
  };

  const fault = async (kind: FaultKind, random: Random): Promise<void> => {
    // What the fault found not done as it says: it goes on (the stack is left whole), but does
    // not count as run.
    const missed: string[] = [];
    const killed = (p: { exitSignal: NodeJS.Signals | null }, who: string): void => {
      if (p.exitSignal !== 'SIGKILL')
        missed.push(`${who} not killed (${p.exitSignal ?? 'running'})`);
    };
    const frozen = (p: { child?: ChildProcess }, who: string): void => {
      if (!processStopped(p.child)) missed.push(`${who} not stopped by SIGSTOP`);
    };
    switch (kind) {
      case 'receiver-kill': {
        // Never two down at once: a replica set always keeps a replica.
        const r = random.pick(Object.values(stack.replicas).flat());
        if (o.receiverKills === 'at-rest') {
          holdMoves = true;
          while (moving > 0 && !failed) await sleep(100);
        }
        await setPodReady(kc, namespace, r.options.id, r.options.host!, false);
        await r.kill('SIGKILL');
        killed(r, r.options.id);
        const downMs = random.between(500, 8_000);
        log(`fault receiver-kill: ${r.options.id} kill -9, down ${downMs} ms`);
        await sleep(downMs);
        await r.start();
        await setPodReady(kc, namespace, r.options.id, r.options.host!, true);
        log(`receiver ${r.options.id} restarted`);
        if (holdMoves) {
          for (const cube of o.cubes) await settled(cube.name);
          holdMoves = false;
        }
        break;
      }
      case 'operator-kill': {
        // One that exited by itself (a thawed stale leader) is no target: it is replaced anyway.
        const target = random.chance(0.5)
          ? await leader()
          : random.pick(operators.filter((op) => op.alive));
        const role =
          target.identity === (await leaseHolder(kc, namespace, lease)) ? 'leader' : 'candidate';
        await target.kill('SIGKILL');
        killed(target, target.identity);
        const downMs = random.between(0, 3_000);
        log(`fault operator-kill: ${role} ${target.identity} kill -9, replaced after ${downMs} ms`);
        await sleep(downMs);
        break;
      }
      case 'broker-restart': {
        if (!stack.restartBroker)
          throw new Error('broker-restart needs useOperatorStack({ ownBroker: true })');
        await Promise.all(o.loads.map((l) => l.pause()));
        const downMs = random.between(1_000, 6_000);
        log(`fault broker-restart: the broker stopped, down ${downMs} ms (the loads paused)`);
        await stack.restartBroker(downMs);
        for (const l of o.loads) l.resume();
        log('broker started again on its ports and data; loads resumed');
        break;
      }
      case 'receiver-freeze': {
        // A stalled process (a long pause, an overloaded node): its pod stays Ready, calls to it
        // wait, its Kafka consumer misses heartbeats. Any time, mid-move too.
        const r = random.pick(Object.values(stack.replicas).flat());
        const frozenMs = random.between(1_000, 6_000);
        r.child?.kill('SIGSTOP');
        log(`fault receiver-freeze: ${r.options.id} SIGSTOP for ${frozenMs} ms`);
        await sleep(frozenMs);
        frozen(r, r.options.id);
        r.child?.kill('SIGCONT');
        log(`receiver ${r.options.id} SIGCONT`);
        break;
      }
      case 'replica-set-loss': {
        // Every receiver of one set killed at once, between moves: its cubes' partitions fail
        // over (spec.failoverAfter) to the other set; then the set comes back and is converged.
        const rs = random.pick(replicaSets);
        const atRest = o.receiverKills === 'at-rest';
        if (atRest) {
          holdMoves = true;
          while (moving > 0 && !failed) await sleep(100);
        }
        const api = cubeApi(kc);
        // The cubes that fail over: they hold partitions there and list another set to take them
        // (a cube placed on the lost set alone waits for it).
        const held: string[] = [];
        // Partitions moved away of which the set's data is not committed yet, as status says
        // at the kill (a failover then blocks).
        const uncommitted: string[] = [];
        for (const cube of o.cubes) {
          const c = await viaApi(() => api.get(namespace, cube.name));
          if (
            (c.status?.assignment?.[rs] ?? []).length > 0 &&
            (c.spec.replicaSets ?? []).some((other) => other !== rs)
          )
            held.push(cube.name);
          const released = c.status?.releasedUncommitted?.[rs] ?? [];
          if (released.length > 0) uncommitted.push(`${cube.name} ${released.join(',')}`);
        }
        const lost = stack.replicas[rs]!;
        for (const r of lost) {
          await setPodReady(kc, namespace, r.options.id, r.options.host!, false);
          await r.kill('SIGKILL');
          killed(r, r.options.id);
        }
        log(
          `fault replica-set-loss: every receiver of ${rs} kill -9${atRest ? '' : ` (${moving} placement${moving === 1 ? '' : 's'} under way)`} (${held.join(', ') || 'no cube'} held partitions there; released, not committed: ${uncommitted.join('; ') || 'none'})`,
        );
        // Failed over, or not: a set holding data of partitions moved away from it that it has
        // not committed yet is not failed over (FailoverBlocked), and waits to come back.
        const outcomes: string[] = [];
        for (const cube of held)
          outcomes.push(
            await waitFor(
              `${cube} failed over from ${rs}, or its failover blocked`,
              async () => {
                const c = await api.get(namespace, cube);
                if (!c.status?.reassign && (c.status?.assignment?.[rs] ?? []).length === 0)
                  return `${cube} failed over`;
                const d = c.status?.conditions?.find((x) => x.type === 'Degraded');
                // What the operator holds against the set, for a person reading the log.
                return d?.status === 'True' && d.message.includes('a failover would lose it')
                  ? `${cube} blocked (FailoverBlocked: releasedUncommitted ${JSON.stringify(c.status?.releasedUncommitted ?? {})})`
                  : undefined;
              },
              settleMs,
              200,
            ),
          );
        log(`${rs}: ${outcomes.join(', ') || 'nothing to fail over'}; restarting it`);
        for (const r of lost) {
          await r.start();
          await setPodReady(kc, namespace, r.options.id, r.options.host!, true);
        }
        for (const cube of o.cubes) await settled(cube.name);
        holdMoves = false;
        break;
      }
      case 'apiserver-restart': {
        // Operators lose their informers' watches and, past the renew deadline, the Lease; the
        // receivers go on consuming (they read only Secrets from it).
        if (!stack.restartApiServer)
          throw new Error('apiserver-restart needs useOperatorStack({ ownControlPlane: true })');
        apiDown = true;
        const downMs = random.between(1_000, 6_000);
        log(`fault apiserver-restart: the API server stopped, down ${downMs} ms`);
        try {
          await stack.restartApiServer(downMs);
        } finally {
          apiDown = false;
          apiBackAt = Date.now();
        }
        log('API server started again on its ports, certificates and etcd');
        break;
      }
      case 'leader-freeze': {
        const target = await leader();
        target.child?.kill('SIGSTOP');
        const frozenMs = leaseMs + random.between(1_000, 5_000);
        log(`fault leader-freeze: ${target.identity} SIGSTOP for ${frozenMs} ms`);
        await sleep(frozenMs);
        frozen(target, target.identity);
        target.child?.kill('SIGCONT');
        log(`operator ${target.identity} SIGCONT`);
        break;
      }
    }
    if (missed.length === 0) summary.faults[kind] += 1;
    else {
      summary.notRun.push(`${kind}: ${missed.join('; ')}`);
      log(`fault ${kind} did not run as drawn: ${missed.join('; ')}`);
    }
  };

  const faultLoop = async (random: Random): Promise<void> => {
    await keepTwoOperators();
    // Kinds drawn from a shuffled bag: every kind once in each round of them, in random order.
    let bag: FaultKind[] = [];
    while (!over()) {
      await sleep(random.between(2_000, 6_000));
      if (over() || o.faults.length === 0) continue;
      if (bag.length === 0) bag = random.shuffle(o.faults);
      const kind = bag.pop()!;
      summary.drawn[kind] += 1;
      await fault(kind, random);
      await keepTwoOperators();
    }
  };

  log(
    `seed ${o.seed}: ${o.durationMs / 1000} s of reassigns and faults (${o.faults.join(', ')}; receiver kills ${o.receiverKills})`,
  );
  const loops = [
    faultLoop(random.fork()),
    ...o.cubes.map((cube) => reassignLoop(cube, random.fork())),
  ].map((loop) =>
    loop.catch((error: unknown) => {
      failed = true;
      throw error;
    }),
  );
  const outcomes = await Promise.allSettled(loops);
  const failure = outcomes.find((x) => x.status === 'rejected');
  if (failure) throw failure.reason;
  // A thawed leader may exit a little after its SIGCONT, refused as stale.
  await sleep(1_000);
  await keepTwoOperators();
  await leader();
  log('faults and reassigns stopped');
  return summary;
}

/**
 * Once every cube settled: waits until every replica of a replica set that owns none of the
 * cube's partitions has sealed, handed off and dropped it (a 404), so that what it held is in
 * deep storage when the audit reads it.
 */
export async function waitForDropped(
  replicas: Record<string, ReceiverProcess[]>,
  cube: string,
  owned: Record<string, number[]>,
): Promise<void> {
  for (const [rs, list] of Object.entries(replicas)) {
    if ((owned[rs] ?? []).length > 0) continue;
    for (const r of list) {
      await waitFor(`${r.options.id} to drop ${cube}`, async () => {
        const held = await r.client.cubeStatus(cube).catch((e: unknown) => e);
        return held instanceof ReceiverApiError && held.status === 404;
      });
    }
  }
}
