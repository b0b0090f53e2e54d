// What one reconcile of one cube works on (a pass), and the edges every branch reaches the world
// through. A branch that writes status replaces `pass.object` with what it wrote, so the next
// write carries the resourceVersion of the last one.
import type { V1Pod } from '@kubernetes/client-node';
import type { CubeAssignment } from '../../api/cube-assignment.ts';
import type { CubeKey } from '../../protocol/cube-paths.ts';
import type { Logger } from '../../observability/logger.ts';
import type { ReceiverEndpoint } from '../discovery.ts';
import type { EventRecorder } from '../events.ts';
import type { CubeLabels, OperatorMetrics } from '../metrics.ts';
import type { Problem } from '../planner.ts';
import type { DegradedConditions } from './degraded-condition.ts';
import type { ReceiverAccess } from './receiver-access.ts';
import type { StatusWriter } from './status-writer.ts';

export interface CubePass {
  key: CubeKey;
  /** The cube as this pass last read or wrote it. */
  object: CubeAssignment;
  pods: V1Pod[];
  /** Ready receivers by replica set (discovery.ts). */
  receivers: Map<string, ReceiverEndpoint[]>;
  labels: CubeLabels;
  log: Logger;
  /** Aborts when the lease is lost or the process shuts down: no receiver call starts after. */
  signal: AbortSignal;
  /** Problems found before the pass ran (a spec.pool that does not exist), for Degraded. */
  problems?: Problem[];
}

export interface CubeEdges {
  receivers: ReceiverAccess;
  status: StatusWriter;
  degraded: DegradedConditions;
  events: Pick<EventRecorder, 'record'>;
  metrics: OperatorMetrics;
  logger: Logger;
}

/** Replica sets with at least one ready receiver. */
export function availableReplicaSets(receivers: Map<string, ReceiverEndpoint[]>): Set<string> {
  return new Set([...receivers].filter(([, list]) => list.length > 0).map(([rs]) => rs));
}
