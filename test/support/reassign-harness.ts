// stepReassign's test harness: a fake ReassignContext whose receivers record every call and fail
// where a scenario says, a persist that applies the merge patch to the object (the journal lives
// there), and a clock the test sets. The call lists below are what each phase asks of the
// receivers in the two-replica move of partitions 0 and 1 from rs-a to rs-b.
import {
  cubeAssignment,
  type CubeAssignment,
  type CubeAssignmentStatusPatch,
  type ReassignJournal,
  type ReassignPhase,
} from '../../src/api/cube-assignment.ts';
import {
  type AssignCubeRequest,
  type CubeStatus,
  type DrainRequest,
  type DrainResponse,
  type FenceRequest,
  type PartitionStatus,
  type SegmentStatus,
  cubeSummaryOf,
} from '../../src/protocol/admin-api.ts';
import { ReceiverApiError, StaleLeaderError } from '../../src/protocol/client.ts';
import type { ReceiverEndpoint } from '../../src/operator/discovery.ts';
import {
  PhaseEntries,
  type ReassignContext,
  type ReassignReceiver,
  type StepOutcome,
  stepReassign,
} from '../../src/operator/reassign/index.ts';
import { applyMergePatch, ordersCube } from './cube-assignments.ts';

/** When each journal's phase started, and the clock unless a scenario says otherwise. */
export const t0 = Date.parse('2026-11-30T10:00:00.000Z');
export const phaseTimeoutMs = 60_000;
export const drainTimeoutMs = 20_000;
export const handOffTimeoutMs = 30_000;
export const drainPollMs = 250;

export type Fault =
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

export interface Scenario {
  /** `<receiver> <method>` → what goes wrong there. */
  faults?: Record<string, Fault>;
  /** Replica sets whose pods are all away. */
  away?: string[];
  /** Time since the phase started. */
  inPhaseMs?: number;
}

/** Every receiver call and every status write, in the order they happened. */
export type Log = string[];

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
  /** A call on partitions that answers each in `state`. */
  const onPartitions =
    (call: string, state: PartitionStatus['state']) =>
    (_cube: string, partitions: number[], signal?: AbortSignal) =>
      answer(call, `[${partitions.join(',')}]`, signal, () => ({
        partitions: partitions.map((p) => partitionStatus(name, p, state)),
      }));
  return {
    pause: (_cube: string, partitions: number[], signal?: AbortSignal) =>
      answer('pause', `[${partitions.join(',')}]`, signal, (fault) => ({
        partitions: partitions.map((p) => {
          const status = partitionStatus(name, p, 'paused');
          const ahead = fault === 'ahead' ? 50n : 0n;
          return { ...status, position: String(BigInt(status.position) + ahead) };
        }),
      })),
    resume: onPartitions('resume', 'consuming'),
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
    release: onPartitions('release', 'released'),
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
    cubeSummary: (_cube: string, signal?: AbortSignal) =>
      answer('status', '', signal, () =>
        cubeSummaryOf({
          ...cubeStatus([]),
          partitions: [0, 1].map((p) => partitionStatus(name, p, 'paused')),
        }),
      ),
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

export const moves: ReassignJournal['moves'] = [
  { partition: 0, from: 'rs-a', to: 'rs-b' },
  { partition: 1, from: 'rs-a', to: 'rs-b' },
];

export function journalAt(
  phase: ReassignPhase,
  extra: Partial<ReassignJournal> = {},
): ReassignJournal {
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

export interface Harness {
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

/** One step of the journal as persisted, on the cube as persisted. */
export function stepPersisted(h: Harness): Promise<StepOutcome> {
  return stepReassign({ ...h.ctx, object: h.object() }, h.object().status!.reassign!);
}

export function harness(journal: ReassignJournal | undefined, scenario: Scenario = {}): Harness {
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

export const paused = ['rs-a-0 pause [0,1]', 'rs-a-1 pause [0,1]'];
export const drains = [
  'rs-a-0 drain {"0":"105","1":"200"} 250ms',
  'rs-a-1 drain {"0":"105","1":"200"} 250ms',
];
export const released = ['rs-a-0 release [0,1]', 'rs-a-1 release [0,1]'];
/** Before the targets start: the sources' data of the moved partitions is committed. */
export const committedChecked = ['rs-a-0 status', 'rs-a-1 status'];
export const assigned = [
  'rs-b-0 assign 0@105/e2/w1500,1@200/e2/w2000',
  'rs-b-1 assign 0@105/e2/w1500,1@200/e2/w2000',
];
/** Sealing: each source replica seals, its hand-off done, and drops the cube. */
export const sealedAndUnassigned = [
  'rs-a-0 seal 250ms',
  'rs-a-0 unassign',
  'rs-a-1 seal 250ms',
  'rs-a-1 unassign',
];
export const resumed = ['rs-a-0 resume [0,1]', 'rs-a-1 resume [0,1]'];
/** Starting to the end: the targets start, the sources seal and drop the cube, the journal goes. */
export const startedToCleared = [
  ...released,
  ...committedChecked,
  ...assigned,
  'persist Sealing',
  ...sealedAndUnassigned,
  'persist cleared',
];
/** Past the phase deadline. */
export const late = phaseTimeoutMs + 1;
