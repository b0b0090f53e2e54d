// Exact sums: a `sum` measure with a `scale` is added as an integer count of 10^-scale units
// (bigint) wherever pieces are merged, and answered as a decimal string with `scale` digits, so
// that 360985.35 comes back as written whatever order the pieces were added in. Segments and
// hand-offs keep float64 values (their format is unchanged): each value is rounded to the scale
// where it leaves one, which is exact while a row's float sum is within half a unit of the truth.
import type { Measure } from './cube.ts';

/** The measure's scale when its sum is kept exact; undefined for every other measure. */
export const exactScaleOf = (m: Pick<Measure, 'function' | 'scale'>): number | undefined =>
  m.function === 'sum' ? m.scale : undefined;

/** A float as units of 10^-scale, rounded from its exact binary value. */
export function toUnits(value: number, scale: number): bigint {
  if (!Number.isFinite(value)) throw new RangeError(`${value} is not a finite sum`);
  // toFixed writes the float's exact value rounded to `scale` digits, below 1e21.
  if (Math.abs(value) < 1e21) return BigInt(value.toFixed(scale).replace('.', ''));
  return BigInt(value) * 10n ** BigInt(scale);
}

/** Units as a decimal string with `scale` digits after the point: 36098535n, 2 → "360985.35". */
export function formatUnits(units: bigint, scale: number): string {
  if (scale === 0) return units.toString();
  const sign = units < 0n ? '-' : '';
  const digits = (units < 0n ? -units : units).toString().padStart(scale + 1, '0');
  return `${sign}${digits.slice(0, -scale)}.${digits.slice(-scale)}`;
}

const decimal = /^(-?)(\d+)(?:\.(\d+))?$/;

/**
 * A scaled sum as a receiver answers it — a decimal string with `scale` digits, or a number from a
 * receiver of before scales — as units. A string with more digits than the scale is refused.
 */
export function parseUnits(value: string | number, scale: number): bigint {
  if (typeof value === 'number') return toUnits(value, scale);
  const m = decimal.exec(value);
  if (!m || (m[3] ?? '').length > scale)
    throw new RangeError(
      `'${value}' is not a decimal with at most ${scale} digits after the point`,
    );
  const units = BigInt(`${m[2]}${(m[3] ?? '').padEnd(scale, '0')}`);
  return m[1] === '-' ? -units : units;
}
