// Every text the reassign protocol shows a person: the Events it records (reason and message
// together) and the messages of the conditions it reports (PhaseBlocked, a phase under way).
import type { ReassignJournal, ReassignPhase } from '../../api/cube-assignment.ts';
import type { PartitionStatus } from '../../protocol/admin-api.ts';
import type { ReceiverEndpoint } from '../discovery.ts';
import { PhaseBlocked } from './outcome.ts';

export interface ReassignEvent {
  type: 'Normal' | 'Warning';
  reason: string;
  message: string;
}

type Offsets = Record<string, string>;
type CommittedAbove = Record<string, { from: string; to: string }[]>;
type PastStop = Pick<PartitionStatus, 'partition' | 'position' | 'stopOffset'>;

/** The singular or the plural wording, by the number of items in `list`. */
const by =
  (list: readonly unknown[]) =>
  (one: string, many: string): string =>
    list.length > 1 ? many : one;

/** `partition 3` or `partitions 0, 1`. */
const partitionList = (partitions: readonly number[]): string =>
  `partition${by(partitions)('', 's')} ${partitions.join(', ')}`;

const seconds = (ms: number): string => `${ms / 1000}s`;

const receiverOf = (endpoint: ReceiverEndpoint): string =>
  `receiver ${endpoint.name} (${endpoint.replicaSet})`;

/** `3 (at 120, stop 105)`. */
const atAndStop = (p: PastStop): string =>
  `${p.partition} (at ${p.position}, stop ${p.stopOffset})`;

/** Offsets by partition, as Events name them: `0 at 105, 1 at 200`. */
export const describeOffsets = (offsets: Offsets): string =>
  Object.entries(offsets)
    .map(([p, o]) => `${p} at ${o}`)
    .join(', ');

export function describeMoves(journal: Pick<ReassignJournal, 'moves'>): string {
  return journal.moves.map((m) => `${m.partition} ${m.from ?? '(new)'}→${m.to}`).join(', ');
}

// ---- Receivers ---------------------------------------------------------------------------------

export const targetReceiverUnavailable = (replicaSet: string): PhaseBlocked =>
  new PhaseBlocked(
    'TargetReceiverUnavailable',
    `replica set ${replicaSet} (target of a move) has no ready receiver`,
  );

/** A source set with no Ready receiver: what waits for it depends on the phase. */
export function sourceReplicaSetUnavailable(
  cube: string,
  phase: ReassignPhase,
  replicaSet: string,
  partitions: number[],
  phaseTimeoutMs: number,
): PhaseBlocked {
  const n = by(partitions);
  const them = partitionList(partitions);
  const rollsBack = `rolls back after ${seconds(phaseTimeoutMs)} if it is not back`;
  const waits: Record<ReassignPhase, string> = {
    Planned: '',
    Pausing: `the reassign waits in Pausing and ${rollsBack}`,
    Draining: `the reassign waits in Draining and ${rollsBack}`,
    Fencing: '',
    Starting:
      `${them}, drained to ${n('its stop offset', 'their stop offsets')}, cannot be released: ` +
      `${n('it waits', 'they wait')} for the set to come back (its data is on its volumes) ` +
      `and ${n('is', 'are')} not consumed until then`,
    Sealing:
      `its segments of ${cube} cannot be sealed and handed off: the reassign does not ` +
      'complete until the set is back (its data is on its volumes)',
    Done: '',
  };
  return new PhaseBlocked(
    'SourceReplicaSetUnavailable',
    `replica set ${replicaSet} (source of ${them}) has no ready receiver; ${waits[phase]}`,
  );
}

/** A receiver call that failed; `detail` is the error as a person can act on it. */
export const receiverCallFailed = (
  what: string,
  endpoint: ReceiverEndpoint,
  detail: string,
): string => `${what} on ${receiverOf(endpoint)} failed: ${detail}`;

export const cubeNotOnReceiver = (
  journal: ReassignJournal,
  endpoint: ReceiverEndpoint,
  partitions: number[],
): ReassignEvent => ({
  type: 'Warning',
  reason: 'CubeNotOnReceiver',
  message:
    `${receiverOf(endpoint)} does not hold the cube: it has no data of ` +
    `${partitionList(partitions)}, so reassign ${journal.id} goes on without it; ` +
    `the other replicas of ${endpoint.replicaSet} carry the move`,
});

// ---- Kafka -------------------------------------------------------------------------------------

export const noOffsetsReported = (missing: number[]): string =>
  `no offsets reported for ${missing.join(', ')}`;

export const offsetsUnreadable = (
  partitions: number[],
  topic: string,
  brokers: string[],
  cause: string,
): string =>
  `cannot read the offsets of ${partitionList(partitions)} of topic ${topic} ` +
  `from brokers ${brokers.join(', ')}: ${cause}`;

// ---- Pausing and Sealing: replicas not Ready ---------------------------------------------------

const notReadyReceivers = (names: string[]): string =>
  `receiver${by(names)('', 's')} ${names.join(', ')}`;

export function waitsForNotReady(
  phase: ReassignPhase,
  names: string[],
  phaseTimeoutMs: number,
): string {
  const n = by(names);
  return (
    `${notReadyReceivers(names)} of the move's replica sets ${n('is', 'are')} not Ready: ` +
    `${phase} waits for ${n('it', 'them')}, up to ${seconds(phaseTimeoutMs)}`
  );
}

export function replicaMissedMove(
  journal: ReassignJournal,
  names: string[],
  phaseTimeoutMs: number,
): ReassignEvent {
  const n = by(names);
  return {
    type: 'Warning',
    reason: 'ReplicaMissedMove',
    message:
      `reassign ${journal.id} goes on in ${journal.phase} without ${notReadyReceivers(names)}, ` +
      `not Ready for ${seconds(phaseTimeoutMs)}: ${n('it is', 'they are')} brought to ` +
      `${n('its', 'their')} set's state when back, exactly if ${n('it', 'they')} missed no ` +
      'more than this move',
  };
}

// ---- Draining ----------------------------------------------------------------------------------

const notAtStops = (endpoint: ReceiverEndpoint): string =>
  `receiver ${endpoint.name} has not reached the stop offsets of partitions`;

export const drainBehind = (endpoint: ReceiverEndpoint, behind: PastStop[]): string =>
  `${notAtStops(endpoint)} ${behind.map(atAndStop).join(', ')}`;

/** Past the drain timeout; the Event leaves out the positions, which change with every poll. */
export const drainIncomplete = (endpoint: ReceiverEndpoint, behind: PastStop[]): PhaseBlocked =>
  new PhaseBlocked('DrainIncomplete', drainBehind(endpoint, behind), {
    event: `${notAtStops(endpoint)} ${behind.map((p) => p.partition).join(', ')}`,
  });

export const ranPastStops = (endpoint: ReceiverEndpoint): string =>
  `receiver ${endpoint.name} ran past the stop offsets: raised to its positions`;

export const stopsRaisedUnderWay = 'stop offsets raised';

export const drainUnderWay = 'a drain is under way';

export const stopOffsetsRaised = (
  journal: ReassignJournal,
  replicaSet: string,
  raised: Offsets,
): ReassignEvent => ({
  type: 'Normal',
  reason: 'StopOffsetsRaised',
  message:
    `reassign ${journal.id}: a replica of ${replicaSet} that missed the pause ran past the ` +
    `stop offsets; raised to ${describeOffsets(raised)}, every replica of ${replicaSet} ` +
    'drains on to them',
});

// ---- Starting: the sources' release ------------------------------------------------------------

export const missedDraining = (endpoint: ReceiverEndpoint, partitions: number[]): string =>
  `receiver ${endpoint.name} missed Draining: it consumes partitions ${partitions.join(', ')} ` +
  'to their stop offsets before it releases them';

export const replicaRepairedDrain = (
  endpoint: ReceiverEndpoint,
  drained: Offsets,
): ReassignEvent => ({
  type: 'Normal',
  reason: 'ReplicaRepaired',
  message:
    `${receiverOf(endpoint)} brought to its replica set's state: it missed Draining, ` +
    `drained ${describeOffsets(drained)} (the stop offsets) before its release`,
});

export function fencedMessage(
  endpoint: ReceiverEndpoint,
  fenced: { partition: number; position: string; stopOffset: string }[],
): string {
  return (
    `${receiverOf(endpoint)} had consumed past the stop offsets of partitions ` +
    `${fenced.map(atAndStop).join(', ')} under an epoch that is over: it released them there ` +
    'and dropped the segments holding the excess, which are never handed off'
  );
}

export const excessFenced = (
  endpoint: ReceiverEndpoint,
  fenced: { partition: number; position: string; stopOffset: string }[],
): ReassignEvent => ({
  type: 'Warning',
  reason: 'ExcessFenced',
  message: fencedMessage(endpoint, fenced),
});

// ---- Starting: the commit of the released data -------------------------------------------------

/** One source receiver and the partitions whose released data it has not committed yet. */
export const uncommittedOn = (endpoint: ReceiverEndpoint, partitions: number[]): string =>
  `${endpoint.name} (${partitionList(partitions)})`;

export const releasedDataUncommittedYet = (pending: string[]): string =>
  `the sources' data of the moved partitions is not committed yet on ${pending.join(', ')}`;

export const releasedDataUncommitted = (
  journal: ReassignJournal,
  message: string,
  phaseTimeoutMs: number,
): ReassignEvent => ({
  type: 'Warning',
  reason: 'ReleasedDataUncommitted',
  message:
    `reassign ${journal.id}: ${message} after ${seconds(phaseTimeoutMs)} ` +
    '(deep storage slow or refusing hand-offs?): the targets start all the same; should a ' +
    'source set be lost before that data is committed, its partitions wait for it instead ' +
    'of failing over',
});

// ---- Starting: the targets ---------------------------------------------------------------------

/** A target's failure, saying which partitions wait on it and which sources let them go. */
export function targetBlocked(
  error: PhaseBlocked,
  replicaSet: string,
  partitions: number[],
  sources: string[],
): PhaseBlocked {
  const releasedBy = sources.length > 0 ? ` (released by ${sources.join(', ')})` : '';
  const waits = by(partitions)('waits', 'wait');
  return new PhaseBlocked(
    error.reason,
    `${error.message}; ${partitionList(partitions)}${releasedBy} ${waits} for ${replicaSet}`,
    { cause: error.cause },
  );
}

// ---- Fences ------------------------------------------------------------------------------------

export const noFencer = (through: string[], fenced: string[], why: string): PhaseBlocked =>
  new PhaseBlocked(
    'TargetReceiverUnavailable',
    `no receiver of replica sets ${through.join(', ')} is ready to fence ` +
      `${fenced.join(', ')}, ${why}`,
  );

export function failoverStarted(
  journal: ReassignJournal,
  failoverAfter: string,
  starts: Offsets,
  reread: { offsets: bigint; known: boolean },
  above: CommittedAbove,
): ReassignEvent {
  const sets = journal.failover!.replicaSets;
  const n = by(sets);
  const { offsets, known } = reread;
  const rereadText =
    `${offsets} offset${offsets === 1n ? '' : 's'} re-read` +
    (known ? '' : ' (more where no position was reported)');
  const skipped = Object.values(above).reduce((count, list) => count + list.length, 0);
  const readOverText =
    skipped > 0
      ? `, ${skipped} committed range${skipped === 1 ? '' : 's'} past the restart read over`
      : '';
  return {
    type: 'Warning',
    reason: 'FailoverStarted',
    message:
      `failover ${journal.id}: replica set${n('', 's')} ${sets.join(', ')} had no ready ` +
      `receiver for spec.failoverAfter (${failoverAfter}) and ${n('is', 'are')} fenced; ` +
      `${describeMoves(journal)} restart from ${describeOffsets(starts)}, the end of what ` +
      `${n('it', 'they')} committed: ${rereadText}${readOverText}`,
  };
}

export function lostSetsHaveNoTaker(lost: string[], stranded: number[]): PhaseBlocked {
  const n = by(lost);
  return new PhaseBlocked(
    'TargetReceiverUnavailable',
    `replica set${n('', 's')} ${lost.join(', ')} of the move ${n('is', 'are')} lost and no ` +
      'replica set of spec.replicaSets has a ready receiver to take ' +
      `${partitionList(stranded)} instead`,
  );
}

/** A set lost in Starting: what it was the source and the target of, and where each goes. */
export function replicaSetLostInMove(
  journal: ReassignJournal,
  failoverAfter: string,
  replicaSet: string,
  asSource: { partitions: number[]; restarts: Offsets; stops: Offsets } | undefined,
  asTarget: { partitions: number[]; newTargets: string[]; restarts: Offsets } | undefined,
): ReassignEvent {
  const roles: string[] = [];
  if (asSource) {
    const n = by(asSource.partitions);
    roles.push(
      `source of ${partitionList(asSource.partitions)}, whose data of ${n('it', 'them')} was ` +
        `not all committed: ${n('it restarts', 'they restart')} from ` +
        `${describeOffsets(asSource.restarts)}, the end of what it committed, instead of the ` +
        `stop offsets (${describeOffsets(asSource.stops)})`,
    );
  }
  if (asTarget) {
    roles.push(
      `target of ${partitionList(asTarget.partitions)}: given instead to ` +
        `${asTarget.newTargets.join(', ')}, from ${describeOffsets(asTarget.restarts)}`,
    );
  }
  return {
    type: 'Warning',
    reason: 'ReplicaSetLostInMove',
    message:
      `reassign ${journal.id}: replica set ${replicaSet} has had no ready receiver for ` +
      `spec.failoverAfter (${failoverAfter}) and is fenced; ${roles.join('; ')}`,
  };
}

export const lostSetsFenced = (lost: string[]): string =>
  `replica sets ${lost.join(', ')} of the move lost: fenced, ` +
  'their partitions restart from what they committed';

export function stopFenced(
  journal: ReassignJournal,
  replicaSet: string,
  notReady: string[],
  partitions: number[],
  stops: Offsets,
  epochs: number[],
  startsPastStops: Offsets,
): ReassignEvent {
  const n = by(notReady);
  const startsPast =
    Object.keys(startsPastStops).length > 0
      ? '; it had committed past them already, so the targets start at ' +
        describeOffsets(startsPastStops)
      : '';
  return {
    type: 'Warning',
    reason: 'StopFenced',
    message:
      `reassign ${journal.id}: receiver${n('', 's')} ${notReady.join(', ')} of ${replicaSet} ` +
      `${n('is', 'are')} not Ready and missed the release of ${partitionList(partitions)}: ` +
      `${replicaSet} is fenced in deep storage from ${describeOffsets(stops)} ` +
      `under epoch${by(epochs)('', 's')} ${epochs.join(', ')}, so what ` +
      `${n('it reads', 'they read')} past the stop offsets is never committed${startsPast}`,
  };
}

export const sourcesStopFenced = (replicaSets: string[]): string =>
  `source replica sets ${replicaSets.join(', ')} fenced from the stop offsets`;

// ---- Sealing -----------------------------------------------------------------------------------

export const handOffPending = (endpoint: ReceiverEndpoint, cube: string): string =>
  `receiver ${endpoint.name} has segments of ${cube} not yet handed off`;

// ---- The journal's end -------------------------------------------------------------------------

export function failoverCompleted(journal: ReassignJournal): ReassignEvent {
  const sets = journal.failover!.replicaSets;
  return {
    type: 'Normal',
    reason: 'FailoverCompleted',
    message:
      `failover ${journal.id} of replica set${by(sets)('', 's')} ${sets.join(', ')} done: ` +
      `${describeMoves(journal)}, consumed from ${describeOffsets(journal.stopOffsets ?? {})}`,
  };
}

export const reassignCompleted = (journal: ReassignJournal): ReassignEvent => ({
  type: 'Normal',
  reason: 'ReassignCompleted',
  message:
    `reassign ${journal.id} moved ${journal.moves.length} partition(s): ` + describeMoves(journal),
});

export const reassignRolledBack = (
  journal: ReassignJournal,
  cause: PhaseBlocked,
  phaseTimeoutMs: number,
): { event: ReassignEvent; error: PhaseBlocked } => ({
  event: {
    type: 'Warning',
    reason: 'ReassignRolledBack',
    message:
      `reassign ${journal.id} rolled back in phase ${journal.phase} after ` +
      `${seconds(phaseTimeoutMs)}: ${cause.event ?? cause.message}`,
  },
  error: new PhaseBlocked(
    'ReassignRolledBack',
    `reassign ${journal.id} rolled back in ${journal.phase}: ${cause.message}`,
    { cause },
  ),
});
