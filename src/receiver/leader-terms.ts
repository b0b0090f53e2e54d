// Fencing of deposed operators: per cube, the highest leader term a mutating admin call carried,
// kept in <dataDir>/leader-terms/<cube>.json. It outlives the cube's data (an unassign keeps it),
// so a partition moved away and back cannot be touched by the operator that led before.
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ChannelError } from './channel-error.ts';
import { fsyncDirectory, writeFileDurably } from './durable-files.ts';

export interface LeaderTermsOptions {
  dataDir: string;
  /** Called for each refused call, with its cube. */
  onStale?: (cube: string) => void;
  /** Called when a cube's highest term is set (at first read and on every rise). */
  onTerm?: (cube: string, term: number) => void;
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
  highestFor(cube: string): number {
    let term = this.highest.get(cube);
    if (term === undefined) {
      term = this.read(cube);
      this.highest.set(cube, term);
      this.options.onTerm?.(cube, term);
    }
    return term;
  }

  private read(cube: string): number {
    let text: string;
    try {
      text = readFileSync(this.file(cube), 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return 0;
      throw error;
    }
    const term = (JSON.parse(text) as { term?: unknown }).term;
    if (typeof term !== 'number' || !Number.isSafeInteger(term) || term < 0) {
      throw new Error(`${this.file(cube)} holds no leader term`);
    }
    return term;
  }

  private file(cube: string): string {
    return join(this.dir, `${cube}.json`);
  }

  /**
   * Admits a mutating call at `term` for `cube`, or throws ChannelError('StaleLeader') when a
   * higher term was seen. A higher term is written durably before the call acts: a receiver that
   * restarts still refuses the deposed operator. Synchronous, so no other call interleaves.
   */
  admit(cube: string, term: number): void {
    const highest = this.highestFor(cube);
    if (term < highest) {
      this.options.onStale?.(cube);
      throw new ChannelError(
        'StaleLeader',
        `cube ${cube} takes calls from leader term ${highest} on; this call carries term ${term}: its operator is no longer the leader`,
        'x-streamcube-term',
      );
    }
    if (term > highest) {
      if (mkdirSync(this.dir, { recursive: true }) !== undefined)
        fsyncDirectory(this.options.dataDir);
      writeFileDurably(this.file(cube), JSON.stringify({ term }));
      this.highest.set(cube, term);
      this.options.onTerm?.(cube, term);
    }
  }
}
