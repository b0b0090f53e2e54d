// Storage for the one-node cluster: a default StorageClass without a provisioner and a pool of
// hostPath PersistentVolumes under the node's directory, so that the chart's receiver
// volumeClaimTemplates (ReadWriteOnce) and its deep-storage claim (ReadWriteMany) bind.
import { chmodSync, mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { runCommand } from '../processes.ts';

export const storageClassName = 'local-hostpath';
const volumeCount = 12;

/** The StorageClass and PersistentVolumes, as one YAML stream for `kubectl apply`. */
export function localStorageManifest(volumesDir: string): string {
  const storageClass = `apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: ${storageClassName}
  annotations:
    storageclass.kubernetes.io/is-default-class: "true"
provisioner: kubernetes.io/no-provisioner
reclaimPolicy: Retain
volumeBindingMode: Immediate
`;
  const volumes = Array.from(
    { length: volumeCount },
    (_, i) => `apiVersion: v1
kind: PersistentVolume
metadata:
  name: local-${String(i).padStart(2, '0')}
spec:
  storageClassName: ${storageClassName}
  capacity: { storage: 100Gi }
  accessModes: [ReadWriteOnce, ReadWriteMany]
  persistentVolumeReclaimPolicy: Retain
  hostPath: { path: ${join(volumesDir, `local-${String(i).padStart(2, '0')}`)}, type: Directory }
`,
  );
  return [storageClass, ...volumes].join('---\n');
}

export async function createLocalStorage(
  kubeconfig: string,
  kubectl: string,
  volumesDir: string,
): Promise<void> {
  for (let i = 0; i < volumeCount; i += 1) {
    const dir = join(volumesDir, `local-${String(i).padStart(2, '0')}`);
    mkdirSync(dir, { recursive: true });
    // hostPath volumes get no fsGroup ownership: let the pods' non-root users write.
    chmodSync(dir, 0o777);
  }
  await runCommand(kubectl, ['--kubeconfig', kubeconfig, 'apply', '-f', '-'], {
    input: localStorageManifest(volumesDir),
  });
}

/**
 * Makes the volumes of deleted claims (Released: Retain keeps them bound to the old claim)
 * Available again, emptied, as a provisioner would: for runs after the first on a long-lived node.
 */
export async function recycleReleasedVolumes(kubeconfig: string, kubectl: string): Promise<void> {
  const list = JSON.parse(
    await runCommand(kubectl, ['--kubeconfig', kubeconfig, 'get', 'pv', '-o', 'json']),
  ) as {
    items: {
      metadata: { name: string };
      spec: { storageClassName?: string; hostPath?: { path: string } };
      status?: { phase?: string };
    }[];
  };
  for (const pv of list.items) {
    const path = pv.spec.hostPath?.path;
    if (pv.spec.storageClassName !== storageClassName || pv.status?.phase !== 'Released' || !path)
      continue;
    rmSync(path, { recursive: true, force: true });
    mkdirSync(path, { recursive: true });
    chmodSync(path, 0o777);
    await runCommand(kubectl, [
      '--kubeconfig',
      kubeconfig,
      'patch',
      'pv',
      pv.metadata.name,
      '--type=json',
      '-p=[{"op":"remove","path":"/spec/claimRef"}]',
    ]);
  }
}
