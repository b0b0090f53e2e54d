// Fencing of deposed operators: per cube (namespace and name), the highest leader term a mutating
// admin call carried, kept in <dataDir>/leader-terms/<namespace>/<cube>.json. It outlives the
// cube's data (an unassign keeps it), so a partition moved away and back cannot be touched by the
// operator that led before. Receivers before namespaces kept <dataDir>/leader-terms/<cube>.json:
// a cube without its own file starts from that one. Terms come from one Lease for every cube, so
// a term seen for a cube of that name in any namespace is a floor no current leader is below.
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { type CubeKey, cubeKeyString } from '../protocol/cube-paths.ts';
import { ChannelError } from './channel-error.ts';
import { fsyncDirectory, writeFileDurably } from './durable-files.ts';

export interface LeaderTermsOptions {
  dataDir: string;
  /** Called for each refused call, with its cube. */
  onStale?: (cube: CubeKey) => void;
  /** Called when a cube's highest term is set (at first read and on every rise). */
  onTerm?: (cube: CubeKey, term: number) => void;
}

export class LeaderTerms {
  private readonly dir: string;
  private readonly highest = new Map<string, number>();
  private readonly options: LeaderTermsOptions;

  constructor(options: LeaderTermsOptions) {
    this.options = options;
    this.dir = join(options.dataDir, 'leader-terms');
  }

  /** The highest term seen for `cube` (0 when none was). */
  highestFor(cube: CubeKey): number {
    let term = this.highest.get(cubeKeyString(cube));
    if (term === undefined) {
      term = this.read(this.file(cube)) ?? this.read(join(this.dir, `${cube.name}.json`)) ?? 0;
      this.highest.set(cubeKeyString(cube), term);
      this.options.onTerm?.(cube, term);
    }
    return term;
  }

  /** The term a file holds, or undefined when there is no such file. */
  private read(file: string): number | undefined {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
    const term = (JSON.parse(text) as { term?: unknown }).term;
    if (typeof term !== 'number' || !Number.isSafeInteger(term) || term < 0) {
      throw new Error(`${file} holds no leader term`);
    }
    return term;
  }

  private file(cube: CubeKey): string {
    return join(this.dir, cube.namespace, `${cube.name}.json`);
  }

  /**
   * Throws ChannelError('StaleLeader') when a term higher than `term` was seen for `cube`, and
   * raises nothing; returns the highest term seen.
   */
  check(cube: CubeKey, term: number): number {
    const highest = this.highestFor(cube);
    if (term < highest) {
      this.options.onStale?.(cube);
      throw new ChannelError(
        'StaleLeader',
        `cube ${cubeKeyString(cube)} takes calls from leader term ${highest} on; this call carries term ${term}: its operator is no longer the leader`,
        'x-streamcube-term',
      );
    }
    return highest;
  }

  /**
   * Admits a mutating call at `term` for `cube`, or throws ChannelError('StaleLeader') when a
   * higher term was seen. A higher term is written durably before the call acts: a receiver that
   * restarts still refuses the deposed operator. Synchronous, so no other call interleaves.
   */
  admit(cube: CubeKey, term: number): void {
    const highest = this.check(cube, term);
    if (term > highest) {
      const dir = join(this.dir, cube.namespace);
      const created = mkdirSync(dir, { recursive: true });
      if (created !== undefined) {
        // A directory just made is made durable in its parent (leader-terms/ in the data dir).
        if (created === this.dir) fsyncDirectory(this.options.dataDir);
        fsyncDirectory(this.dir);
      }
      writeFileDurably(this.file(cube), JSON.stringify({ term }));
      this.highest.set(cubeKeyString(cube), term);
      this.options.onTerm?.(cube, term);
    }
  }
}
