// stepReassign against a fake ReassignContext: fake receivers that record every call, a persist
// that applies the merge patch to the object (the journal lives there), and a clock the test sets.
// One table of phase × fault gives the receiver calls made, in order with the writes, and where the
// journal ends up; the tests after it drive whole moves, phase entries and aborts.
import {
  cubeAssignment,
  type CubeAssignment,
  type CubeAssignmentStatusPatch,
  type ReassignJournal,
  type ReassignPhase,
} from '../../src/api/cube-assignment.ts';
import type {
  AssignCubeRequest,
  CubeStatus,
  DrainRequest,
  DrainResponse,
  FenceRequest,
  PartitionStatus,
  SegmentStatus,
} from '../../src/protocol/admin-api.ts';
import { ReceiverApiError, StaleLeaderError } from '../../src/protocol/client.ts';
import type { ReceiverEndpoint } from '../../src/operator/discovery.ts';
import {
  PhaseBlocked,
  PhaseEntries,
  failoverStart,
  isSourceless,
  placementJournal,
  requeueDelayMs,
  stepReassign,
  type ReassignContext,
  type ReassignReceiver,
  type StepOutcome,
} from '../../src/operator/reassign/index.ts';
import { applyMergePatch, ordersCube } from '../support/cube-assignments.ts';

const t0 = Date.parse('2026-11-30T10:00:00.000Z');
const phaseTimeoutMs = 60_000;
const drainTimeoutMs = 20_000;
const handOffTimeoutMs = 30_000;
const drainPollMs = 250;

type Fault =
  | 'unreachable'
  | 404
  | 409
  /** 409 StaleLeader: the receiver has seen a later leader's term */
  | 'staleLeader'
  /** drain answers done: false */
  | 'draining'
  /** seal answers with a segment not handed off yet */
  | 'handOffPending'
  /** 409 the first time only (a release short of the stop offset, until drained) */
  | '409 once'
  /** pause answers positions 50 past the table's (a replica that missed the pause ran on) */
  | 'ahead';

interface Scenario {
  /** `<receiver> <method>` → what goes wrong there. */
  faults?: Record<string, Fault>;
  /** Replica sets whose pods are all away. */
  away?: string[];
  /** Time since the phase started. */
  inPhaseMs?: number;
}

/** Every receiver call and every status write, in the order they happened. */
type Log = string[];

const positions: Record<string, Record<number, string>> = {
  'rs-a-0': { 0: '100', 1: '200' },
  'rs-a-1': { 0: '105', 1: '190' },
};
/** What each replica set committed, as a fence answers it: partition 0 with a late range. */
const committedBy: Record<string, Record<string, [string, string][]>> = {
  'rs-a': {
    '0': [
      ['0', '80'],
      ['90', '95'],
    ],
  },
};
const watermarks: Record<string, Record<number, number>> = {
  'rs-a-0': { 0: 1_000, 1: 2_000 },
  'rs-a-1': { 0: 1_500, 1: 1_800 },
};

function partitionStatus(
  receiver: string,
  partition: number,
  state: PartitionStatus['state'],
  stopOffset: string | null = null,
): PartitionStatus {
  return {
    partition,
    state,
    epoch: 1,
    position: positions[receiver]?.[partition] ?? '0',
    highWatermark: '300',
    lag: '0',
    stopOffset,
    watermark: watermarks[receiver]?.[partition] ?? null,
  };
}

function failure(fault: Fault, what: string): Error {
  if (fault === 404) return new ReceiverApiError(404, `${what}: 404 cube orders not found`);
  if (fault === 409) return new ReceiverApiError(409, `${what}: 409 partition 0 was released`);
  if (fault === 'staleLeader') {
    return new StaleLeaderError(409, `${what}: 409 StaleLeader`, {
      error: 'stale leader',
      reason: 'StaleLeader',
      message: 'cube orders takes calls from leader term 3 on; this call carries term 2',
    });
  }
  return new TypeError('fetch failed', {
    cause: Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }),
  });
}

/** A receiver that records its calls in `log` and fails where the scenario says. */
function fakeReceiver(
  name: string,
  scenario: Scenario,
  log: Log,
  signals: (AbortSignal | undefined)[],
): ReassignReceiver {
  const failedOnce = new Set<string>();
  const answer = async <T>(
    method: string,
    detail: string,
    signal: AbortSignal | undefined,
    ok: (fault: Fault | undefined) => T,
  ): Promise<T> => {
    log.push(`${name} ${method}${detail ? ` ${detail}` : ''}`);
    signals.push(signal);
    await Promise.resolve();
    signal?.throwIfAborted();
    const key = `${name} ${method}`;
    const fault = scenario.faults?.[key];
    if (fault === '409 once' && !failedOnce.has(key)) {
      failedOnce.add(key);
      throw failure(409, `POST http://${name}/v1/cubes/orders/${method}`);
    }
    if (fault === 'unreachable' || fault === 404 || fault === 409 || fault === 'staleLeader')
      throw failure(fault, `POST http://${name}/v1/cubes/orders/${method}`);
    return ok(fault);
  };
  const segment = (state: SegmentStatus['state']): SegmentStatus => ({
    windowStart: 0,
    windowEnd: 3_600_000,
    state,
    rowCount: 1,
    offsetRanges: {},
    epochs: {},
  });
  const cubeStatus = (segments: SegmentStatus[]): CubeStatus => ({
    namespace: 'default',
    cube: 'orders',
    replicaSet: name.replace(/-[0-9]+$/, ''),
    receiver: name,
    topic: 'orders',
    specDigest: 'digest',
    partitions: [],
    segments,
    ingested: 0,
    rejected: {},
    consumer: { state: 'running', failures: 0 },
  });
  return {
    pause: (_cube: string, partitions: number[], signal?: AbortSignal) =>
      answer('pause', `[${partitions.join(',')}]`, signal, (fault) => ({
        partitions: partitions.map((p) => {
          const status = partitionStatus(name, p, 'paused');
          const ahead = fault === 'ahead' ? 50n : 0n;
          return { ...status, position: String(BigInt(status.position) + ahead) };
        }),
      })),
    resume: (_cube: string, partitions: number[], signal?: AbortSignal) =>
      answer('resume', `[${partitions.join(',')}]`, signal, () => ({
        partitions: partitions.map((p) => partitionStatus(name, p, 'consuming')),
      })),
    drain: (_cube: string, request: DrainRequest, signal?: AbortSignal) =>
      answer(
        'drain',
        `${JSON.stringify(request.stopOffsets)} ${request.timeoutMs}ms`,
        signal,
        (fault): DrainResponse => ({
          done: fault !== 'draining',
          partitions: Object.entries(request.stopOffsets).map(([p, stop]) =>
            partitionStatus(name, Number(p), fault === 'draining' ? 'draining' : 'stopped', stop),
          ),
        }),
      ),
    release: (_cube: string, partitions: number[], signal?: AbortSignal) =>
      answer('release', `[${partitions.join(',')}]`, signal, () => ({
        partitions: partitions.map((p) => partitionStatus(name, p, 'released')),
      })),
    assign: (_cube: string, request: AssignCubeRequest, signal?: AbortSignal) =>
      answer(
        'assign',
        request.partitions
          .map(
            (p) =>
              `${p.partition}@${p.position}/e${p.epoch}/w${p.watermark ?? '-'}${p.committedElsewhere ? ` skip ${JSON.stringify(p.committedElsewhere)}` : ''}`,
          )
          .join(','),
        signal,
        () => cubeStatus([]),
      ),
    seal: (_cube: string, waitMs = 0, signal?: AbortSignal) =>
      answer('seal', `${waitMs}ms`, signal, (fault) =>
        cubeStatus([
          segment('HANDED_OFF'),
          segment(fault === 'handOffPending' ? 'IMMUTABLE' : 'HANDED_OFF'),
        ]),
      ),
    cubeStatus: (_cube: string, signal?: AbortSignal) =>
      answer('status', '', signal, () => ({
        ...cubeStatus([]),
        partitions: [0, 1].map((p) => partitionStatus(name, p, 'paused')),
      })),
    fence: (_cube: string, request: FenceRequest, signal?: AbortSignal) =>
      answer(
        'fence',
        `${request.replicaSet} ${JSON.stringify(request.partitions)}${request.from ? ` from ${JSON.stringify(request.from)}` : ''}`,
        signal,
        () => ({
          committed: committedBy[request.replicaSet] ?? {},
          records: 2,
        }),
      ),
    unassign: (cube: string, _force = false, signal?: AbortSignal) =>
      answer('unassign', '', signal, () => ({
        namespace: 'default',
        cube,
        unassigned: true as const,
      })),
  };
}

const moves: ReassignJournal['moves'] = [
  { partition: 0, from: 'rs-a', to: 'rs-b' },
  { partition: 1, from: 'rs-a', to: 'rs-b' },
];

function journalAt(phase: ReassignPhase, extra: Partial<ReassignJournal> = {}): ReassignJournal {
  const before: Partial<ReassignJournal> =
    phase === 'Starting' || phase === 'Sealing' || phase === 'Done'
      ? { stopOffsets: { '0': '105', '1': '200' }, watermarks: { '0': 1_500, '1': 2_000 } }
      : phase === 'Draining'
        ? { stopOffsets: { '0': '105', '1': '200' } }
        : {};
  return {
    id: 'r-2-abcdef',
    phase,
    moves,
    startedAt: new Date(t0 - 5_000).toISOString(),
    phaseStartedAt: new Date(t0).toISOString(),
    ...before,
    ...extra,
  };
}

interface Harness {
  ctx: ReassignContext;
  log: Log;
  /** The cube as persisted. */
  object: () => CubeAssignment;
  events: string[];
  phases: string[];
  /** onCubeMissing calls: `<reassign id> <receiver>`. */
  missing: string[];
  /** onReplicaRepaired calls: `<receiver> <repair>`. */
  repaired: string[];
  signals: (AbortSignal | undefined)[];
  clock: { ms: number };
  abort: AbortController;
}

function harness(journal: ReassignJournal | undefined, scenario: Scenario = {}): Harness {
  const log: Log = [];
  const events: string[] = [];
  const phases: string[] = [];
  const missing: string[] = [];
  const repaired: string[] = [];
  const signals: (AbortSignal | undefined)[] = [];
  const clock = { ms: t0 + (scenario.inPhaseMs ?? 0) };
  const abort = new AbortController();
  let object = ordersCube(['rs-b'], {
    assignment: { 'rs-a': [0, 1] },
    epochs: { '0': 1, '1': 1 },
    ...(journal ? { reassign: journal } : {}),
  });
  const endpoint = (name: string, replicaSet: string): ReceiverEndpoint => ({
    name,
    replicaSet,
    baseUrl: `http://${name}`,
  });
  const receivers = new Map<string, ReceiverEndpoint[]>();
  for (const rs of ['rs-a', 'rs-b']) {
    if (!scenario.away?.includes(rs))
      receivers.set(rs, [endpoint(`${rs}-0`, rs), endpoint(`${rs}-1`, rs)]);
  }
  const clients = new Map<string, ReassignReceiver>();
  const ctx: ReassignContext = {
    cube: 'orders',
    object,
    receivers,
    client: (e) => {
      let c = clients.get(e.name);
      if (!c) clients.set(e.name, (c = fakeReceiver(e.name, scenario, log, signals)));
      return c;
    },
    startingOffsets: (partitions) =>
      Promise.resolve(new Map(partitions.map((p) => [p, 0n] as const))),
    persist: (status: CubeAssignmentStatusPatch) => {
      const phase = status.reassign === null ? 'cleared' : (status.reassign?.phase ?? 'unchanged');
      log.push(`persist ${phase}`);
      const version = String(Number(object.metadata.resourceVersion ?? '0') + 1);
      object = cubeAssignment.parse({
        ...object,
        metadata: { ...object.metadata, resourceVersion: version },
        status: applyMergePatch(object.status, status),
      });
      return Promise.resolve(object);
    },
    event: (type, reason, message) => events.push(`${type} ${reason}: ${message}`),
    onCubeMissing: (e, j) => missing.push(`${j.id} ${e.name}`),
    onReplicaRepaired: (e, repair) => repaired.push(`${e.name} ${repair}`),
    onPhase: (phase, j) => phases.push(`${j.id} ${phase}`),
    entries: new PhaseEntries(),
    phaseTimeoutMs,
    drainTimeoutMs,
    handOffTimeoutMs,
    drainPollMs,
    sealPollMs: 250,
    now: () => new Date(clock.ms),
    signal: abort.signal,
  };
  return {
    ctx,
    log,
    object: () => object,
    events,
    phases,
    missing,
    repaired,
    signals,
    clock,
    abort,
  };
}

interface Expected {
  calls: string[];
  kind: StepOutcome['kind'];
  /** The persisted journal's phase afterwards, or `cleared`. */
  phase: ReassignPhase | 'cleared';
  reason?: string;
  receiverStatus?: number;
  requeueAfterMs?: number;
}

interface Case extends Scenario, Expected {
  name: string;
  at: ReassignPhase;
}

const paused = ['rs-a-0 pause [0,1]', 'rs-a-1 pause [0,1]'];
const drains = [
  'rs-a-0 drain {"0":"105","1":"200"} 250ms',
  'rs-a-1 drain {"0":"105","1":"200"} 250ms',
];
const released = ['rs-a-0 release [0,1]', 'rs-a-1 release [0,1]'];
/** Before the targets start: the sources' data of the moved partitions is committed. */
const committedChecked = ['rs-a-0 status', 'rs-a-1 status'];
const assigned = [
  'rs-b-0 assign 0@105/e2/w1500,1@200/e2/w2000',
  'rs-b-1 assign 0@105/e2/w1500,1@200/e2/w2000',
];
const resumed = ['rs-a-0 resume [0,1]', 'rs-a-1 resume [0,1]'];
const late = phaseTimeoutMs + 1;

const cases: Case[] = [
  {
    name: 'Planned: nothing to call, on to Pausing',
    at: 'Planned',
    calls: ['persist Pausing'],
    kind: 'advanced',
    phase: 'Pausing',
  },
  {
    name: 'Pausing: every source replica pauses, then the stop offsets are written',
    at: 'Pausing',
    calls: [...paused, 'persist Draining'],
    kind: 'advanced',
    phase: 'Draining',
    requeueAfterMs: requeueDelayMs.advanced,
  },
  {
    name: 'Pausing, a source replica unreachable: blocked, retried',
    at: 'Pausing',
    faults: { 'rs-a-1 pause': 'unreachable' },
    calls: paused,
    kind: 'blocked',
    phase: 'Pausing',
    reason: 'PauseFailed',
    requeueAfterMs: requeueDelayMs.blocked,
  },
  {
    name: 'Pausing, a source replica unreachable past the deadline: sources resumed, rolled back',
    at: 'Pausing',
    faults: { 'rs-a-1 pause': 'unreachable' },
    inPhaseMs: late,
    calls: [...paused, ...resumed, 'persist cleared'],
    kind: 'rolledBack',
    phase: 'cleared',
    reason: 'ReassignRolledBack',
  },
  {
    name: 'Pausing, the source replica set away: blocked before any call',
    at: 'Pausing',
    away: ['rs-a'],
    calls: [],
    kind: 'blocked',
    phase: 'Pausing',
    reason: 'SourceReplicaSetUnavailable',
  },
  {
    name: 'Pausing, the source replica set away past the deadline: rolled back, nothing to resume',
    at: 'Pausing',
    away: ['rs-a'],
    inPhaseMs: late,
    calls: ['persist cleared'],
    kind: 'rolledBack',
    phase: 'cleared',
    reason: 'ReassignRolledBack',
  },
  {
    name: 'Pausing, a replica lacking the cube (404): left out, its sibling carries the move',
    at: 'Pausing',
    faults: { 'rs-a-0 pause': 404 },
    calls: [...paused, 'persist Draining'],
    kind: 'advanced',
    phase: 'Draining',
  },
  {
    name: 'Pausing, no replica of the source holding the cube (404): blocked with the status',
    at: 'Pausing',
    faults: { 'rs-a-0 pause': 404, 'rs-a-1 pause': 404 },
    calls: paused,
    kind: 'blocked',
    phase: 'Pausing',
    reason: 'PauseFailed',
    receiverStatus: 404,
  },
  {
    name: 'Draining: every source replica at its stop offsets, on to Starting',
    at: 'Draining',
    calls: [...drains, 'persist Starting'],
    kind: 'advanced',
    phase: 'Starting',
  },
  {
    name: 'Draining, the first replica not done: wait, the next replica is not asked yet',
    at: 'Draining',
    faults: { 'rs-a-0 drain': 'draining' },
    calls: drains.slice(0, 1),
    kind: 'waiting',
    phase: 'Draining',
    requeueAfterMs: requeueDelayMs.drainPending,
  },
  {
    name: 'Draining, the second replica not done: wait',
    at: 'Draining',
    faults: { 'rs-a-1 drain': 'draining' },
    calls: drains,
    kind: 'waiting',
    phase: 'Draining',
  },
  {
    name: 'Draining, not done past the drain timeout: blocked DrainIncomplete',
    at: 'Draining',
    faults: { 'rs-a-0 drain': 'draining' },
    inPhaseMs: drainTimeoutMs + 1,
    calls: drains.slice(0, 1),
    kind: 'blocked',
    phase: 'Draining',
    reason: 'DrainIncomplete',
  },
  {
    name: 'Draining, not done past the phase deadline: rolled back',
    at: 'Draining',
    faults: { 'rs-a-0 drain': 'draining' },
    inPhaseMs: late,
    calls: [...drains.slice(0, 1), ...resumed, 'persist cleared'],
    kind: 'rolledBack',
    phase: 'cleared',
    reason: 'ReassignRolledBack',
  },
  {
    name: 'Draining, a 409 from a replica not past the stop offsets (paused to read its positions): blocked with the status',
    at: 'Draining',
    faults: { 'rs-a-1 drain': 409 },
    calls: [...drains, 'rs-a-1 pause [0,1]'],
    kind: 'blocked',
    phase: 'Draining',
    reason: 'DrainFailed',
    receiverStatus: 409,
  },
  {
    name: 'Draining, a replica that missed the pause ran past the stop offsets (409): paused, the stops raised to its positions and written',
    at: 'Draining',
    faults: { 'rs-a-1 drain': 409, 'rs-a-1 pause': 'ahead' },
    calls: [...drains, 'rs-a-1 pause [0,1]', 'persist Draining'],
    kind: 'waiting',
    phase: 'Draining',
    requeueAfterMs: requeueDelayMs.advanced,
  },
  {
    name: 'Draining, the source replica set away: blocked before any call',
    at: 'Draining',
    away: ['rs-a'],
    calls: [],
    kind: 'blocked',
    phase: 'Draining',
    reason: 'SourceReplicaSetUnavailable',
  },
  {
    name: 'Draining, a replica lacking the cube (404): left out, on to Starting',
    at: 'Draining',
    faults: { 'rs-a-0 drain': 404 },
    calls: [...drains, 'persist Starting'],
    kind: 'advanced',
    phase: 'Starting',
  },
  {
    name: 'Draining, a replica lacking the cube and its sibling still draining: wait',
    at: 'Draining',
    faults: { 'rs-a-0 drain': 404, 'rs-a-1 drain': 'draining' },
    calls: drains,
    kind: 'waiting',
    phase: 'Draining',
  },
  {
    name: 'Draining, no replica of the source holding the cube (404): blocked with the status',
    at: 'Draining',
    faults: { 'rs-a-0 drain': 404, 'rs-a-1 drain': 404 },
    calls: drains,
    kind: 'blocked',
    phase: 'Draining',
    reason: 'DrainFailed',
    receiverStatus: 404,
  },
  {
    name: 'Draining, a replica unreachable: blocked',
    at: 'Draining',
    faults: { 'rs-a-0 drain': 'unreachable' },
    calls: drains.slice(0, 1),
    kind: 'blocked',
    phase: 'Draining',
    reason: 'DrainFailed',
  },
  {
    name: 'Starting: sources release, targets start from the stop offsets under the next epoch',
    at: 'Starting',
    calls: [...released, ...committedChecked, ...assigned, 'persist Sealing'],
    kind: 'advanced',
    phase: 'Sealing',
  },
  {
    name: 'Starting, a source 404 on release: it holds nothing, carry on',
    at: 'Starting',
    faults: { 'rs-a-1 release': 404 },
    calls: [...released, ...committedChecked, ...assigned, 'persist Sealing'],
    kind: 'advanced',
    phase: 'Sealing',
  },
  {
    name: 'Starting, a source replica that missed Draining (409, short of a stop): drains to it, then releases',
    at: 'Starting',
    faults: { 'rs-a-0 release': '409 once' },
    calls: [
      'rs-a-0 release [0,1]',
      'rs-a-0 status',
      'rs-a-0 drain {"0":"105"} 250ms',
      ...released,
      ...committedChecked,
      ...assigned,
      'persist Sealing',
    ],
    kind: 'advanced',
    phase: 'Sealing',
  },
  {
    name: 'Starting, a source replica that missed Draining still draining: wait',
    at: 'Starting',
    faults: { 'rs-a-0 release': 409, 'rs-a-0 drain': 'draining' },
    calls: ['rs-a-0 release [0,1]', 'rs-a-0 status', 'rs-a-0 drain {"0":"105"} 250ms'],
    kind: 'waiting',
    phase: 'Starting',
    requeueAfterMs: requeueDelayMs.drainPending,
  },
  {
    name: 'Starting, a source 409 on release, drained and refused again: blocked with the status',
    at: 'Starting',
    faults: { 'rs-a-0 release': 409 },
    calls: [
      'rs-a-0 release [0,1]',
      'rs-a-0 status',
      'rs-a-0 drain {"0":"105"} 250ms',
      'rs-a-0 release [0,1]',
    ],
    kind: 'blocked',
    phase: 'Starting',
    reason: 'ReleaseFailed',
    receiverStatus: 409,
  },
  {
    name: 'Starting, a target unreachable: blocked',
    at: 'Starting',
    faults: { 'rs-b-1 assign': 'unreachable' },
    calls: [...released, ...committedChecked, ...assigned],
    kind: 'blocked',
    phase: 'Starting',
    reason: 'StartFailed',
  },
  {
    name: 'Starting, a target unreachable past the deadline: still blocked, never rolled back',
    at: 'Starting',
    faults: { 'rs-b-1 assign': 'unreachable' },
    inPhaseMs: late,
    calls: [...released, ...committedChecked, ...assigned],
    kind: 'blocked',
    phase: 'Starting',
    reason: 'StartFailed',
  },
  {
    name: 'Starting, the target replica set away: sources released, blocked',
    at: 'Starting',
    away: ['rs-b'],
    calls: [...released, ...committedChecked],
    kind: 'blocked',
    phase: 'Starting',
    reason: 'TargetReceiverUnavailable',
  },
  {
    name: 'Starting, the source replica set away: blocked, no target started (nothing released)',
    at: 'Starting',
    away: ['rs-a'],
    calls: [],
    kind: 'blocked',
    phase: 'Starting',
    reason: 'SourceReplicaSetUnavailable',
  },
  {
    name: 'Starting, the source replica set away past the deadline: still blocked, never rolled back',
    at: 'Starting',
    away: ['rs-a'],
    inPhaseMs: late,
    calls: [],
    kind: 'blocked',
    phase: 'Starting',
    reason: 'SourceReplicaSetUnavailable',
    requeueAfterMs: requeueDelayMs.blocked,
  },
  {
    name: 'Sealing, the emptied source replica set away: blocked, Done not reached',
    at: 'Sealing',
    away: ['rs-a'],
    inPhaseMs: late,
    calls: [],
    kind: 'blocked',
    phase: 'Sealing',
    reason: 'SourceReplicaSetUnavailable',
    requeueAfterMs: requeueDelayMs.blocked,
  },
  {
    name: 'Sealing: each source replica seals (no wait), hands off and is unassigned; on to Done',
    at: 'Sealing',
    calls: [
      'rs-a-0 seal 250ms',
      'rs-a-0 unassign',
      'rs-a-1 seal 250ms',
      'rs-a-1 unassign',
      'persist Done',
    ],
    kind: 'advanced',
    phase: 'Done',
  },
  {
    name: 'Sealing, a hand-off pending: wait, the next replica is not asked yet',
    at: 'Sealing',
    faults: { 'rs-a-0 seal': 'handOffPending' },
    calls: ['rs-a-0 seal 250ms'],
    kind: 'waiting',
    phase: 'Sealing',
    requeueAfterMs: requeueDelayMs.handOffPending,
  },
  {
    name: 'Sealing, a hand-off pending past its timeout: blocked HandOffPending',
    at: 'Sealing',
    faults: { 'rs-a-1 seal': 'handOffPending' },
    inPhaseMs: handOffTimeoutMs + 1,
    calls: ['rs-a-0 seal 250ms', 'rs-a-0 unassign', 'rs-a-1 seal 250ms'],
    kind: 'blocked',
    phase: 'Sealing',
    reason: 'HandOffPending',
  },
  {
    name: 'Sealing, a 404 on seal: already unassigned, skipped',
    at: 'Sealing',
    faults: { 'rs-a-0 seal': 404 },
    calls: ['rs-a-0 seal 250ms', 'rs-a-1 seal 250ms', 'rs-a-1 unassign', 'persist Done'],
    kind: 'advanced',
    phase: 'Done',
  },
  {
    name: 'Sealing, a 409 on unassign: blocked with the status',
    at: 'Sealing',
    faults: { 'rs-a-0 unassign': 409 },
    calls: ['rs-a-0 seal 250ms', 'rs-a-0 unassign'],
    kind: 'blocked',
    phase: 'Sealing',
    reason: 'UnassignFailed',
    receiverStatus: 409,
  },
  {
    name: 'Sealing, a source unreachable past the deadline: still blocked, never rolled back',
    at: 'Sealing',
    faults: { 'rs-a-0 seal': 'unreachable' },
    inPhaseMs: late,
    calls: ['rs-a-0 seal 250ms'],
    kind: 'blocked',
    phase: 'Sealing',
    reason: 'SealFailed',
  },
  {
    name: 'Done: the journal is cleared',
    at: 'Done',
    calls: ['persist cleared'],
    kind: 'completed',
    phase: 'cleared',
    requeueAfterMs: requeueDelayMs.ended,
  },
];

describe('stepReassign: phase × fault', () => {
  test.each(cases)('$name', async (c) => {
    const h = harness(journalAt(c.at), c);
    const outcome = await stepReassign(h.ctx, journalAt(c.at));
    expect(h.log).toEqual(c.calls);
    expect(outcome.kind).toBe(c.kind);
    expect(h.object().status?.reassign?.phase ?? 'cleared').toBe(c.phase);
    if (c.requeueAfterMs !== undefined) expect(outcome.requeueAfterMs).toBe(c.requeueAfterMs);
    if (outcome.kind === 'blocked' || outcome.kind === 'rolledBack') {
      expect(outcome.error.reason).toBe(c.reason);
      expect(outcome.error.receiverStatus).toBe(c.receiverStatus);
    } else {
      expect(c.reason).toBeUndefined();
    }
    // Every receiver call carries the reconcile's signal; each phase is announced once.
    expect(h.signals.every((s) => s === h.ctx.signal)).toBe(true);
    expect(h.phases).toEqual([`r-2-abcdef ${c.at}`]);
  });
});

describe('stepReassign: what a step writes', () => {
  test('Pausing writes stop = the highest position over the source replicas', async () => {
    const h = harness(journalAt('Pausing'));
    await stepReassign(h.ctx, journalAt('Pausing'));
    expect(h.object().status?.reassign).toMatchObject({
      phase: 'Draining',
      stopOffsets: { '0': '105', '1': '200' },
      phaseStartedAt: new Date(t0).toISOString(),
    });
  });

  test('a move without a source stops at the starting offset, and goes on to Starting: nothing drains', async () => {
    const j = journalAt('Pausing', { moves: [{ partition: 2, to: 'rs-b' }] });
    const h = harness(j);
    await stepReassign(h.ctx, j);
    expect(h.log).toEqual(['persist Starting']);
    expect(h.object().status?.reassign?.stopOffsets).toEqual({ '2': '0' });
  });

  test('a first placement is written at Starting with its starting offsets, then completes in one step: nothing to seal', async () => {
    const fresh = { moves: [2, 3].map((partition) => ({ partition, to: 'rs-b' })) };
    const h = harness(undefined);
    h.ctx.startingOffsets = (ps) =>
      Promise.resolve(new Map(ps.map((p) => [p, BigInt(40 + p)] as const)));
    const j = await placementJournal(h.ctx, journalAt('Planned', fresh));
    expect(isSourceless(j)).toBe(true);
    expect(j).toMatchObject({ phase: 'Starting', stopOffsets: { '2': '42', '3': '43' } });
    expect(h.log).toEqual([]);

    const outcome = await stepReassign(h.ctx, j);
    expect(outcome.kind).toBe('completed');
    expect(h.log).toEqual([
      'rs-b-0 assign 2@42/e1/w-,3@43/e1/w-',
      'rs-b-1 assign 2@42/e1/w-,3@43/e1/w-',
      'persist cleared',
    ]);
    expect(h.object().status).toMatchObject({
      assignment: { 'rs-a': [0, 1], 'rs-b': [2, 3] },
      epochs: { '0': 1, '1': 1, '2': 1, '3': 1 },
    });
    expect(h.object().status?.reassign).toBeUndefined();
    expect(h.events).toEqual([
      'Normal ReassignCompleted: reassign r-2-abcdef moved 2 partition(s): 2 (new)→rs-b, 3 (new)→rs-b',
    ]);
  });

  test("a first placement's completion is handed to the caller when it holds it (written with the cube's first observation); other completions are persisted", async () => {
    const fresh = { moves: [2, 3].map((partition) => ({ partition, to: 'rs-b' })) };
    const h = harness(undefined);
    h.ctx.startingOffsets = (ps) =>
      Promise.resolve(new Map(ps.map((p) => [p, BigInt(40 + p)] as const)));
    const held: CubeAssignmentStatusPatch[] = [];
    h.ctx.holdPlacementCompletion = (status) => {
      held.push(status);
      return h.ctx.object;
    };
    const j = await placementJournal(h.ctx, journalAt('Planned', fresh));
    const outcome = await stepReassign(h.ctx, j);
    expect(outcome.kind).toBe('completed');
    expect(h.log).toEqual([
      'rs-b-0 assign 2@42/e1/w-,3@43/e1/w-',
      'rs-b-1 assign 2@42/e1/w-,3@43/e1/w-',
    ]);
    expect(held).toHaveLength(1);
    expect(held[0]).toMatchObject({
      reassign: null,
      assignment: { 'rs-a': [0, 1], 'rs-b': [2, 3] },
      epochs: { '0': 1, '1': 1, '2': 1, '3': 1 },
    });
    expect(h.events).toEqual([
      'Normal ReassignCompleted: reassign r-2-abcdef moved 2 partition(s): 2 (new)→rs-b, 3 (new)→rs-b',
    ]);

    // A move with a source completes as before: persisted, whoever would hold it.
    const moved = journalAt('Done');
    const other = harness(moved);
    other.ctx.holdPlacementCompletion = (status) => {
      held.push(status);
      return other.ctx.object;
    };
    expect((await stepReassign(other.ctx, moved)).kind).toBe('completed');
    expect(other.log).toEqual(['persist cleared']);
    expect(held).toHaveLength(1);
  });

  test('a first placement whose starting offsets the brokers do not give: PhaseBlocked, written at Planned by the caller', async () => {
    const h = harness(undefined);
    h.ctx.startingOffsets = () => Promise.reject(new Error('connect ECONNREFUSED'));
    await expect(
      placementJournal(h.ctx, journalAt('Planned', { moves: [{ partition: 2, to: 'rs-b' }] })),
    ).rejects.toMatchObject({ reason: 'SourceUnavailable' });
  });

  test('Draining raises the stops to the positions of a replica that ran past them, and tells it', async () => {
    const h = harness(journalAt('Draining'), {
      faults: { 'rs-a-1 drain': 409, 'rs-a-1 pause': 'ahead' },
    });
    await stepReassign(h.ctx, journalAt('Draining'));
    expect(h.object().status?.reassign).toMatchObject({
      phase: 'Draining',
      stopOffsets: { '0': '155', '1': '240' },
      phaseStartedAt: new Date(t0).toISOString(),
    });
    expect(h.events).toEqual([
      'Normal StopOffsetsRaised: reassign r-2-abcdef: a replica of rs-a that missed the pause ran past the stop offsets; raised to 0 at 155, 1 at 240, every replica of rs-a drains on to them',
    ]);
    expect(h.repaired).toEqual(['rs-a-1 raiseStops']);
  });

  test('Starting tells and counts a replica released past its stop offsets (its excess fenced)', async () => {
    const h = harness(journalAt('Starting'));
    const client = h.ctx.client;
    h.ctx.client = (e) => {
      const c = client(e);
      if (e.name !== 'rs-a-1') return c;
      return {
        ...c,
        release: async (cube, partitions, signal, stopOffsets) => {
          const answer = await c.release(cube, partitions, signal, stopOffsets);
          const past = answer.partitions.map((p) => ({
            ...p,
            position: '230',
            stopOffset: stopOffsets?.[String(p.partition)] ?? null,
          }));
          return { partitions: past };
        },
      };
    };
    await stepReassign(h.ctx, journalAt('Starting'));
    expect(h.events).toEqual([
      'Warning ExcessFenced: receiver rs-a-1 (rs-a) had consumed past the stop offsets of partitions 0 (at 230, stop 105), 1 (at 230, stop 200) under an epoch that is over: it released them there and dropped the segments holding the excess, which are never handed off',
    ]);
    expect(h.repaired).toEqual(['rs-a-1 fence']);
  });

  test('Starting tells and counts a replica that missed Draining, once drained', async () => {
    const h = harness(journalAt('Starting'), { faults: { 'rs-a-0 release': '409 once' } });
    await stepReassign(h.ctx, journalAt('Starting'));
    expect(h.events).toEqual([
      "Normal ReplicaRepaired: receiver rs-a-0 (rs-a) brought to its replica set's state: it missed Draining, drained 0 at 105 (the stop offsets) before its release",
    ]);
    expect(h.repaired).toEqual(['rs-a-0 drain']);
  });

  test('Starting releases at the stop offsets, so that a replica past them fences the excess', async () => {
    const h = harness(journalAt('Starting'));
    const stops: unknown[] = [];
    const client = h.ctx.client;
    h.ctx.client = (e) => {
      const c = client(e);
      return {
        ...c,
        release: (cube, partitions, signal, stopOffsets) => {
          stops.push(stopOffsets);
          return c.release(cube, partitions, signal, stopOffsets);
        },
      };
    };
    await stepReassign(h.ctx, journalAt('Starting'));
    expect(stops).toEqual([
      { '0': '105', '1': '200' },
      { '0': '105', '1': '200' },
    ]);
  });

  test('Draining writes the highest event-time watermark over the source replicas', async () => {
    const h = harness(journalAt('Draining'));
    await stepReassign(h.ctx, journalAt('Draining'));
    expect(h.object().status?.reassign?.watermarks).toEqual({ '0': 1_500, '1': 2_000 });
  });

  test('Sealing writes the final assignment (the emptied source deleted), bumped epochs and where they began', async () => {
    const h = harness(journalAt('Sealing'));
    await stepReassign(h.ctx, journalAt('Sealing'));
    expect(h.object().status).toMatchObject({
      assignment: { 'rs-b': [0, 1] },
      epochs: { '0': 2, '1': 2 },
      epochStarts: { '0': '105', '1': '200' },
      reassign: { phase: 'Done' },
    });
    expect(Object.keys(h.object().status?.assignment ?? {})).toEqual(['rs-b']);
  });

  test.each([
    ['Pausing', 'rs-a', 'rs-b'],
    ['Sealing', 'rs-b', 'rs-c'],
  ] as const)(
    '%s waits for a replica of %s that is not Ready, up to the phase timeout, then goes on and says so; %s is not waited for',
    async (phase, waitedFor, other) => {
      const waiting = harness(journalAt(phase));
      waiting.ctx.notReady = new Map([[waitedFor, [`${waitedFor}-2`]]]);
      const outcome = await stepReassign(waiting.ctx, journalAt(phase));
      expect(outcome.kind).toBe('waiting');
      expect(outcome.kind === 'waiting' && outcome.message).toBe(
        `receiver ${waitedFor}-2 of the move's replica sets is not Ready: ${phase} waits for it, up to 60s`,
      );
      expect(waiting.log).toEqual([]);
      const untouched = harness(journalAt(phase));
      untouched.ctx.notReady = new Map([[other, [`${other}-0`]]]);
      expect((await stepReassign(untouched.ctx, journalAt(phase))).kind).toBe('advanced');
      const late = harness(journalAt(phase), { inPhaseMs: phaseTimeoutMs + 1 });
      late.ctx.notReady = new Map([[waitedFor, [`${waitedFor}-2`]]]);
      expect((await stepReassign(late.ctx, journalAt(phase))).kind).toBe('advanced');
      expect(late.events).toEqual([
        `Warning ReplicaMissedMove: reassign r-2-abcdef goes on in ${phase} without receiver ${waitedFor}-2, not Ready for 60s: it is brought to its set's state when back, exactly if it missed no more than this move`,
      ]);
    },
  );

  test('Done emits ReassignCompleted; a roll-back emits ReassignRolledBack with the cause', async () => {
    const done = harness(journalAt('Done'));
    await stepReassign(done.ctx, journalAt('Done'));
    expect(done.events).toEqual([
      'Normal ReassignCompleted: reassign r-2-abcdef moved 2 partition(s): 0 rs-a→rs-b, 1 rs-a→rs-b',
    ]);

    const back = harness(journalAt('Pausing'), {
      faults: { 'rs-a-0 pause': 404, 'rs-a-1 pause': 404 },
      inPhaseMs: late,
    });
    const outcome = await stepReassign(back.ctx, journalAt('Pausing'));
    expect(back.events).toHaveLength(1);
    expect(back.events[0]).toMatch(
      /^Warning ReassignRolledBack: reassign r-2-abcdef rolled back in phase Pausing after 60s: pause on receiver rs-a-0/,
    );
    if (outcome.kind !== 'rolledBack') throw new Error(`expected a roll-back, got ${outcome.kind}`);
    expect(outcome.error.cause).toBeInstanceOf(PhaseBlocked);
    expect((outcome.error.cause as PhaseBlocked).receiverStatus).toBe(404);
  });

  test('a blocked target says which partitions wait and who released them, with the cause kept', async () => {
    const h = harness(journalAt('Starting'), { faults: { 'rs-b-0 assign': 409 } });
    const outcome = await stepReassign(h.ctx, journalAt('Starting'));
    if (outcome.kind !== 'blocked') throw new Error(`expected blocked, got ${outcome.kind}`);
    expect(outcome.error.message).toMatch(
      /^assign on receiver rs-b-0 \(rs-b\) failed: .*409.*; partitions 0, 1 \(released by rs-a\) wait for rs-b$/,
    );
    expect(outcome.error.cause).toBeInstanceOf(ReceiverApiError);
  });

  test('an unreachable receiver is named with the connection error', async () => {
    const h = harness(journalAt('Pausing'), { faults: { 'rs-a-0 pause': 'unreachable' } });
    const outcome = await stepReassign(h.ctx, journalAt('Pausing'));
    if (outcome.kind !== 'blocked') throw new Error(`expected blocked, got ${outcome.kind}`);
    expect(outcome.error.message).toBe(
      'pause on receiver rs-a-0 (rs-a) failed: fetch failed: connect ECONNREFUSED',
    );
    expect(outcome.error.receiverStatus).toBeUndefined();
  });
});

describe('stepReassign: a whole move, one phase per step', () => {
  test('Planned to Done in six steps; each write comes before the next phase calls anything', async () => {
    const h = harness(journalAt('Planned'));
    const kinds: string[] = [];
    for (let step = 0; step < 10; step += 1) {
      const journal = h.object().status?.reassign;
      if (!journal) break;
      h.ctx.object = h.object();
      kinds.push((await stepReassign(h.ctx, journal)).kind);
    }
    expect(kinds).toEqual([
      'advanced',
      'advanced',
      'advanced',
      'advanced',
      'advanced',
      'completed',
    ]);
    expect(h.log).toEqual([
      'persist Pausing',
      ...paused,
      'persist Draining',
      ...drains,
      'persist Starting',
      ...released,
      ...committedChecked,
      ...assigned,
      'persist Sealing',
      'rs-a-0 seal 250ms',
      'rs-a-0 unassign',
      'rs-a-1 seal 250ms',
      'rs-a-1 unassign',
      'persist Done',
      'persist cleared',
    ]);
    expect(h.phases).toEqual(
      ['Planned', 'Pausing', 'Draining', 'Starting', 'Sealing', 'Done'].map(
        (p) => `r-2-abcdef ${p}`,
      ),
    );
    expect(h.object().status).toEqual({
      assignment: { 'rs-b': [0, 1] },
      epochs: { '0': 2, '1': 2 },
      epochStarts: { '0': '105', '1': '200' },
    });
  });

  test('a drain polled until done: the phase is announced once, the deadline counts from its start', async () => {
    const faults: Record<string, Fault> = { 'rs-a-0 drain': 'draining' };
    const h = harness(journalAt('Draining'), { faults });
    const outcomes: StepOutcome['kind'][] = [];
    for (const inPhaseMs of [0, 5_000, 10_000]) {
      h.clock.ms = t0 + inPhaseMs;
      outcomes.push((await stepReassign(h.ctx, journalAt('Draining'))).kind);
    }
    delete faults['rs-a-0 drain'];
    outcomes.push((await stepReassign(h.ctx, journalAt('Draining'))).kind);
    expect(outcomes).toEqual(['waiting', 'waiting', 'waiting', 'advanced']);
    expect(h.phases).toEqual(['r-2-abcdef Draining']);
    expect(h.log.filter((l) => l.includes('drain'))).toEqual([
      ...drains.slice(0, 1),
      ...drains.slice(0, 1),
      ...drains.slice(0, 1),
      ...drains,
    ]);
    expect(h.object().status?.reassign).toMatchObject({
      phase: 'Starting',
      phaseStartedAt: new Date(t0 + 10_000).toISOString(),
    });
  });

  test('a phase blocked and retried is announced once; a new process announces it again', async () => {
    const h = harness(journalAt('Starting'), { faults: { 'rs-b-0 assign': 'unreachable' } });
    await stepReassign(h.ctx, journalAt('Starting'));
    await stepReassign(h.ctx, journalAt('Starting'));
    expect(h.phases).toEqual(['r-2-abcdef Starting']);
    h.ctx.entries = new PhaseEntries();
    await stepReassign(h.ctx, journalAt('Starting'));
    expect(h.phases).toEqual(['r-2-abcdef Starting', 'r-2-abcdef Starting']);
  });
});

describe('stepReassign: a source replica set that disappears after Draining', () => {
  test('the blocked reason names the set and what waits, in Starting and in Sealing', async () => {
    const start = harness(journalAt('Starting'), { away: ['rs-a'] });
    const started = await stepReassign(start.ctx, journalAt('Starting'));
    if (started.kind !== 'blocked') throw new Error(`expected blocked, got ${started.kind}`);
    expect(started.error.message).toBe(
      'replica set rs-a (source of partitions 0, 1) has no ready receiver; partitions 0, 1, drained to their stop offsets, cannot be released: they wait for the set to come back (its data is on its volumes) and are not consumed until then',
    );
    const seal = harness(journalAt('Sealing'), { away: ['rs-a'] });
    const sealed = await stepReassign(seal.ctx, journalAt('Sealing'));
    if (sealed.kind !== 'blocked') throw new Error(`expected blocked, got ${sealed.kind}`);
    expect(sealed.error.message).toBe(
      'replica set rs-a (source of partitions 0, 1) has no ready receiver; its segments of orders cannot be sealed and handed off: the reassign does not complete until the set is back (its data is on its volumes)',
    );
    expect(seal.object().status).toMatchObject({
      assignment: { 'rs-a': [0, 1] },
      epochs: { '0': 1, '1': 1 },
      reassign: { phase: 'Sealing' },
    });
  });

  test('the set away from Starting on, then back: released, started, sealed and handed off, then Done', async () => {
    const h = harness(journalAt('Starting'), { away: ['rs-a'] });
    const away = h.ctx.receivers;
    const all = new Map([
      ...away,
      [
        'rs-a',
        ['rs-a-0', 'rs-a-1'].map((name) => ({
          name,
          replicaSet: 'rs-a',
          baseUrl: `http://${name}`,
        })),
      ],
    ]);
    const kinds: string[] = [];
    const step = async (back: boolean): Promise<void> => {
      h.ctx.receivers = back ? all : away;
      h.ctx.object = h.object();
      const journal = h.object().status?.reassign;
      if (journal) kinds.push((await stepReassign(h.ctx, journal)).kind);
    };
    await step(false);
    await step(false);
    await step(true); // Starting
    await step(false); // Sealing, away again
    await step(true); // Sealing
    await step(true); // Done
    expect(kinds).toEqual(['blocked', 'blocked', 'advanced', 'blocked', 'advanced', 'completed']);
    expect(h.log).toEqual([
      ...released,
      ...committedChecked,
      ...assigned,
      'persist Sealing',
      'rs-a-0 seal 250ms',
      'rs-a-0 unassign',
      'rs-a-1 seal 250ms',
      'rs-a-1 unassign',
      'persist Done',
      'persist cleared',
    ]);
    expect(h.object().status).toEqual({
      assignment: { 'rs-b': [0, 1] },
      epochs: { '0': 2, '1': 2 },
      epochStarts: { '0': '105', '1': '200' },
    });
  });
});

describe('stepReassign: a source replica that lacks the cube', () => {
  test('its positions do not count: stop = the highest over the replicas that hold the cube', async () => {
    const h = harness(journalAt('Pausing'), { faults: { 'rs-a-0 pause': 404 } });
    await stepReassign(h.ctx, journalAt('Pausing'));
    expect(h.object().status?.reassign?.stopOffsets).toEqual({ '0': '105', '1': '190' });
  });

  test('told once per reassign and replica (Warning Event, onCubeMissing), whatever the phases and polls', async () => {
    const faults: Record<string, Fault> = {
      'rs-a-0 pause': 404,
      'rs-a-0 drain': 404,
      'rs-a-0 release': 404,
      'rs-a-1 drain': 'draining',
    };
    const h = harness(journalAt('Pausing'), { faults });
    const run = async (): Promise<StepOutcome['kind']> => {
      h.ctx.object = h.object();
      return (await stepReassign(h.ctx, h.object().status!.reassign!)).kind;
    };
    const kinds = [await run(), await run(), await run()];
    delete faults['rs-a-1 drain'];
    kinds.push(await run(), await run());
    expect(kinds).toEqual(['advanced', 'waiting', 'waiting', 'advanced', 'advanced']);
    expect(h.events).toEqual([
      'Warning CubeNotOnReceiver: receiver rs-a-0 (rs-a) does not hold the cube: it has no data of partitions 0, 1, so reassign r-2-abcdef goes on without it; the other replicas of rs-a carry the move',
    ]);
    expect(h.missing).toEqual(['r-2-abcdef rs-a-0']);
    expect(h.object().status?.reassign?.phase).toBe('Sealing');

    // Another reassign tells it again.
    const next = journalAt('Pausing', { id: 'r-3-fedcba' });
    await stepReassign(h.ctx, next);
    expect(h.missing).toEqual(['r-2-abcdef rs-a-0', 'r-3-fedcba rs-a-0']);
  });
});

describe('stepReassign: the abort signal', () => {
  test('aborted before the step: nothing is called, nothing written', async () => {
    const h = harness(journalAt('Pausing'));
    h.abort.abort(new Error('lost the lease'));
    await expect(stepReassign(h.ctx, journalAt('Pausing'))).rejects.toThrow('lost the lease');
    expect(h.log).toEqual([]);
  });

  test('aborted during a receiver call: the step stops there, with the abort and not as blocked', async () => {
    const h = harness(journalAt('Pausing'));
    const client = h.ctx.client;
    h.ctx.client = (e) => {
      const c = client(e);
      return {
        ...c,
        pause: (cube: string, partitions: number[], signal?: AbortSignal) => {
          h.abort.abort(new Error('shutting down'));
          return c.pause(cube, partitions, signal);
        },
      };
    };
    await expect(stepReassign(h.ctx, journalAt('Pausing'))).rejects.toThrow('shutting down');
    expect(h.log).toEqual(paused.slice(0, 1));
    expect(h.object().status?.reassign?.phase).toBe('Pausing');
  });
});

describe('stepReassign: fencing and Kafka errors', () => {
  test.each(['Pausing', 'Draining', 'Starting', 'Sealing'] as const)(
    'a receiver refusing the call as from a stale leader in %s: the step throws it, nothing is written or reported',
    async (phase) => {
      const method = { Pausing: 'pause', Draining: 'drain', Starting: 'release', Sealing: 'seal' }[
        phase
      ];
      const h = harness(journalAt(phase), { faults: { [`rs-a-0 ${method}`]: 'staleLeader' } });
      // Past the deadline, a blocked Pausing or Draining would roll back: a deposed leader must not.
      h.clock.ms += late;
      await expect(stepReassign(h.ctx, journalAt(phase))).rejects.toBeInstanceOf(StaleLeaderError);
      expect(h.log).toHaveLength(1);
      expect(h.log[0]).toMatch(new RegExp(`^rs-a-0 ${method}`));
      expect(h.events).toEqual([]);
      expect(h.object().status?.reassign?.phase).toBe(phase);
    },
  );

  test('Pausing, the brokers failing to give a new partition its starting offset: blocked as SourceUnavailable with the broker message, at the blocked pace', async () => {
    const j = journalAt('Pausing', { moves: [{ partition: 2, to: 'rs-b' }, ...moves] });
    const h = harness(j);
    h.ctx.startingOffsets = () =>
      Promise.reject(new Error('This server does not host this topic-partition'));
    const outcome = await stepReassign(h.ctx, j);
    if (outcome.kind !== 'blocked') throw new Error(`expected blocked, got ${outcome.kind}`);
    expect(outcome.error.reason).toBe('SourceUnavailable');
    expect(outcome.error.message).toBe(
      'cannot read the offsets of partition 2 of topic orders from brokers kafka:9092: This server does not host this topic-partition',
    );
    expect(outcome.requeueAfterMs).toBe(requeueDelayMs.blocked);
    expect(h.log).toEqual(paused);
  });

  test('Pausing, the brokers answering without a new partition: blocked, not started from offset 0', async () => {
    const j = journalAt('Pausing', { moves: [{ partition: 2, to: 'rs-b' }] });
    const h = harness(j);
    h.ctx.startingOffsets = () => Promise.resolve(new Map<number, bigint>());
    const outcome = await stepReassign(h.ctx, j);
    if (outcome.kind !== 'blocked') throw new Error(`expected blocked, got ${outcome.kind}`);
    expect(outcome.error.message).toMatch(/: no offsets reported for 2$/);
    expect(h.log).toEqual([]);
  });

  test('Pausing blocked by Kafka past the phase deadline rolls back: the sources resume', async () => {
    const j = journalAt('Pausing', { moves: [{ partition: 2, to: 'rs-b' }, ...moves] });
    const h = harness(j, { inPhaseMs: late });
    h.ctx.startingOffsets = () => Promise.reject(new Error('connect ECONNREFUSED'));
    const outcome = await stepReassign(h.ctx, j);
    expect(outcome.kind).toBe('rolledBack');
    expect(h.log).toEqual([...paused, ...resumed, 'persist cleared']);
  });
});

describe('failoverStart: where a failed-over partition restarts', () => {
  const r = (from: number, to: number) => ({ from: BigInt(from), to: BigInt(to) });
  test.each([
    {
      name: 'nothing committed: at the epoch start',
      start: 100,
      committed: [],
      restart: 100,
      over: [],
    },
    {
      name: 'committed from the start: at its end',
      start: 100,
      committed: [r(100, 180)],
      restart: 180,
      over: [],
    },
    {
      name: 'committed before the epoch only: at the epoch start',
      start: 100,
      committed: [r(0, 100)],
      restart: 100,
      over: [],
    },
    {
      name: 'a late window committed past the first gap: read over',
      start: 0,
      committed: [r(0, 80), r(90, 95), r(120, 130)],
      restart: 80,
      over: [r(90, 95), r(120, 130)],
    },
    {
      name: 'a gap right at the epoch start',
      start: 10,
      committed: [r(0, 5), r(20, 30)],
      restart: 10,
      over: [r(20, 30)],
    },
  ])('$name', ({ start, committed, restart, over }) => {
    const got = failoverStart(BigInt(start), committed);
    expect(got.restart).toBe(BigInt(restart));
    expect(got.readOver).toEqual(over);
  });
});

describe('stepReassign: a failover of a lost replica set', () => {
  const failoverJournal = (): ReassignJournal =>
    journalAt('Planned', { id: 'f-2-abcdef', failover: { replicaSets: ['rs-a'] } });

  test('Planned → Fencing → Starting → done: fenced through a target, restarted past what it committed, the lost set never called', async () => {
    const h = harness(failoverJournal(), { away: ['rs-a'] });
    // The lost set's pods are there, not Ready: nothing waits for them.
    h.ctx.notReady = new Map([['rs-a', ['rs-a-0', 'rs-a-1']]]);
    const kinds: string[] = [];
    for (let i = 0; i < 4 && h.object().status?.reassign; i++) {
      const j = h.object().status!.reassign!;
      const outcome = await stepReassign({ ...h.ctx, object: h.object() }, j);
      kinds.push(`${j.phase}: ${outcome.kind}`);
    }
    expect(kinds).toEqual(['Planned: advanced', 'Fencing: advanced', 'Starting: completed']);
    expect(h.log).toEqual([
      'persist Fencing',
      'rs-b-0 fence rs-a {"0":1,"1":1}',
      'persist Starting',
      'rs-b-0 assign 0@80/e2/w- skip [["90","95"]],1@0/e2/w-',
      'rs-b-1 assign 0@80/e2/w- skip [["90","95"]],1@0/e2/w-',
      'persist cleared',
    ]);
    expect(h.log.some((l) => l.startsWith('rs-a'))).toBe(false);
    const status = h.object().status!;
    expect(status.assignment).toEqual({ 'rs-b': [0, 1] });
    expect(status.epochs).toEqual({ '0': 2, '1': 2 });
    expect(status.epochStarts).toEqual({ '0': '80', '1': '0' });
    expect(h.events.map((e) => e.split(':')[0])).toEqual([
      'Warning FailoverStarted',
      'Normal FailoverCompleted',
    ]);
    expect(h.events[0]).toContain('restart from 0 at 80, 1 at 0');
    expect(h.events[0]).toContain('1 committed range past the restart read over');
  });

  test('the first target receiver unreachable: fenced through the next one', async () => {
    const h = harness(
      journalAt('Fencing', { id: 'f-2-abcdef', failover: { replicaSets: ['rs-a'] } }),
      {
        away: ['rs-a'],
        faults: { 'rs-b-0 fence': 'unreachable' },
      },
    );
    const outcome = await stepReassign(h.ctx, h.object().status!.reassign!);
    expect(outcome.kind).toBe('advanced');
    expect(h.log.filter((l) => l.includes('fence'))).toEqual([
      'rs-b-0 fence rs-a {"0":1,"1":1}',
      'rs-b-1 fence rs-a {"0":1,"1":1}',
    ]);
  });

  test('no target receiver answers: blocked as FenceFailed, nothing written', async () => {
    const h = harness(
      journalAt('Fencing', { id: 'f-2-abcdef', failover: { replicaSets: ['rs-a'] } }),
      {
        away: ['rs-a'],
        faults: { 'rs-b-0 fence': 'unreachable', 'rs-b-1 fence': 'unreachable' },
      },
    );
    const outcome = await stepReassign(h.ctx, h.object().status!.reassign!);
    expect(outcome.kind).toBe('blocked');
    if (outcome.kind === 'blocked') expect(outcome.error.reason).toBe('FenceFailed');
    expect(h.log.filter((l) => l.startsWith('persist'))).toEqual([]);
  });
});

describe('stepReassign: a source replica not Ready at Starting (the stop fence)', () => {
  test('its set is fenced from the stop offsets through a target, written to the journal, before any target starts; then the targets start there', async () => {
    const h = harness(journalAt('Starting'));
    h.ctx.notReady = new Map([['rs-a', ['rs-a-2']]]);
    const first = await stepReassign(h.ctx, h.object().status!.reassign!);
    expect(first.kind).toBe('waiting');
    expect(h.log).toEqual([
      'rs-a-0 release [0,1]',
      'rs-a-1 release [0,1]',
      'rs-b-0 fence rs-a {"0":1,"1":1} from {"0":"105","1":"200"}',
      'persist Starting',
    ]);
    expect(h.object().status?.reassign).toMatchObject({
      phase: 'Starting',
      stopOffsets: { '0': '105', '1': '200' },
      stopFence: { replicaSets: ['rs-a'] },
    });
    expect(h.events).toEqual([
      'Warning StopFenced: reassign r-2-abcdef: receiver rs-a-2 of rs-a is not Ready and missed the release of partitions 0, 1: rs-a is fenced in deep storage from 0 at 105, 1 at 200 under epoch 1, so what it reads past the stop offsets is never committed',
    ]);
    h.log.length = 0;
    const second = await stepReassign(
      { ...h.ctx, object: h.object() },
      h.object().status!.reassign!,
    );
    expect(second.kind).toBe('advanced');
    // Fenced once: the journal says so.
    expect(h.log.filter((l) => l.includes('fence'))).toEqual([]);
    expect(h.log.filter((l) => l.includes('assign'))).toEqual([
      'rs-b-0 assign 0@105/e2/w1500,1@200/e2/w2000',
      'rs-b-1 assign 0@105/e2/w1500,1@200/e2/w2000',
    ]);
  });

  test('what the set committed past a stop offset before the fence: the targets start past it and read over the rest', async () => {
    const h = harness(journalAt('Starting'));
    h.ctx.notReady = new Map([['rs-a', ['rs-a-2']]]);
    const client = h.ctx.client;
    h.ctx.client = (e) => {
      const c = client(e);
      return {
        ...c,
        fence: async (cube, request, signal) => ({
          ...(await c.fence(cube, request, signal)),
          committed: {
            '1': [
              ['150', '230'],
              ['240', '250'],
            ],
          },
        }),
      };
    };
    expect((await stepReassign(h.ctx, h.object().status!.reassign!)).kind).toBe('waiting');
    expect(h.object().status?.reassign).toMatchObject({
      stopOffsets: { '0': '105', '1': '230' },
      stopFence: { replicaSets: ['rs-a'], committedAbove: { '1': [{ from: '240', to: '250' }] } },
    });
    expect(h.events[0]).toContain(
      'it had committed past them already, so the targets start at 1 at 230',
    );
    h.log.length = 0;
    await stepReassign({ ...h.ctx, object: h.object() }, h.object().status!.reassign!);
    expect(h.log.filter((l) => l.includes('assign'))).toEqual([
      'rs-b-0 assign 0@105/e2/w1500,1@230/e2/w2000 skip [["240","250"]]',
      'rs-b-1 assign 0@105/e2/w1500,1@230/e2/w2000 skip [["240","250"]]',
    ]);
  });

  test('every source replica Ready, or a failover: no stop fence', async () => {
    const ready = harness(journalAt('Starting'));
    ready.ctx.notReady = new Map([['rs-b', ['rs-b-2']]]);
    expect((await stepReassign(ready.ctx, journalAt('Starting'))).kind).toBe('advanced');
    expect(ready.log.some((l) => l.includes('fence'))).toBe(false);
  });

  test('no target receiver to fence through: blocked, no target started', async () => {
    const h = harness(journalAt('Starting'), {
      faults: { 'rs-b-0 fence': 'unreachable', 'rs-b-1 fence': 'unreachable' },
    });
    h.ctx.notReady = new Map([['rs-a', ['rs-a-2']]]);
    const outcome = await stepReassign(h.ctx, h.object().status!.reassign!);
    expect(outcome.kind).toBe('blocked');
    if (outcome.kind === 'blocked') expect(outcome.error.reason).toBe('FenceFailed');
    expect(h.log.some((l) => l.includes('assign'))).toBe(false);
  });
});

describe("stepReassign: the targets start once the sources' data of the moved partitions is committed", () => {
  /** rs-a-1 reports partition 0 kept to 105, committed to `committedTo`. */
  const withCoverage = (h: Harness, committedTo: () => string): void => {
    const client = h.ctx.client;
    h.ctx.client = (e) => {
      const c = client(e);
      return {
        ...c,
        cubeStatus: async (cube, signal) => ({
          ...(await c.cubeStatus(cube, signal)),
          ...(e.name === 'rs-a-1'
            ? { coverage: { '0': { kept: [['0', '105']], handedOff: [['0', committedTo()]] } } }
            : {}),
        }),
      };
    };
  };

  test('not committed yet: the phase waits, no target started; once committed, they start', async () => {
    const h = harness(journalAt('Starting'));
    let committedTo = '80';
    withCoverage(h, () => committedTo);
    const waiting = await stepReassign(h.ctx, h.object().status!.reassign!);
    expect(waiting.kind).toBe('waiting');
    expect(waiting.requeueAfterMs).toBe(requeueDelayMs.commitPending);
    if (waiting.kind === 'waiting')
      expect(waiting.message).toBe(
        "the sources' data of the moved partitions is not committed yet on rs-a-1 (partition 0)",
      );
    expect(h.log).toEqual([...released, ...committedChecked]);
    committedTo = '105';
    h.log.length = 0;
    expect((await stepReassign(h.ctx, h.object().status!.reassign!)).kind).toBe('advanced');
    expect(h.log).toEqual([...released, ...committedChecked, ...assigned, 'persist Sealing']);
  });

  test('still not committed past the phase timeout: the targets start all the same, and the journal and a Warning say so', async () => {
    const h = harness(journalAt('Starting'), { inPhaseMs: phaseTimeoutMs + 1 });
    withCoverage(h, () => '80');
    expect((await stepReassign(h.ctx, h.object().status!.reassign!)).kind).toBe('waiting');
    expect(h.object().status?.reassign?.startedUncommitted).toBe(true);
    expect(h.events).toEqual([
      "Warning ReleasedDataUncommitted: reassign r-2-abcdef: the sources' data of the moved partitions is not committed yet on rs-a-1 (partition 0) after 60s (deep storage slow or refusing hand-offs?): the targets start all the same; should a source set be lost before that data is committed, its partitions wait for it instead of failing over",
    ]);
    h.log.length = 0;
    const started = await stepReassign(
      { ...h.ctx, object: h.object() },
      h.object().status!.reassign!,
    );
    expect(started.kind).toBe('advanced');
    expect(h.log).toEqual([...released, ...assigned, 'persist Sealing']);
  });
});

describe('stepReassign: a source replica set lost before its data of the moved partitions is committed', () => {
  test('fenced as a failover fences, its partitions restart from what it committed, not the stop offsets; Sealing does not wait for it', async () => {
    const h = harness(journalAt('Starting'), { away: ['rs-a'] });
    h.ctx.notReady = new Map([['rs-a', ['rs-a-0', 'rs-a-1']]]);
    h.ctx.lostReplicaSets = new Set(['rs-a']);
    const kinds: string[] = [];
    for (let i = 0; i < 6 && h.object().status?.reassign; i++) {
      const j = h.object().status!.reassign!;
      kinds.push(`${j.phase}: ${(await stepReassign({ ...h.ctx, object: h.object() }, j)).kind}`);
    }
    expect(kinds).toEqual([
      'Starting: waiting',
      'Starting: advanced',
      'Sealing: advanced',
      'Done: completed',
    ]);
    expect(h.log).toEqual([
      'rs-b-0 fence rs-a {"0":1,"1":1}',
      'persist Starting',
      'rs-b-0 assign 0@80/e2/w1500 skip [["90","95"]],1@0/e2/w2000',
      'rs-b-1 assign 0@80/e2/w1500 skip [["90","95"]],1@0/e2/w2000',
      'persist Sealing',
      'persist Done',
      'persist cleared',
    ]);
    expect(h.events[0]).toBe(
      'Warning ReplicaSetLostInMove: reassign r-2-abcdef: replica set rs-a has had no ready receiver for spec.failoverAfter (5m) and is fenced; source of partitions 0, 1, whose data of them was not all committed: they restart from 0 at 80, 1 at 0, the end of what it committed, instead of the stop offsets (0 at 105, 1 at 200)',
    );
    expect(h.object().status).toMatchObject({
      assignment: { 'rs-b': [0, 1] },
      epochs: { '0': 2, '1': 2 },
      epochStarts: { '0': '80', '1': '0' },
    });
    expect(h.object().status?.releasedUncommitted).toBeUndefined();
  });

  test('away, not lost yet: the phase waits for it, as before', async () => {
    const h = harness(journalAt('Starting'), { away: ['rs-a'] });
    const outcome = await stepReassign(h.ctx, h.object().status!.reassign!);
    expect(outcome.kind === 'blocked' && outcome.error.reason).toBe('SourceReplicaSetUnavailable');
    expect(h.log).toEqual([]);
  });

  test('lost after the targets started without its commit: the partitions wait for it, as before', async () => {
    const journal = journalAt('Starting', { startedUncommitted: true });
    const h = harness(journal, { away: ['rs-a'] });
    h.ctx.lostReplicaSets = new Set(['rs-a']);
    const outcome = await stepReassign(h.ctx, journal);
    expect(outcome.kind === 'blocked' && outcome.error.reason).toBe('SourceReplicaSetUnavailable');
    expect(h.log).toEqual([]);
  });
});

describe('stepReassign: a target replica set lost in Starting', () => {
  test('fenced from the stop offsets under the next epoch, and its moves go back to their live source, which takes them under the next epoch', async () => {
    const swap: ReassignJournal['moves'] = [
      { partition: 0, from: 'rs-a', to: 'rs-b' },
      { partition: 1, from: 'rs-b', to: 'rs-a' },
    ];
    const h = harness(journalAt('Starting', { moves: swap }), { away: ['rs-a'] });
    h.ctx.notReady = new Map([['rs-a', ['rs-a-0', 'rs-a-1']]]);
    h.ctx.lostReplicaSets = new Set(['rs-a']);
    expect((await stepReassign(h.ctx, h.object().status!.reassign!)).kind).toBe('waiting');
    expect(h.log).toEqual(['rs-b-0 fence rs-a {"0":1,"1":2} from {"1":"200"}', 'persist Starting']);
    expect(h.object().status?.reassign).toMatchObject({
      moves: [
        { partition: 0, from: 'rs-a', to: 'rs-b' },
        { partition: 1, from: 'rs-b', to: 'rs-b' },
      ],
      stopOffsets: { '0': '80', '1': '200' },
      lostSets: { replicaSets: ['rs-a'], committedAbove: { '0': [{ from: '90', to: '95' }] } },
    });
    expect(h.events).toEqual([
      'Warning ReplicaSetLostInMove: reassign r-2-abcdef: replica set rs-a has had no ready receiver for spec.failoverAfter (5m) and is fenced; source of partition 0, whose data of it was not all committed: it restarts from 0 at 80, the end of what it committed, instead of the stop offsets (0 at 105); target of partition 1: given instead to rs-b, from 1 at 200',
    ]);
    h.log.length = 0;
    const started = await stepReassign(
      { ...h.ctx, object: h.object() },
      h.object().status!.reassign!,
    );
    expect(started.kind).toBe('advanced');
    expect(h.log).toEqual([
      'rs-b-0 release [1]',
      'rs-b-1 release [1]',
      'rs-b-0 status',
      'rs-b-1 status',
      'rs-b-0 assign 0@80/e2/w1500 skip [["90","95"]],1@200/e2/w2000',
      'rs-b-1 assign 0@80/e2/w1500 skip [["90","95"]],1@200/e2/w2000',
      'persist Sealing',
    ]);
  });

  test('no live set to take its partitions: blocked, nothing written', async () => {
    const h = harness(journalAt('Starting', { moves: [{ partition: 1, to: 'rs-a' }] }), {
      away: ['rs-a', 'rs-b'],
    });
    h.ctx.lostReplicaSets = new Set(['rs-a']);
    const outcome = await stepReassign(h.ctx, h.object().status!.reassign!);
    expect(outcome.kind === 'blocked' && outcome.error.reason).toBe('TargetReceiverUnavailable');
    expect(h.log).toEqual([]);
  });
});
