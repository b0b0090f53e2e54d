// Where each cube's data lives on a receiver: `<data-dir>/cubes/<namespace>/<cube>`. Receivers
// before namespaces kept `<data-dir>/cubes/<cube>`; such a directory is moved into its namespace at
// start (the one its checkpoint names, else `default`), so that its data, positions and segments
// carry over. A move is two renames through `cubes/.moving-<cube>` (a cube named like its
// namespace would otherwise be moved into itself); a crash between them is finished at the next
// start. Namespaces and cube names are DNS labels, so neither starts with a dot.
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { type CubeKey, defaultCubeNamespace } from '../protocol/cube-paths.ts';
import { readCubeCheckpoint } from './cube-store.ts';
import { fsyncDirectory } from './durable-files.ts';

const movingPrefix = '.moving-';

export function cubesRoot(dataDir: string): string {
  return join(dataDir, 'cubes');
}

export function cubeDirectory(dataDir: string, key: CubeKey): string {
  return join(cubesRoot(dataDir), key.namespace, key.name);
}

/** A directory of the layout of before: a cube's own, with its checkpoint right inside. */
function isCubeOfBefore(dir: string): boolean {
  return existsSync(join(dir, 'checkpoint.json'));
}

export interface MovedCube {
  from: string;
  to: CubeKey;
}

export interface MigrationProblem {
  dir: string;
  error: string;
}

/**
 * Moves every cube directory of the layout of before into its namespace. A directory whose
 * checkpoint cannot be read, or whose place is taken, is left where it is and reported: nothing is
 * deleted or overwritten.
 */
export function migrateCubeDirectories(dataDir: string): {
  moved: MovedCube[];
  problems: MigrationProblem[];
} {
  const root = cubesRoot(dataDir);
  const moved: MovedCube[] = [];
  const problems: MigrationProblem[] = [];
  if (!existsSync(root)) return { moved, problems };
  for (const entry of readdirSync(root)) {
    const dir = join(root, entry);
    if (!statSync(dir).isDirectory()) continue;
    const name = entry.startsWith(movingPrefix) ? entry.slice(movingPrefix.length) : entry;
    if (!entry.startsWith(movingPrefix) && !isCubeOfBefore(dir)) continue;
    try {
      const namespace = readCubeCheckpoint(dir)?.namespace ?? defaultCubeNamespace;
      const to: CubeKey = { namespace, name };
      assertPlaceFree(dataDir, to);
      const moving = join(root, `${movingPrefix}${name}`);
      if (dir !== moving) {
        renameSync(dir, moving);
        fsyncDirectory(root);
      }
      moveInto(dataDir, moving, to);
      moved.push({ from: dir, to });
    } catch (error) {
      problems.push({ dir, error: (error as Error).message });
    }
  }
  return { moved, problems };
}

/**
 * Throws when `key`'s directory holds a checkpoint. One without holds nothing committed (a first
 * open cut short before its first checkpoint) and is replaced.
 */
export function assertPlaceFree(dataDir: string, key: CubeKey): void {
  const target = cubeDirectory(dataDir, key);
  if (existsSync(join(target, 'checkpoint.json')))
    throw new Error(`${target} exists already, with a checkpoint`);
}

/** Renames a cube's directory to its place under `key`, durably. */
function moveInto(dataDir: string, from: string, key: CubeKey): void {
  assertPlaceFree(dataDir, key);
  rmSync(cubeDirectory(dataDir, key), { recursive: true, force: true });
  const parent = join(cubesRoot(dataDir), key.namespace);
  if (mkdirSync(parent, { recursive: true }) !== undefined) fsyncDirectory(cubesRoot(dataDir));
  renameSync(from, cubeDirectory(dataDir, key));
  fsyncDirectory(parent);
  fsyncDirectory(cubesRoot(dataDir));
}

/** Moves a cube's directory to another key (a cube of before adopting the namespace named). */
export function moveCubeDirectory(dataDir: string, from: CubeKey, to: CubeKey): void {
  moveInto(dataDir, cubeDirectory(dataDir, from), to);
}

/** Every cube directory of the current layout. */
export function listCubeDirectories(dataDir: string): CubeKey[] {
  const root = cubesRoot(dataDir);
  if (!existsSync(root)) return [];
  const keys: CubeKey[] = [];
  for (const namespace of readdirSync(root)) {
    const dir = join(root, namespace);
    if (namespace.startsWith('.') || !statSync(dir).isDirectory()) continue;
    for (const name of readdirSync(dir)) {
      if (!name.startsWith('.') && statSync(join(dir, name)).isDirectory())
        keys.push({ namespace, name });
    }
  }
  return keys;
}
