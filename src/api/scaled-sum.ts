// Exact sums: a `sum` measure with a `scale` is kept as an integer count of 10^-scale units end to
// end. Each event's value is read from the digits the producer wrote (unitsOfJsonNumber, rounded
// half to even past the scale), segments add units exactly (a Number while safe, a bigint past),
// checkpoints and hand-offs hold units, and the answer is a decimal string with `scale` digits, so
// that 360985.35 comes back as written whatever order events and pieces were added in.
import type { Measure } from './cube.ts';

/** The measure's scale when its sum is kept exact; undefined for every other measure. */
export const exactScaleOf = (m: Pick<Measure, 'function' | 'scale'>): number | undefined =>
  m.function === 'sum' ? m.scale : undefined;

/**
 * A float as units of 10^-scale, rounded from its exact binary value: for sums written as floats
 * (checkpoints and hand-offs of before units, receivers of before scales).
 */
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

/**
 * Units of a scaled sum in a segment's row: a Number while a safe integer (exact, and cheap to
 * add on the ingest path), a bigint past ±(2^53 − 1). The same sum has the same form whatever the
 * order it was added in.
 */
export type Units = number | bigint;

const maxSafe = BigInt(Number.MAX_SAFE_INTEGER);

/** Units in their canonical form: a Number when safe, else a bigint. */
const canonicalUnits = (units: bigint): Units =>
  units <= maxSafe && units >= -maxSafe ? Number(units) : units;

/** a + b, exact: two safe Numbers add as Numbers unless the sum leaves the safe range. */
export function addUnits(a: Units, b: Units): Units {
  if (typeof a === 'number' && typeof b === 'number') {
    // Both are safe integers: the float sum is exact whenever the exact sum is safe, and past the
    // safe range whenever the exact sum is.
    const sum = a + b;
    if (sum <= Number.MAX_SAFE_INTEGER && sum >= -Number.MAX_SAFE_INTEGER) return sum;
  }
  return canonicalUnits(BigInt(a) + BigInt(b));
}

/** Units as text, where JSON must hold them exactly (checkpoint fragments): "36098535". */
export const unitsToText = (units: Units): string => units.toString();

/** Units from unitsToText, in canonical form; a RangeError for anything but an integer. */
export function unitsFromText(text: string): Units {
  if (!/^-?\d+$/.test(text)) throw new RangeError(`'${text}' is not an integer count of units`);
  return canonicalUnits(BigInt(text));
}

const digit0 = 0x30;
const isDigitCode = (c: number): boolean => c >= digit0 && c <= 0x39;

/**
 * A JSON number, bytes [from, to) of `text`, as units of 10^-scale, read from its digits (never
 * through a float): 360985.35 at scale 2 is 36098535. Digits past the scale are rounded half to
 * even (0.30000000000000004 → 30, 0.125 → 12, 0.135 → 14). NaN when the text is not a JSON number
 * or the units pass ±(2^53 − 1): a caller rejects such a value.
 */
export function unitsOfJsonNumber(
  text: ArrayLike<number>,
  from: number,
  to: number,
  scale: number,
): number {
  let at = from;
  const negative = text[at] === 0x2d;
  if (negative) at++;
  const intFrom = at;
  while (at < to && isDigitCode(text[at]!)) at++;
  const intTo = at;
  if (intTo === intFrom || (text[intFrom] === digit0 && intTo - intFrom > 1)) return NaN;
  let fracFrom = at;
  let fracTo = at;
  if (text[at] === 0x2e) {
    fracFrom = ++at;
    while (at < to && isDigitCode(text[at]!)) at++;
    fracTo = at;
    if (fracTo === fracFrom) return NaN;
  }
  let exponent = 0;
  if (text[at] === 0x65 || text[at] === 0x45) {
    at++;
    const sign = text[at] === 0x2d ? -1 : 1;
    if (text[at] === 0x2d || text[at] === 0x2b) at++;
    if (!(at < to && isDigitCode(text[at]!))) return NaN;
    while (at < to && isDigitCode(text[at]!))
      exponent = Math.min(exponent * 10 + (text[at++]! - digit0), 1e6);
    exponent *= sign;
  }
  if (at !== to) return NaN;
  // The digits d (integer part, then fraction) times 10^shift are the units.
  const intDigits = intTo - intFrom;
  const count = intDigits + (fracTo - fracFrom);
  const digitAt = (i: number): number =>
    text[i < intDigits ? intFrom + i : fracFrom + i - intDigits]! - digit0;
  const shift = exponent - (fracTo - fracFrom) + scale;
  // The digits kept, the first one dropped, and whether any after it is not zero.
  const kept = Math.max(0, Math.min(count, count + shift));
  let units = 0;
  for (let i = 0; i < kept; i++) {
    units = units * 10 + digitAt(i);
    if (units > Number.MAX_SAFE_INTEGER) return NaN;
  }
  if (shift < 0) {
    const dropped = kept < count && count + shift >= 0 ? digitAt(kept) : 0;
    let sticky = false;
    for (let i = kept + 1; i < count && !sticky; i++) sticky = digitAt(i) !== 0;
    if (dropped > 5 || (dropped === 5 && (sticky || units % 2 === 1))) units += 1;
  } else if (units !== 0) {
    for (let i = 0; i < shift; i++) {
      units *= 10;
      if (units > Number.MAX_SAFE_INTEGER) return NaN;
    }
  }
  if (units > Number.MAX_SAFE_INTEGER) return NaN;
  return negative && units !== 0 ? -units : units;
}

/** unitsOfJsonNumber of a string (the source text of a JSON number, ASCII). */
export const unitsOfJsonText = (text: string, scale: number): number =>
  unitsOfJsonNumber(Buffer.from(text, 'latin1'), 0, text.length, scale);
