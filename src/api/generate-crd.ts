// `npm run crds`: writes the CubeAssignment CRD generated from src/api to deploy/crds.
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { crdFile, cubeAssignmentCrdYaml } from './crd.ts';

const target = fileURLToPath(new URL(`../../${crdFile}`, import.meta.url));
writeFileSync(target, cubeAssignmentCrdYaml());
console.log(`wrote ${crdFile}`);
