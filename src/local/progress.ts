// Progress lines for slow set-up work: what is happening and how long it has taken, so that a
// first build of several minutes is never a silent wait.

const started = Date.now();

function stamp(): string {
  return `[env +${((Date.now() - started) / 1000).toFixed(1)}s]`;
}

export function say(message: string): void {
  process.stderr.write(`${stamp()} ${message}\n`);
}

/** Runs `work`, printing when it starts and ends and, while it runs, a heartbeat every `everyMs`. */
export async function step<T>(
  title: string,
  work: (heartbeat: (detail: string) => void) => Promise<T>,
  everyMs = 15_000,
): Promise<T> {
  const t0 = Date.now();
  let detail = '';
  say(`${title} ...`);
  const timer = setInterval(() => {
    const secs = Math.round((Date.now() - t0) / 1000);
    say(`  ${title}: still working (${secs}s)${detail ? ` — ${detail}` : ''}`);
  }, everyMs);
  try {
    const result = await work((d) => {
      detail = d;
    });
    say(`${title}: done in ${((Date.now() - t0) / 1000).toFixed(1)}s`);
    return result;
  } catch (error) {
    say(`${title}: FAILED after ${((Date.now() - t0) / 1000).toFixed(1)}s`);
    throw error;
  } finally {
    clearInterval(timer);
  }
}
