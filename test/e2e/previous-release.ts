// The release before this one, for the scenario's upgrade: its commit, and its sources out of git.
// No import of ./cluster.ts: local-node.ts builds the previous image before the cluster's settings
// exist.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const repositoryRoot = resolve(fileURLToPath(new URL('.', import.meta.url)), '..', '..');

/**
 * The release users installed before the CRD became a template: its chart has the CRD in crds/
 * (Helm installs it once and never upgrades it) and no TLS on the receivers' admin API. Where the
 * cluster has its image too (STREAMCUBE_E2E_PREVIOUS_IMAGE), the scenario installs that release
 * and upgrades it to this one, chart and image, as its users do.
 */
export const previousCommit = '3e84782bb592124d217d9ae647617119b2246bb2';

/** `paths` of the repository at `commit`, written out of git into a temporary directory. */
export function previousSources(
  paths: string[],
  commit: string = previousCommit,
): { dir: string; remove: () => void } {
  const dir = mkdtempSync(join(tmpdir(), 'streamcube-previous-'));
  const archive = spawnSync('git', ['-C', repositoryRoot, 'archive', commit, ...paths], {
    maxBuffer: 256 << 20,
  });
  if (archive.status !== 0)
    throw new Error(
      `git archive ${commit} failed: ${archive.stderr.toString()}; the e2e needs the repository's history (a full clone)`,
    );
  const untar = spawnSync('tar', ['-x', '-C', dir], { input: archive.stdout });
  if (untar.status !== 0) throw new Error(`tar -x of ${commit}: ${untar.stderr.toString()}`);
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}
