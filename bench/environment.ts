// What every bench shares: the test environment (the running one, or one of its own stopped at
// the end) and parsing of numeric flags.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import {
  type TestEnvironment,
  environmentVariables,
  findRunningEnvironment,
  startEnvironment,
  stopEnvironment,
} from '../src/local/environment.ts';
import { settings } from '../src/local/settings.ts';

/** The median of the values (the mean of the middle two for an even count); NaN of none. */
export function median(values: number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

export function say(text: string): void {
  process.stdout.write(`${text}\n`);
}

export function positive(name: string, text: string): number {
  const n = Number(text);
  if (!Number.isSafeInteger(n) || n <= 0) throw new Error(`--${name} must be a positive integer`);
  return n;
}

/**
 * The running test environment, or a new one that `stop` ends; the test helpers find it through
 * the environment variables set here.
 */
export async function benchEnvironment(): Promise<{
  env: TestEnvironment;
  stop: () => Promise<void>;
}> {
  let env = findRunningEnvironment(settings.stateDir);
  let own = false;
  if (env) {
    say(`using the running environment in ${settings.stateDir}`);
  } else {
    say('no running environment: starting one for this run (stopped at the end)');
    env = await startEnvironment(mkdtempSync(join(tmpdir(), 'streamcube-bench-env-')));
    own = true;
  }
  Object.assign(process.env, environmentVariables(env));
  const started = env;
  return { env, stop: () => (own ? stopEnvironment(started, true) : Promise.resolve()) };
}

/**
 * The flags (strings, with their defaults; a default of `false` makes a switch such as --fresh),
 * or undefined after printing `usage` for --help.
 */
export function benchFlags<D extends Record<string, string | boolean | undefined>>(
  usage: string,
  defaults: D,
):
  | {
      [K in keyof D]: D[K] extends boolean
        ? boolean
        : D[K] extends string
          ? string
          : string | undefined;
    }
  | undefined {
  const options = Object.fromEntries(
    Object.entries<string | boolean | undefined>(defaults).map(([name, value]) => [
      name,
      typeof value === 'boolean'
        ? { type: 'boolean' as const, default: value }
        : value === undefined
          ? { type: 'string' as const }
          : { type: 'string' as const, default: value },
    ]),
  );
  const { values } = parseArgs({
    options: { ...options, help: { type: 'boolean', short: 'h', default: false } },
    strict: true,
  });
  if (values.help) {
    say(usage);
    return undefined;
  }
  return values as {
    [K in keyof D]: D[K] extends boolean
      ? boolean
      : D[K] extends string
        ? string
        : string | undefined;
  };
}
