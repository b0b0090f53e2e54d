// spec.autoscale and status.autoscale of a ReceiverPool (receiver-pool.ts): the bounds, target,
// waits and cooldown of the lag-driven autoscaler (src/operator/pool/autoscaler.ts), and what it
// last saw and decided. zod definitions, the source of the types and of the CRD's schema.
import { z } from 'zod';
import { kubernetesDuration, kubernetesDurationPattern, timestamp } from './cube-assignment.ts';
import { kubernetes } from './structural-schema.ts';

/** Sets a pool may have (receiver-pool.ts's maxSets). */
export const poolSetsLimit = 100;
const maxSets = poolSetsLimit;

const durationGuard = (field: string): string =>
  `self.${field}.matches('${kubernetesDurationPattern}')`;

/** The autoscaler's defaults (also what the unit tests and docs state). */
export const autoscaleDefaults = {
  minSets: 1,
  scaleInBelowPercent: 50,
  scaleOutAfter: '1m',
  scaleInAfter: '5m',
  cooldown: '3m',
} as const;

export const poolAutoscale = z
  .object({
    minSets: z
      .int()
      .min(1)
      .max(maxSets)
      .default(autoscaleDefaults.minSets)
      .describe(
        'The fewest sets the autoscaler keeps, 1 to 100 (at most maxSets). Default 1. A spec.sets below it (kubectl scale) is raised to it at once (Warning Event SetsClamped).',
      ),
    maxSets: z
      .int()
      .min(1)
      .max(maxSets)
      .describe(
        'The most sets the autoscaler makes, 1 to 100 (at least minSets). A spec.sets above it (kubectl scale) is lowered to it at once (Warning Event SetsClamped), through the Draining path.',
      ),
    targetLagPerSet: z
      .int()
      .min(1)
      .max(1_000_000_000_000)
      .describe(
        "Events behind per set the pool aims at: the events behind of every partition the pool's sets own (the brokers' high watermark read by the operator, minus the position the cube's status last recorded, at most one --resync old), summed over the cubes that name the pool (spec.pool) or list its sets, divided by spec.sets. Above it for scaleOutAfter: scale out.",
      ),
    scaleInBelowPercent: z
      .int()
      .min(1)
      .max(90)
      .default(autoscaleDefaults.scaleInBelowPercent)
      .describe(
        'Scale in only while the events behind divided by one set fewer stay below this percent of targetLagPerSet (1 to 90) for scaleInAfter, so that a load at the target never makes the pool flap. Default 50.',
      ),
    scaleOutAfter: kubernetesDuration
      .default(autoscaleDefaults.scaleOutAfter)
      .describe(
        'How long the events behind per set must stay above targetLagPerSet, every time the operator looks (each --resync), before a scale-out. A duration in ms, s, m or h. Default 1m.',
      ),
    scaleInAfter: kubernetesDuration
      .default(autoscaleDefaults.scaleInAfter)
      .describe(
        'How long the pool must stay comfortably below the target (see scaleInBelowPercent), with the figures of every cube known, before a scale-in. A duration in ms, s, m or h. Default 5m.',
      ),
    cooldown: kubernetesDuration
      .default(autoscaleDefaults.cooldown)
      .describe(
        "After any change of spec.sets (the autoscaler's or another writer's), how long the autoscaler makes no other change. A duration in ms, s, m or h. Default 3m.",
      ),
  })
  .refine((a) => a.minSets <= a.maxSets, {
    message: 'spec.autoscale.minSets must be at most spec.autoscale.maxSets',
    path: ['minSets'],
  })
  .describe(
    'Lag-driven autoscaling: the operator writes spec.sets (through the scale subresource, under its field manager) between minSets and maxSets from the events behind per set. Absent: spec.sets is only what users write. Each change is an Event (ScaledOut, ScaledIn) with the figures that decided it; status.autoscale has the last figures and decision. Scale-in goes through the Draining path and loses no data.',
  )
  .meta(
    kubernetes({
      validations: [
        {
          rule: '!has(self.minSets) || self.minSets <= self.maxSets',
          message: 'spec.autoscale.minSets must be at most spec.autoscale.maxSets',
          fieldPath: '.minSets',
        },
        ...(['scaleOutAfter', 'scaleInAfter'] as const).map((field) => ({
          rule: `!has(self.${field}) || !${durationGuard(field)} || duration(self.${field}) > duration('0s')`,
          message: `spec.autoscale.${field} must be above 0s`,
          fieldPath: `.${field}`,
        })),
      ],
    }),
  );
export type PoolAutoscale = z.infer<typeof poolAutoscale>;

export const autoscaleActions = ['ScaleOut', 'ScaleIn', 'Clamp', 'Hold'] as const;
export type AutoscaleAction = (typeof autoscaleActions)[number];

export const poolAutoscaleStatus = z
  .object({
    desiredSets: z
      .int()
      .min(0)
      .max(maxSets)
      .describe('The sets the autoscaler wants now: spec.sets, or what it is writing there.'),
    totalLag: z
      .int()
      .min(0)
      .describe(
        "Events behind summed over the partitions the pool's sets own, of the cubes whose figures are known, when last written.",
      ),
    lagPerSet: z.int().min(0).describe('totalLag divided by spec.sets (rounded up).'),
    targetLagPerSet: z.int().min(1).describe('spec.autoscale.targetLagPerSet.'),
    cubes: z.int().min(0).describe('Cubes counted: they name the pool or list one of its sets.'),
    unknown: z
      .array(z.string().max(512))
      .max(16)
      .optional()
      .describe(
        'Cubes whose figures are not known (suspended, no position recorded for a partition, brokers not answering), with why; their lag is not in totalLag, and while any is listed the pool does not scale in.',
      ),
    aboveTargetSince: timestamp
      .optional()
      .describe('Since when every look found lagPerSet above the target (at this size).'),
    belowThresholdSince: timestamp
      .optional()
      .describe(
        'Since when every look found the pool comfortably below the target (at this size, every figure known).',
      ),
    observedTime: timestamp.describe('When these figures were read.'),
    lastScaleTime: timestamp
      .optional()
      .describe(
        'When spec.sets last changed, by the autoscaler or another writer: the cooldown starts there.',
      ),
    lastScale: z
      .object({
        action: z
          .enum(['ScaleOut', 'ScaleIn', 'Clamp'])
          .describe('ScaleOut, ScaleIn or Clamp (spec.sets was outside minSets to maxSets).'),
        fromSets: z.int().min(0).max(maxSets).describe('spec.sets before.'),
        toSets: z.int().min(0).max(maxSets).describe('spec.sets written.'),
        message: z.string().max(1024).describe("The figures that decided it, as its Event's."),
        time: timestamp.describe('When it was written.'),
      })
      .optional()
      .describe("The autoscaler's last change of spec.sets, kept until the next one."),
    lastDecision: z
      .object({
        action: z
          .enum(autoscaleActions)
          .describe('ScaleOut, ScaleIn, Clamp (spec.sets was outside minSets to maxSets) or Hold.'),
        reason: z.string().max(64).describe('A CamelCase reason: AboveTarget, Cooldown, ...'),
        message: z.string().max(1024).describe('The figures that decided it.'),
        time: timestamp.describe('When it was decided.'),
      })
      .describe('The decision of the last look written (Hold included).'),
  })
  .describe(
    'What the autoscaler last saw and decided; written when its decision, the desired sets or the since times change, or the events behind per set change by an order of magnitude (streamcube_pool_autoscale_* metrics have live figures). Absent without spec.autoscale.',
  );
export type PoolAutoscaleStatus = z.infer<typeof poolAutoscaleStatus>;
