// `npm run crds`: writes the CubeAssignment CRD generated from src/api to deploy/crds (for kubectl)
// and as a template of the Helm chart (so `helm upgrade` updates it).
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import {
  crdFile,
  cubeAssignmentCrdHelmTemplate,
  cubeAssignmentCrdYaml,
  helmCrdFile,
} from './crd.ts';

for (const [file, text] of [
  [crdFile, cubeAssignmentCrdYaml()],
  [helmCrdFile, cubeAssignmentCrdHelmTemplate()],
] as const) {
  writeFileSync(fileURLToPath(new URL(`../../${file}`, import.meta.url)), text);
  console.log(`wrote ${file}`);
}
