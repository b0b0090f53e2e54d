// spec.approval: manual in a reconcile: the Events a decision (../approval.ts) is told by, each
// told once, and the approval annotation removed once the move it approved is journaled.
import { approveAnnotation, type ReassignJournal } from '../../api/cube-assignment.ts';
import { cubeKeyString, type CubeKey } from '../../protocol/cube-paths.ts';
import { proposedMessage, staleApprovalMessage, type ApprovalDecision } from '../approval.ts';
import type { CubeEdges, CubePass } from './pass.ts';

/**
 * What this process told of each cube's approvals: a stale approval is a Warning once per
 * (annotation, current proposal), not once per reconcile.
 */
export class ApprovalNotices {
  private readonly staleTold = new Map<string, string>();

  /** Records the decision's Events: a new proposal, and an approval naming another id. */
  tell(edges: CubeEdges, pass: CubePass, decision: ApprovalDecision): void {
    const { object } = pass;
    if (decision.kind === 'await' && decision.proposal.id !== object.status?.proposal?.id)
      edges.events.record(
        object,
        'Normal',
        'ReassignProposed',
        proposedMessage(decision.proposal, decision.replaced),
      );
    const key = cubeKeyString(pass.key);
    if (decision.kind === 'start' || decision.stale === undefined) {
      this.staleTold.delete(key);
      return;
    }
    const current = decision.kind === 'await' ? decision.proposal : undefined;
    const told = `${decision.stale}→${current?.id ?? ''}`;
    if (this.staleTold.get(key) === told) return;
    this.staleTold.set(key, told);
    pass.log.warn('approval names no current proposal', {
      approval: decision.stale,
      proposal: current?.id,
    });
    edges.events.record(
      object,
      'Warning',
      'ApprovalStale',
      staleApprovalMessage(decision.stale, current),
    );
  }

  forget(cube: CubeKey): void {
    this.staleTold.delete(cubeKeyString(cube));
  }
}

/**
 * The approval of the journal's move has been acted on: its annotation goes, so that it approves
 * nothing later. Run wherever the journal is (the process that wrote it may have died first);
 * a failed write is tried again on the next reconcile of the journal.
 */
export async function consumeApproval(
  edges: CubeEdges,
  pass: CubePass,
  journal: Pick<ReassignJournal, 'proposal'>,
): Promise<void> {
  const approval = pass.object.metadata?.annotations?.[approveAnnotation];
  if (journal.proposal === undefined || approval !== journal.proposal) return;
  try {
    pass.object = await edges.status.annotations(
      pass.object,
      { [approveAnnotation]: null },
      pass.signal,
    );
  } catch (error) {
    pass.signal.throwIfAborted();
    pass.log.info('cannot remove the approval annotation yet', {
      proposal: journal.proposal,
      error: (error as Error).message,
    });
  }
}
