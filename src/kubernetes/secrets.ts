// Reading the Secrets a cube's source names, for the operator and the receivers alike.
import { ApiException, CoreV1Api } from '@kubernetes/client-node';
import { loadKubeConfig } from './kube-config.ts';
import { type SecretReader, decodeSecretData } from '../kafka/source-security.ts';

/** A SecretReader over `api`: undefined for a Secret that does not exist. */
export function secretReaderOf(api: Pick<CoreV1Api, 'readNamespacedSecret'>): SecretReader {
  return async (namespace, name) => {
    try {
      const secret = await api.readNamespacedSecret({ namespace, name });
      return decodeSecretData(secret.data);
    } catch (error) {
      if (error instanceof ApiException && error.code === 404) return undefined;
      // An error's body is a Status (never the Secret's data); the message keeps the code only.
      if (error instanceof ApiException)
        throw new Error(`cannot read Secret ${namespace}/${name}: HTTP ${error.code}`, {
          cause: error,
        });
      throw error;
    }
  };
}

/** A SecretReader with KUBECONFIG when it is set, else the pod's ServiceAccount. */
export function kubeSecretReader(): SecretReader {
  return secretReaderOf(loadKubeConfig(process.env.KUBECONFIG).makeApiClient(CoreV1Api));
}
