// The Kubernetes side of a local stack: the CRDs applied with kubectl, receiver processes made
// visible as Ready pods (no kubelet runs: their status is written directly), and the typed
// client for CubeAssignment objects (src/kubernetes/cube-api.ts).
import { execFile } from 'node:child_process';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { group, plural } from '../api/cube-assignment.ts';
import { crdFile } from '../api/crd.ts';
import { poolCrdFile, poolCrdName } from '../api/receiver-pool-crd.ts';
import { replicaSetLabel } from '../operator/discovery.ts';
import { binDir } from './controlplane.ts';
import { mergePatch } from '../kubernetes/cube-api.ts';

export { cubeApi } from '../kubernetes/cube-api.ts';

const repoRoot = resolve(import.meta.dirname, '../..');

/** Runs the environment's kubectl against the cluster of `kubeconfig`; resolves with stdout. */
export async function kubectlWith(kubeconfig: string, ...args: string[]): Promise<string> {
  const { stdout } = await promisify(execFile)(join(binDir(), 'kubectl'), args, {
    env: { ...process.env, KUBECONFIG: kubeconfig },
  });
  return stdout;
}

/** Applies the committed CRDs (CubeAssignment, ReceiverPool) and waits until the API server serves them. */
export async function applyCrdWith(kubeconfig: string): Promise<void> {
  const kubectl = (...args: string[]): Promise<string> => kubectlWith(kubeconfig, ...args);
  const files = [crdFile, poolCrdFile].flatMap((file) => ['-f', join(repoRoot, file)]);
  await kubectl('apply', '--server-side', '--force-conflicts', ...files);
  await kubectl(
    'wait',
    '--for=condition=Established',
    '--timeout=60s',
    `crd/${plural}.${group}`,
    `crd/${poolCrdName}`,
  );
}

/** A Pod object standing for a receiver process at `ip`, Ready or not. */
export async function receiverPod(
  kc: KubeConfig,
  namespace: string,
  name: string,
  replicaSet: string,
  ip: string,
  ready = true,
): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  await core.createNamespacedPod({
    namespace,
    body: {
      metadata: { name, labels: { [replicaSetLabel]: replicaSet } },
      spec: { containers: [{ name: 'receiver', image: 'streamcube:local' }] },
    },
  });
  await setPodReady(kc, namespace, name, ip, ready);
}

export async function setPodReady(
  kc: KubeConfig,
  namespace: string,
  name: string,
  ip: string,
  ready: boolean,
): Promise<void> {
  await kc.makeApiClient(CoreV1Api).patchNamespacedPodStatus(
    {
      name,
      namespace,
      body: {
        status: {
          phase: 'Running',
          podIP: ip,
          podIPs: [{ ip }],
          conditions: [
            { type: 'Ready', status: ready ? 'True' : 'False', lastTransitionTime: new Date() },
          ],
        },
      },
    },
    mergePatch,
  );
}
