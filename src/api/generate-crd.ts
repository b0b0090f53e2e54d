// `npm run crds`: writes the CRDs generated from src/api to deploy/crds (for kubectl) and as
// templates of the Helm chart (so `helm upgrade` updates them).
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import {
  crdFile,
  cubeAssignmentCrdHelmTemplate,
  cubeAssignmentCrdYaml,
  helmCrdFile,
} from './crd.ts';
import {
  poolCrdFile,
  poolHelmCrdFile,
  receiverPoolCrdHelmTemplate,
  receiverPoolCrdYaml,
} from './receiver-pool-crd.ts';

for (const [file, text] of [
  [crdFile, cubeAssignmentCrdYaml()],
  [helmCrdFile, cubeAssignmentCrdHelmTemplate()],
  [poolCrdFile, receiverPoolCrdYaml()],
  [poolHelmCrdFile, receiverPoolCrdHelmTemplate()],
] as const) {
  writeFileSync(fileURLToPath(new URL(`../../${file}`, import.meta.url)), text);
  console.log(`wrote ${file}`);
}
