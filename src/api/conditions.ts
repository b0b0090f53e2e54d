// Status conditions in metav1.Condition shape, and how the operator sets them: the transition
// time moves only when the status flips, so `kubectl describe` shows since when a cube is not Ready.
import { z } from 'zod';

/** metav1.Condition's reason: CamelCase, machine-readable, as the API server validates it. */
export const conditionReasonPattern = /^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$/;

/** metav1.Condition's type: an optional DNS-subdomain prefix, then a name such as `Ready`. */
export const conditionTypePattern =
  /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$/;

export const conditionStatuses = ['True', 'False', 'Unknown'] as const;
export type ConditionStatus = (typeof conditionStatuses)[number];

export const condition = z.object({
  type: z
    .string()
    .max(316)
    .regex(conditionTypePattern, 'must be a condition type such as Ready')
    .describe('The condition: Ready, Progressing or Degraded.'),
  status: z.enum(conditionStatuses).describe('True, False or Unknown.'),
  observedGeneration: z
    .int()
    .min(0)
    .optional()
    .describe(
      "The metadata.generation the condition was set at: below the object's, it may not reflect the latest spec yet.",
    ),
  lastTransitionTime: z.iso
    .datetime()
    .describe(
      'When status last changed; a new reason or message alone does not move it, so it says since when a cube is not Ready.',
    ),
  reason: z
    .string()
    .min(1)
    .max(1024)
    .regex(conditionReasonPattern, 'must be CamelCase, such as ReassignFailed')
    .describe(
      'Why, as a CamelCase word such as Consuming, Suspended, Reassigning or, for Degraded, the first problem found (SourceUnavailable, ReplicaSetLost, ...).',
    ),
  message: z
    .string()
    .max(32768)
    .describe('Details for a person, such as the replica sets, receivers or partitions concerned.'),
});
export type Condition = z.infer<typeof condition>;

export interface ConditionUpdate {
  type: string;
  status: ConditionStatus;
  reason: string;
  message: string;
  observedGeneration?: number;
}

/**
 * `conditions` with `update` applied, as a new array (cached objects are shared, never mutated).
 * `lastTransitionTime` becomes `now` only for a new condition or a flipped status; reason,
 * message and observedGeneration always take the new values. Order is kept; new types go last.
 */
export function setCondition(
  conditions: readonly Condition[] | undefined,
  update: ConditionUpdate,
  now: Date,
): Condition[] {
  if (!conditionTypePattern.test(update.type) || update.type.length > 316) {
    throw new Error(`condition type '${update.type}' is not a valid metav1.Condition type`);
  }
  if (!conditionReasonPattern.test(update.reason) || update.reason.length > 1024) {
    throw new Error(
      `condition ${update.type}: reason '${update.reason}' must be CamelCase (${conditionReasonPattern.source})`,
    );
  }
  const list = conditions ?? [];
  const previous = list.find((c) => c.type === update.type);
  const next: Condition = {
    type: update.type,
    status: update.status,
    ...(update.observedGeneration !== undefined && {
      observedGeneration: update.observedGeneration,
    }),
    lastTransitionTime:
      previous !== undefined && previous.status === update.status
        ? previous.lastTransitionTime
        : kubernetesTime(now),
    reason: update.reason,
    message: update.message,
  };
  return previous === undefined
    ? [...list, next]
    : list.map((c) => (c.type === update.type ? next : c));
}

export function getCondition(
  conditions: readonly Condition[] | undefined,
  type: string,
): Condition | undefined {
  return conditions?.find((c) => c.type === type);
}

export function isConditionTrue(
  conditions: readonly Condition[] | undefined,
  type: string,
): boolean {
  return getCondition(conditions, type)?.status === 'True';
}

/** RFC 3339 at second precision, as metav1.Time serializes. */
function kubernetesTime(now: Date): string {
  return now.toISOString().replace(/\.\d{3}Z$/, 'Z');
}
