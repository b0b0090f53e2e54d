// What a receiver reads from the API server to check an admin call against it: the
// CubeAssignment's spec.source (the Secrets an assign may name) and the leader Lease's
// leaseTransitions (the highest leader term any operator has had). Loaded on first use only.
import { ApiException, CoordinationV1Api } from '@kubernetes/client-node';
import type { AssignedSourceReader } from '../receiver/assigned-source.ts';
import type { LeaseTransitionsReader } from '../receiver/leader-term-bound.ts';
import { cubeApi } from './cube-api.ts';
import { loadKubeConfig } from './kube-config.ts';

/** undefined for a 404; any other API error with its code only (a Status body stays out). */
async function orUndefinedWhenMissing<T>(read: () => Promise<T>): Promise<T | undefined> {
  try {
    return await read();
  } catch (error) {
    if (error instanceof ApiException && error.code === 404) return undefined;
    if (error instanceof ApiException)
      throw new Error(`HTTP ${error.code} from the API server`, { cause: error });
    throw error;
  }
}

/** CubeAssignments' spec.source, with KUBECONFIG when it is set, else the pod's ServiceAccount. */
export function kubeAssignedSourceReader(): AssignedSourceReader {
  const cubes = cubeApi(loadKubeConfig(process.env.KUBECONFIG));
  return async ({ namespace, name }) => {
    const object = await orUndefinedWhenMissing(() => cubes.get(namespace, name));
    return object === undefined
      ? undefined
      : ((object.spec as { source?: unknown } | undefined)?.source ?? null);
  };
}

/** The Lease `namespace`/`name`'s leaseTransitions (0 when unset), or undefined when missing. */
export function kubeLeaseTransitionsReader(
  namespace: string,
  name: string,
): LeaseTransitionsReader {
  const api = loadKubeConfig(process.env.KUBECONFIG).makeApiClient(CoordinationV1Api);
  return async () => {
    const lease = await orUndefinedWhenMissing(() => api.readNamespacedLease({ namespace, name }));
    return lease === undefined ? undefined : (lease.spec?.leaseTransitions ?? 0);
  };
}
