// Runs a cube's reassign journal (status.reassign) one phase per reconcile (stepReassign in
// reassign.ts), and turns each outcome into metrics, log lines, Degraded and the requeue. Before
// each phase the failover wait is counted on, as at rest, so that a leader taking over mid-move
// waits out only the rest of it.
import type { ReassignJournal } from '../../api/cube-assignment.ts';
import { faultPoint } from '../../observability/fault-injection.ts';
import { notReadyByReplicaSet } from '../discovery.ts';
import { setPhase } from '../metrics.ts';
import {
  PhaseEntries,
  describeMoves,
  stepReassign,
  type PhaseBlocked,
  type ReassignContext,
} from '../reassign/index.ts';
import type { ReconcileResult } from '../runtime/controller.ts';
import { startingOffsetRules, type TopicMetadata } from '../topic-metadata.ts';
import { unavailableSincePatch } from '../unavailable-since.ts';
import {
  commitWaitMs,
  drainPollMs,
  handOffTimeoutMs,
  requeueAfterMs,
  sealPollMs,
} from './delays.ts';
import type { FailoverWatch } from './failover-watch.ts';
import { availableReplicaSets, type CubeEdges, type CubePass } from './pass.ts';
import { convergeReplicas } from './replica-repair.ts';
import { conditionsWith } from './status-writer.ts';

/** A first placement's completion, handed back to be written with the cube's first observation. */
export type HoldPlacementCompletion = NonNullable<ReassignContext['holdPlacementCompletion']>;

export interface JournalRunnerOptions {
  topics: Pick<TopicMetadata, 'startingOffsets' | 'resetOffsets'>;
  watch: FailoverWatch;
  phaseTimeoutMs: number;
  drainTimeoutMs: number;
}

export class JournalRunner {
  private readonly edges: CubeEdges;
  private readonly options: JournalRunnerOptions;
  /** Which phase of a reassign this process last started, per cube: announced once per entry. */
  private readonly entries = new PhaseEntries();

  constructor(edges: CubeEdges, options: JournalRunnerOptions) {
    this.edges = edges;
    this.options = options;
  }

  /**
   * The journal in status: the sets of the move unavailable past spec.failoverAfter are passed to
   * the phase (Starting fails over a source lost before the targets started, whether or not it
   * keeps released data), and status.unavailableSince is kept up to date as at rest.
   */
  async runInFlight(pass: CubePass, journal: ReassignJournal): Promise<ReconcileResult> {
    const unavailable = this.options.watch.unavailableSets(
      pass.object,
      availableReplicaSets(pass.receivers),
      pass.pods,
    );
    const lostInMove = new Set([...unavailable.lost, ...unavailable.failoverBlocked.keys()]);
    const patch = unavailableSincePatch(pass.object.status?.unavailableSince, unavailable.since);
    if (patch) {
      pass.signal.throwIfAborted();
      pass.object = await this.edges.status.status(
        pass.object,
        { unavailableSince: patch },
        pass.signal,
      );
    }
    return this.run(pass, journal, { lostInMove });
  }

  /** One phase of the journal. */
  async run(
    pass: CubePass,
    journal: ReassignJournal,
    options: { lostInMove?: ReadonlySet<string>; hold?: HoldPlacementCompletion } = {},
  ): Promise<ReconcileResult> {
    const { edges } = this;
    const { log, labels, key } = pass;
    // Past Starting, a replica that missed it (down, not Ready, restarted) is brought to the
    // moves' end state before Sealing goes on: a source's partitions handed over at the stop
    // offsets, a target's taken from them.
    if (journal.phase === 'Sealing') {
      const converged = await convergeReplicas(edges, pass, journal);
      for (const p of converged.problems)
        log.warn('replica not converged', { reassignId: journal.id, problem: p.message });
      // A source replica still draining to the stops it missed is not sealed under it.
      if (converged.pending) return { requeueAfterMs: requeueAfterMs.sealingAwaitsDrain };
    }
    const outcome = await stepReassign(this.context(pass, options), journal);
    pass.object = outcome.object;
    switch (outcome.kind) {
      case 'advanced':
        return { requeueAfterMs: outcome.requeueAfterMs };
      case 'waiting':
        log.debug('reassign waiting', {
          reassignId: journal.id,
          phase: journal.phase,
          detail: outcome.message,
        });
        return { requeueAfterMs: outcome.requeueAfterMs };
      case 'blocked':
        return this.reportBlocked(pass, journal, outcome.error, outcome.requeueAfterMs);
      case 'rolledBack':
        edges.metrics.reassignsTotal.inc({ ...labels, result: 'rolled_back' });
        setPhase(edges.metrics, labels, undefined);
        return this.reportBlocked(pass, journal, outcome.error, outcome.requeueAfterMs);
      case 'completed': {
        const { watch } = this.options;
        for (const rs of [
          ...(journal.failover?.replicaSets ?? []),
          ...(journal.lostSets?.replicaSets ?? []),
        ])
          watch.failedOverSet(key, rs);
        // The completion wrote what the sources left with partitions keep of the ones they
        // released (status.releasedUncommitted, releasedByMoves).
        for (const m of journal.moves)
          if (m.from !== undefined) watch.releasedUncommittedWritten(key, m.from);
        edges.metrics.reassignSeconds.observe(
          { namespace: key.namespace },
          (Date.now() - Date.parse(journal.startedAt)) / 1000,
        );
        edges.metrics.reassignsTotal.inc({ ...labels, result: 'completed' });
        setPhase(edges.metrics, labels, undefined);
        log.info('reassign done', { reassignId: journal.id, moves: describeMoves(journal) });
        // The crash tests' point past a journal's last phase (its completion written).
        faultPoint('reassign-completed');
        return { requeueAfterMs: outcome.requeueAfterMs };
      }
    }
  }

  /** What a phase works with: this pass's receivers, clients, status writes and Events. */
  context(
    pass: CubePass,
    options: { lostInMove?: ReadonlySet<string>; hold?: HoldPlacementCompletion } = {},
  ): ReassignContext {
    const { edges } = this;
    const { log, labels, key, signal } = pass;
    const object = pass.object;
    return {
      cube: key.name,
      object,
      receivers: pass.receivers,
      notReady: notReadyByReplicaSet(pass.pods),
      ...(options.lostInMove ? { lostReplicaSets: options.lostInMove } : {}),
      client: (endpoint) => edges.receivers.client(endpoint, key.namespace),
      startingOffsets: (ps: number[]) =>
        this.options.topics.startingOffsets(
          object.spec.source,
          startingOffsetRules(object.spec.source.startingOffsets, ps, object.status?.epochs),
          object.metadata?.namespace ?? 'default',
        ),
      highWatermarks: async (ps: number[]) => {
        const { offsets } = await this.options.topics.resetOffsets(
          object.spec.source,
          object.metadata?.namespace ?? 'default',
        );
        return new Map(ps.flatMap((p) => (offsets.has(p) ? [[p, offsets.get(p)!.high]] : [])));
      },
      persist: async (status) =>
        (pass.object = await edges.status.status(pass.object, status, signal)),
      event: (type, reason, message) => edges.events.record(pass.object, type, reason, message),
      onPhase: (phase, j) => {
        setPhase(edges.metrics, labels, phase);
        log.info('reassign phase', { reassignId: j.id, phase });
        faultPoint(`reassign-${phase}`);
      },
      onReplicaRepaired: (endpoint, repair) =>
        edges.metrics.replicaRepairs.inc({
          cube: key.name,
          replica_set: endpoint.replicaSet,
          repair,
        }),
      onCubeMissing: (endpoint, j) => {
        edges.metrics.replicaCubeMissing.inc({ cube: key.name, replica_set: endpoint.replicaSet });
        log.warn('source replica lacks the cube; the move goes on without it', {
          reassignId: j.id,
          receiver: endpoint.name,
          replicaSet: endpoint.replicaSet,
        });
      },
      entries: this.entries,
      phaseTimeoutMs: this.options.phaseTimeoutMs,
      drainTimeoutMs: this.options.drainTimeoutMs,
      handOffTimeoutMs,
      drainPollMs,
      sealPollMs,
      commitWaitMs,
      now: () => new Date(),
      signal,
      ...(options.hold ? { holdPlacementCompletion: options.hold } : {}),
    };
  }

  /** Degraded and Ready=False with the phase's cause; the step said when to come back. */
  private async reportBlocked(
    pass: CubePass,
    journal: ReassignJournal,
    error: PhaseBlocked,
    requeueAfterMs: number,
  ): Promise<ReconcileResult> {
    const { edges } = this;
    const { log, signal } = pass;
    log.warn('reassign blocked', {
      reassignId: journal.id,
      reason: error.reason,
      error: error.message,
    });
    // The last version this pass wrote or read; resourceVersions are opaque, so no comparison
    // with the cache decides which is newer. A 409 retries at the requeue.
    const base = pass.object;
    await edges.status
      .status(
        base,
        {
          conditions: conditionsWith(base, [
            edges.degraded.condition(base, [
              {
                reason: error.reason,
                message: error.message,
                ...(error.event === undefined ? {} : { event: error.event }),
              },
            ]),
            { type: 'Ready', status: 'False', reason: error.reason, message: error.message },
          ]),
        },
        signal,
      )
      .catch((e: unknown) => {
        signal.throwIfAborted();
        log.warn('cannot write Degraded', { error: (e as Error).message });
      });
    return { requeueAfterMs };
  }
}
