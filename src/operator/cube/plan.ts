// Planning a cube at rest: read the topic's partitions, decide which replica sets are lost or
// still handing partitions over, plan the assignment (planner.ts, pure) and, when partitions
// move, write the reassign journal; with spec.approval: manual, a move between live sets is a
// proposal until approved (approval.ts). A first placement starts at once; any other journal's
// phases run on the next reconciles, one each (journal-runner.ts).
import { randomBytes } from 'node:crypto';
import type {
  CubeAssignment,
  CubeAssignmentStatus,
  CubeAssignmentStatusPatch,
  ReassignJournal,
  ReassignProposal,
} from '../../api/cube-assignment.ts';
import { approveAnnotation } from '../../api/cube-assignment.ts';
import { sortedNames, type Move } from '../../assign/assignment.ts';
import { classifySourceError } from '../../kafka/source-security.ts';
import { faultPoint } from '../../observability/fault-injection.ts';
import { isStaleLeader } from '../../protocol/client.ts';
import { decideApproval, type ApprovalDecision } from '../approval.ts';
import { notReadyByReplicaSet } from '../discovery.ts';
import { planAssignment, type Problem } from '../planner.ts';
import {
  PhaseBlocked,
  describeMoves,
  isSourceless,
  moveFirstWrittenAt,
  newJournal,
  placementJournal,
  requeueDelayMs,
} from '../reassign/index.ts';
import type { ReconcileResult } from '../runtime/controller.ts';
import { applyMergePatch } from '../status-changes.ts';
import type { TopicMetadata } from '../topic-metadata.ts';
import { consumeApproval, type ApprovalNotices } from './approval.ts';
import type { FailoverWatch, UnavailableSets } from './failover-watch.ts';
import type { JournalRunner } from './journal-runner.ts';
import { availableReplicaSets, type CubeEdges, type CubePass } from './pass.ts';
import { conditionsWith } from './status-writer.ts';

/** A first placement's completion, to be written with the cube's first observation. */
export interface HeldCompletion {
  base: CubeAssignment;
  patch: CubeAssignmentStatusPatch;
}

export type PlanOutcome =
  /** A journal was written (and maybe run): the cube runs again after `result`. */
  | { kind: 'journaled'; result: ReconcileResult }
  /** Nothing to move, or a first placement done: observe the receivers and write status. */
  | {
      kind: 'observe';
      /** The topic's partitions; undefined when the brokers did not say. */
      partitions: number[] | undefined;
      problems: Problem[];
      unavailable: UnavailableSets;
      held?: HeldCompletion;
      /** spec.approval: manual, a move waiting for approval: status.proposal. */
      proposal?: ReassignProposal;
    };

export interface PlanOptions {
  topics: Pick<TopicMetadata, 'partitions'>;
  watch: FailoverWatch;
  journals: JournalRunner;
  approvals: ApprovalNotices;
}

export async function plan(
  edges: CubeEdges,
  pass: CubePass,
  options: PlanOptions,
  /** Written with the journal: the spec roll-out's digest (spec-rollout.ts). */
  digestPatch: CubeAssignmentStatusPatch,
): Promise<PlanOutcome> {
  const { object, signal } = pass;
  const { partitions, sourceProblem } = await topicPartitions(options.topics, pass);
  const available = availableReplicaSets(pass.receivers);
  const unavailable = options.watch.unavailableSets(object, available, pass.pods);
  const converging = await convergingReplicaSets(edges, pass, options.watch);
  const planned = planAssignment({
    strategy: object.spec.strategy,
    // Resolved from spec.pool when the cube names one (pool-sets.ts).
    replicaSets: object.spec.replicaSets ?? [],
    pins: object.spec.pins,
    current: object.status?.assignment,
    partitions,
    availableReplicaSets: available,
    lostReplicaSets: unavailable.lost,
    failoverAt: unavailable.failoverAt,
    convergingReplicaSets: converging,
  });
  for (const [rs, released] of unavailable.failoverBlocked)
    planned.problems.push({
      reason: 'FailoverBlocked',
      message: `replica set ${rs} has had no ready receiver pod for longer than spec.failoverAfter, but it holds data of partition${released.length > 1 ? 's' : ''} ${released.join(', ')} (moved away from it) that is not committed yet: a failover would lose it, so its partitions wait for it`,
    });
  if (sourceProblem) {
    const replacement = sourceProblem;
    planned.problems = planned.problems.map((p) =>
      p.reason === 'TopicNotFound' ? replacement : p,
    );
  }
  const observeNext = { kind: 'observe' as const, partitions, unavailable };
  const manual = object.spec.approval === 'manual';
  const approvalOf = (moves: Move[]): ApprovalDecision => {
    const decision = decideApproval({
      moves,
      generation: object.metadata?.generation ?? 0,
      current: object.status?.proposal,
      approval: object.metadata?.annotations?.[approveAnnotation],
      observed: object.status?.partitions,
      now: new Date(),
    });
    options.approvals.tell(edges, pass, decision);
    return decision;
  };
  if (planned.moves.length === 0 || planned.problems.some((p) => p.reason === 'TopicNotFound')) {
    if (manual) approvalOf([]);
    return { ...observeNext, problems: planned.problems };
  }

  // A failover moves the lost sets' partitions alone; any other move is planned after it.
  const failedOver = planned.moves.filter(
    (m) => m.from !== undefined && unavailable.lost.has(m.from),
  );
  // With manual approval, partitions without an owner are placed alone, at once: nobody reads
  // them meanwhile. A move between live sets waits for its proposal to be approved.
  const unowned = planned.moves.filter((m) => m.from === undefined);
  let moves = failedOver.length > 0 ? failedOver : planned.moves;
  let approved: ReassignProposal | undefined;
  if (manual && failedOver.length === 0) {
    if (unowned.length > 0) moves = unowned;
    else {
      const decision = approvalOf(planned.moves);
      if (decision.kind !== 'start')
        return {
          ...observeNext,
          problems: planned.problems,
          ...(decision.kind === 'await' ? { proposal: decision.proposal } : {}),
        };
      approved = decision.proposal;
    }
  }
  const failoverSets = sortedNames(failedOver.map((m) => m.from!));
  const journal: ReassignJournal = {
    ...newJournal(
      moves,
      new Date(),
      `${failedOver.length > 0 ? 'f' : 'r'}-${object.metadata?.generation ?? 0}-${randomBytes(3).toString('hex')}`,
    ),
    ...(failedOver.length > 0 ? { failover: { replicaSets: failoverSets } } : {}),
    ...(approved ? { proposal: approved.id } : {}),
  };
  // A first placement is written once, at Starting, with its starting offsets; should the
  // brokers not give them now, it is written at Planned and its steps report why. A move between
  // live sets is written at Pausing (journal.ts, moveFirstWrittenAt); a failover at Planned.
  const j = isSourceless(journal)
    ? await placementJournal(options.journals.context(pass), journal).catch((error: unknown) => {
        if (!(error instanceof PhaseBlocked)) throw error;
        return journal;
      })
    : journal.failover
      ? journal
      : { ...journal, phase: moveFirstWrittenAt };
  signal.throwIfAborted();
  pass.object = await edges.status.status(
    pass.object,
    {
      ...digestPatch,
      observedGeneration: pass.object.metadata?.generation,
      reassign: j,
      // Whatever waited for approval is planned again once this journal is done.
      ...(pass.object.status?.proposal ? { proposal: null } : {}),
      conditions: conditionsWith(pass.object, [
        {
          type: 'Progressing',
          status: 'True',
          reason: 'Reassigning',
          message: `moving ${describeMoves(j)}`,
        },
        edges.degraded.condition(pass.object, planned.problems),
      ]),
    },
    signal,
  );
  // A first placement's Event is its completion, which names every move; a failover's
  // FailoverStarted names its offsets once they are known, in Fencing.
  if (!isSourceless(j) && !j.failover)
    edges.events.record(
      pass.object,
      'Normal',
      'ReassignPlanned',
      `reassign ${j.id}: ${describeMoves(j)}${j.proposal ? ` (proposal ${j.proposal}, approved)` : ''}`,
    );
  if (j.proposal) {
    faultPoint('approval-journaled');
    await consumeApproval(edges, pass, j);
  }
  // A first placement written at Starting starts now, from the journal just written: a pass
  // through the queue per cube is what a thousand new cubes would otherwise wait on. Any other
  // journal's phases run on the next reconciles, one each.
  if (j.phase !== 'Starting')
    return { kind: 'journaled', result: { requeueAfterMs: requeueDelayMs.advanced } };
  // Its completion is written with the cube's first observation, made right after it: one
  // write, and the cube Ready as soon as it is placed. Only here, where the journal was just
  // written: a Starting run again (this write failed, or the process stopped) completes as
  // any journal does, written on its own.
  let held: HeldCompletion | undefined;
  const result = await options.journals.run(pass, j, {
    hold: (patch) => {
      held = { base: pass.object, patch };
      return {
        ...pass.object,
        status: applyMergePatch(pass.object.status, patch) as CubeAssignmentStatus,
      };
    },
  });
  if (!held) return { kind: 'journaled', result };
  return { ...observeNext, problems: planned.problems, held };
}

/**
 * The topic's partitions, or the reason they cannot be read. Not a missing topic: the brokers did
 * not answer (address, port, TLS, SASL, down). A refused password or an untrusted certificate
 * has its own reason: waiting will not help.
 */
async function topicPartitions(
  topics: Pick<TopicMetadata, 'partitions'>,
  pass: CubePass,
): Promise<{ partitions: number[] | undefined; sourceProblem?: Problem }> {
  const { source } = pass.object.spec;
  try {
    return { partitions: await topics.partitions(source, pass.key.namespace) };
  } catch (error) {
    const reason = classifySourceError(error) ?? 'SourceUnavailable';
    pass.log.warn('cannot read topic metadata', { error: (error as Error).message });
    return {
      partitions: undefined,
      sourceProblem: {
        reason,
        message: `cannot read the metadata of topic ${source.topic} from brokers ${source.brokers.join(', ')}: ${(error as Error).message}`,
      },
    };
  }
}

/**
 * Replica sets that own no partition of the cube while a ready replica of theirs still holds one
 * (not released): convergence hands those over before the set is given any (planner).
 */
async function convergingReplicaSets(
  edges: CubeEdges,
  pass: CubePass,
  watch: FailoverWatch,
): Promise<Set<string>> {
  const { object, receivers, signal, key } = pass;
  const notReady = notReadyByReplicaSet(pass.pods);
  const out = new Set<string>();
  const assignment = object.status?.assignment ?? {};
  for (const [rs, endpoints] of receivers) {
    if ((assignment[rs] ?? []).length > 0) continue;
    // A set failed over waits for every pod of it: one still coming back holds the fenced
    // epochs too, and a partition assigned over them would share segments with their data.
    const returning = watch.isFailedOver(key, rs);
    if (returning && (notReady.get(rs) ?? []).length > 0) {
      out.add(rs);
      continue;
    }
    for (const endpoint of endpoints) {
      const status = await edges.receivers
        .summary(endpoint, key, signal)
        .catch((error: unknown) => {
          signal.throwIfAborted();
          if (isStaleLeader(error)) throw error;
          return undefined;
        });
      if (status?.partitions.some((p) => p.state !== 'released')) out.add(rs);
    }
    if (returning && !out.has(rs)) watch.setBack(key, rs);
  }
  return out;
}
