// Durations as Kubernetes users write them ("1h", "10m", "1h30m", "500ms"), parsed to milliseconds.
// The units are those CEL's duration() accepts (no days), so the CRD's rules and this agree.

export const durationPattern = '^([0-9]{1,6}(ms|s|m|h))+$';

const unitMs: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** Milliseconds in `text`, or undefined when it is not a duration such as "1h30m". */
export function parseDuration(text: string): number | undefined {
  if (!new RegExp(durationPattern).test(text)) return undefined;
  let total = 0;
  for (const [, amount, unit] of text.matchAll(/([0-9]+)(ms|s|m|h)/g)) {
    total += Number(amount) * (unitMs[unit ?? ''] ?? Number.NaN);
  }
  return Number.isSafeInteger(total) ? total : undefined;
}
