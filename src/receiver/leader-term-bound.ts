// How far a receiver lets a call raise a cube's leader term. Terms are the leader Lease's
// leaseTransitions (src/operator/runtime/leader-election.ts), so with the Lease in reach a term the
// Lease cannot explain — above its leaseTransitions now — comes from no operator that ever led,
// and is refused. Without the Lease a term may rise at most `maxJump` above the highest the
// receiver holds for the cube, except the first term a receiver sees for a cube, which it cannot
// judge. Pure decisions here; the Lease is read behind a small interface at the edge.
import { ChannelError } from './channel-error.ts';
import { type CubeKey, cubeKeyString } from '../protocol/cube-paths.ts';
import { leaderTermHeader } from '../protocol/admin-api.ts';

/** Decides whether `term` may become a cube's highest; throws ChannelError('Conflict') if not. */
export interface LeaderTermBound {
  /** `highest` is the cube's highest term held now; called only when `term` is above it. */
  allowRaise(cube: CubeKey, term: number, highest: number): Promise<void>;
}

/** The default largest rise of a term without a Lease: a thousand takeovers while away. */
export const defaultMaxTermJump = 1_000;

/** A Lease's leaseTransitions is an int32: no operator ever led at a higher term. */
export const maxLeaseTerm = 2 ** 31 - 1;

/**
 * A term may rise at most `maxJump` above the highest held; the first one a cube gets is free up
 * to maxLeaseTerm. It keeps one call from putting a cube's term out of every operator's reach; a
 * caller with the admin token can still raise it step by step (only the Lease stops that).
 */
export function jumpTermBound(maxJump: number): LeaderTermBound {
  return {
    allowRaise: (cube, term, highest) => {
      if (term > maxLeaseTerm)
        return Promise.reject(
          new ChannelError(
            'Conflict',
            `leader term ${term} of cube ${cubeKeyString(cube)} is above ${maxLeaseTerm}, the most a Lease's leaseTransitions holds: no operator has led at that term`,
            leaderTermHeader,
          ),
        );
      if (highest > 0 && term - highest > maxJump)
        return Promise.reject(
          new ChannelError(
            'Conflict',
            `cube ${cubeKeyString(cube)} is at leader term ${highest}; this call raises it to ${term}, more than --max-leader-term-jump (${maxJump}) allows without a Lease to check it against: no operator took over that often`,
            leaderTermHeader,
          ),
        );
      return Promise.resolve();
    },
  };
}

/** The Lease's leaseTransitions now, or undefined when there is no such Lease. */
export type LeaseTransitionsReader = () => Promise<number | undefined>;

export interface LeaseTermBoundOptions {
  /** `<namespace>/<name>`, for messages. */
  lease: string;
  read: LeaseTransitionsReader;
  /** How long a read value answers terms at or below it without another read. */
  cacheMs: number;
  now?: () => number;
}

/**
 * A term is allowed when it is at most the Lease's leaseTransitions. A value read is kept for
 * `cacheMs`: terms at or below it need no call, and a term above it reads the Lease again at once
 * (a takeover just happened), so the operator that just took the Lease is never refused for a
 * stale cache. A Lease that cannot be read refuses the rise (the caller retries); nothing is kept.
 */
export function leaseTermBound(options: LeaseTermBoundOptions): LeaderTermBound {
  const now = options.now ?? Date.now;
  let cached: { transitions: number; at: number } | undefined;
  const read = async (): Promise<number | undefined> => {
    const transitions = await options.read();
    cached = transitions === undefined ? undefined : { transitions, at: now() };
    return transitions;
  };
  return {
    allowRaise: async (cube, term) => {
      const fresh = cached !== undefined && now() - cached.at < options.cacheMs;
      if (fresh && term <= cached!.transitions) return;
      let transitions: number | undefined;
      try {
        transitions = await read();
      } catch (error) {
        throw new ChannelError(
          'Unavailable',
          `cannot read Lease ${options.lease} to check leader term ${term} of cube ${cubeKeyString(cube)}: ${(error as Error).message}; retry`,
          leaderTermHeader,
        );
      }
      if (transitions === undefined)
        throw new ChannelError(
          'Conflict',
          `Lease ${options.lease} does not exist, so no operator leads: leader term ${term} of cube ${cubeKeyString(cube)} is refused`,
          leaderTermHeader,
        );
      if (term > transitions)
        throw new ChannelError(
          'Conflict',
          `leader term ${term} of cube ${cubeKeyString(cube)} is above Lease ${options.lease}'s leaseTransitions (${transitions}): no operator has led at that term`,
          leaderTermHeader,
        );
    },
  };
}
