// The ReceiverPool controller (reconciler.ts) and what the operator wires of it.
export { createPoolReconciler, type PoolReconcilerDeps } from './reconciler.ts';
export { createPoolInformers, eachPoolInformer, type PoolInformers } from './informers.ts';
export { SetWorkloads, fieldManager } from './workloads.ts';
export { activeSets, poolOf } from './set-names.ts';
export { createPoolMetrics } from './metrics.ts';
export { leadPools } from './lead.ts';
export { PoolAutoscaler } from './autoscaler.ts';
