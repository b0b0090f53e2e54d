// `npm run crds`: writes the CubeAssignment CRD generated from src/api to deploy/crds and to the
// Helm chart's crds/ (Helm installs CRDs only from there).
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { crdFile, cubeAssignmentCrdYaml, helmCrdFile } from './crd.ts';

for (const file of [crdFile, helmCrdFile]) {
  writeFileSync(fileURLToPath(new URL(`../../${file}`, import.meta.url)), cubeAssignmentCrdYaml());
  console.log(`wrote ${file}`);
}
