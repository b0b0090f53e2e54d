// The CubeAssignment reconciler (reconciler.ts) and what its callers use of it.
export { createCubeReconciler, type ReconcilerDeps } from './reconciler.ts';
export { finalizer } from './finalizer.ts';
export { partitionsReleasedUncommitted, releasedUncommittedPatch } from './released-uncommitted.ts';
