// The admin API's bearer token, kept in a file (a mounted Secret) and read again while the process
// runs, so that a rotated Secret takes effect without a restart. The token a rotation replaced
// stays valid for a grace period: pods see a changed Secret at different moments, and calls in
// flight carry the old one.
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { ConfigError } from '../config-error.ts';

/** Shorter tokens are refused: the chart generates 40 characters. */
export const minTokenLength = 16;

/** Bearer tokens valid now, newest first. */
export type BearerTokens = () => readonly string[];

export interface TokenFileOptions {
  /** How long the replaced token stays valid after a rotation is seen. */
  graceMs: number;
  /** How often the file is read again (the kubelet updates a Secret volume within about a minute). */
  pollMs?: number;
  now?: () => number;
  /** Told when a read fails or finds a token too short; the current token stays. */
  onError?: (error: Error) => void;
}

/** The first line of the file, trimmed; throws when it is missing or too short. */
export function readTokenFile(path: string, text?: string): string {
  let content = text;
  if (content === undefined) {
    try {
      content = readFileSync(path, 'utf8');
    } catch (error) {
      throw new ConfigError(`cannot read the token file ${path}: ${(error as Error).message}`, {
        cause: error,
      });
    }
  }
  const token = (content.split('\n')[0] ?? '').trim();
  if (token.length < minTokenLength)
    throw new ConfigError(`the token in ${path} must be at least ${minTokenLength} characters`);
  return token;
}

export class TokenFile {
  readonly path: string;
  private current: string;
  private previous: { token: string; until: number } | undefined;
  private readonly options: Required<Omit<TokenFileOptions, 'onError'>> &
    Pick<TokenFileOptions, 'onError'>;
  private readonly timer: NodeJS.Timeout;

  /** Reads the file now (throwing ConfigError when it is unusable) and then every `pollMs`. */
  constructor(path: string, options: TokenFileOptions) {
    this.path = path;
    this.options = { pollMs: 2000, now: Date.now, ...options };
    this.current = readTokenFile(path);
    this.timer = setInterval(() => void this.reload(), this.options.pollMs);
    this.timer.unref();
  }

  /** Reads the file again; a new token becomes current and the old one enters its grace. */
  async reload(): Promise<void> {
    let token: string;
    try {
      token = readTokenFile(this.path, await readFile(this.path, 'utf8'));
    } catch (error) {
      this.options.onError?.(error as Error);
      return;
    }
    if (token === this.current) return;
    this.previous = { token: this.current, until: this.options.now() + this.options.graceMs };
    this.current = token;
  }

  /** The current token, then the replaced one while its grace lasts. */
  tokens: BearerTokens = () =>
    this.previous && this.options.now() < this.previous.until
      ? [this.current, this.previous.token]
      : [this.current];

  close(): void {
    clearInterval(this.timer);
  }
}
