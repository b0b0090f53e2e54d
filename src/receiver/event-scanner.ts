// The fast path of reading an event: a flat JSON object scanned in its UTF-8 bytes, the schema's
// fields picked out without JSON.parse building an object (and a string of the whole record)
// first. It reads only what it can read exactly as eventTextParser does and says so; anything else
// (escapes, nested values, a field the event lacks or cannot use) goes to eventTextParser, which
// stays the definition of an event and of every reject reason.
import type { CubeSchema } from '../api/cube.ts';
import { exactScaleOf, unitsOfJsonNumber } from '../api/scaled-sum.ts';

/** What the scanner read of one record; reused from record to record. */
export interface ScannedEvent {
  time: number;
  /** In schema order. */
  dimensions: string[];
  /** Measure inputs in schema order; count measures get 1, scaled sums their units. */
  values: Float64Array;
}

/** Reads record bytes [start, end) into `out`; false when eventTextParser must decide. */
export type EventScanner = (bytes: Buffer, start: number, end: number) => boolean;

/** A JavaScript Date holds ±8.64e15 ms (event.ts: the same bound). */
const maxTime = 8.64e15;

// What a field's value was in the record being scanned.
const absent = 0;
const numberValue = 1;
const stringValue = 2;
const nullValue = 3;
const trueValue = 4;
const falseValue = 5;

/** Exact powers of ten as doubles: m·10^±k is correctly rounded for m < 2^53, k ≤ 22. */
const powersOfTen = Array.from({ length: 23 }, (_, k) => 10 ** k);

/** The exponent of a number with too many digits for its mantissa to be exact. */
const noExponent = -(2 ** 30);

const isDigit = (b: number): boolean => b >= 0x30 && b <= 0x39;
const isSpace = (b: number): boolean => b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09;

/**
 * The scanner of one cube schema, and the event it fills; undefined when a field name is one the
 * scanner does not match by bytes (non-ASCII, or a member of Object.prototype, which
 * eventTextParser reads with care).
 */
export function eventScanner(
  schema: CubeSchema,
): { scan: EventScanner; event: ScannedEvent } | undefined {
  const dimensionCount = schema.dimensions.length;
  const measureFields = schema.measures.map((m) =>
    m.function === 'count' ? null : (m.field ?? ''),
  );
  const scales = schema.measures.map((m) => exactScaleOf(m) ?? -1);
  // Slot 0 is the time, then the dimensions, then the measures (count measures never filled).
  const slotNames = [schema.timestampField, ...schema.dimensions, ...measureFields];
  const names = new Map<string, number[]>();
  for (const [slot, name] of slotNames.entries()) {
    if (name === null) continue;
    if (!/^[\x20-\x7e]*$/.test(name) || name in Object.prototype || name.includes('"')) {
      return undefined;
    }
    if (name.includes('\\')) return undefined;
    names.set(name, [...(names.get(name) ?? []), slot]);
  }
  const fields = [...names].map(([name, slots]) => ({
    bytes: Buffer.from(name, 'latin1'),
    slots,
  }));
  const slotCount = slotNames.length;
  const kinds = new Uint8Array(slotCount);
  const numbers = new Float64Array(slotCount);
  // A number of at most 15 digits as its digits (signed) times 10^exponent, both exact; the
  // exponent of a longer one is noExponent.
  const mantissas = new Float64Array(slotCount);
  const exponents = new Int32Array(slotCount);
  const starts = new Int32Array(slotCount);
  const ends = new Int32Array(slotCount);
  const event: ScannedEvent = {
    time: 0,
    dimensions: new Array<string>(dimensionCount).fill(''),
    values: new Float64Array(measureFields.length),
  };

  let bytes: Buffer = Buffer.alloc(0);
  let at = 0;
  let end = 0;
  let number = 0;
  let numberMantissa = 0;
  let numberExponent = 0;

  const skipSpace = (): void => {
    while (at < end && isSpace(bytes[at]!)) at++;
  };

  /** A string after its opening quote, up to and past its closing one; false if it escapes. */
  const skipString = (): boolean => {
    for (; at < end; at++) {
      const b = bytes[at]!;
      if (b === 0x22) {
        at++;
        return true;
      }
      if (b === 0x5c || b < 0x20) return false;
    }
    return false;
  };

  /** A JSON number at `at` into `number`, by JSON's grammar; false when it is not one. */
  const readNumber = (): boolean => {
    const from = at;
    let negative = false;
    if (bytes[at] === 0x2d) {
      negative = true;
      at++;
    }
    let mantissa = 0;
    let digits = 0;
    if (bytes[at] === 0x30) {
      at++;
      digits = 1;
    } else if (at < end && bytes[at]! >= 0x31 && bytes[at]! <= 0x39) {
      while (at < end && isDigit(bytes[at]!)) {
        mantissa = mantissa * 10 + (bytes[at++]! - 0x30);
        digits++;
      }
    } else return false;
    let exponent = 0;
    if (bytes[at] === 0x2e) {
      at++;
      if (!(at < end && isDigit(bytes[at]!))) return false;
      while (at < end && isDigit(bytes[at]!)) {
        mantissa = mantissa * 10 + (bytes[at++]! - 0x30);
        digits++;
        exponent--;
      }
    }
    if (bytes[at] === 0x65 || bytes[at] === 0x45) {
      at++;
      let sign = 1;
      if (bytes[at] === 0x2b) at++;
      else if (bytes[at] === 0x2d) {
        sign = -1;
        at++;
      }
      if (!(at < end && isDigit(bytes[at]!))) return false;
      let e = 0;
      while (at < end && isDigit(bytes[at]!)) {
        e = Math.min(e * 10 + (bytes[at++]! - 0x30), 1e6);
      }
      exponent += sign * e;
    }
    if (digits <= 15 && exponent >= -22 && exponent <= 22) {
      const magnitude =
        exponent < 0 ? mantissa / powersOfTen[-exponent]! : mantissa * powersOfTen[exponent]!;
      number = negative ? -magnitude : magnitude;
    } else {
      number = Number(bytes.toString('latin1', from, at));
    }
    numberMantissa = negative ? -mantissa : mantissa;
    numberExponent = digits <= 15 ? exponent : noExponent;
    return true;
  };

  const literal = (text: readonly number[]): boolean => {
    for (let i = 0; i < text.length; i++) if (bytes[at + i] !== text[i]) return false;
    at += text.length;
    return true;
  };
  const trueBytes = [0x74, 0x72, 0x75, 0x65];
  const falseBytes = [0x66, 0x61, 0x6c, 0x73, 0x65];
  const nullBytes = [0x6e, 0x75, 0x6c, 0x6c];

  /** The field whose name is bytes [from, to), if the schema reads it. */
  const fieldAt = (from: number, to: number): number[] | undefined => {
    const length = to - from;
    next: for (const f of fields) {
      if (f.bytes.length !== length) continue;
      for (let i = 0; i < length; i++) if (bytes[from + i] !== f.bytes[i]) continue next;
      return f.slots;
    }
    return undefined;
  };

  /** The value at `at` into the slots (undefined: a field not read); false if not a simple one. */
  const readValue = (slots: number[] | undefined): boolean => {
    const b = bytes[at];
    let kind: number;
    // A string's text lies between its quotes; a number's is all of it.
    let from = at + 1;
    let to = -1;
    if (b === 0x22) {
      at++;
      if (!skipString()) return false;
      kind = stringValue;
    } else if (b === 0x74) {
      if (!literal(trueBytes)) return false;
      kind = trueValue;
    } else if (b === 0x66) {
      if (!literal(falseBytes)) return false;
      kind = falseValue;
    } else if (b === 0x6e) {
      if (!literal(nullBytes)) return false;
      kind = nullValue;
    } else if (b === 0x2d || (b !== undefined && isDigit(b))) {
      from = at;
      if (!readNumber()) return false;
      kind = numberValue;
      to = at;
    } else return false; // an object or array: eventTextParser reads it
    if (slots) {
      for (const slot of slots) {
        kinds[slot] = kind;
        numbers[slot] = number;
        mantissas[slot] = numberMantissa;
        exponents[slot] = numberExponent;
        starts[slot] = from;
        ends[slot] = to < 0 ? at - 1 : to;
      }
    }
    return true;
  };

  /** The object's members into the slots; false unless it is a flat object and nothing else. */
  const scanObject = (): boolean => {
    skipSpace();
    if (bytes[at] !== 0x7b) return false;
    at++;
    skipSpace();
    if (bytes[at] === 0x7d) at++;
    else {
      for (;;) {
        if (bytes[at] !== 0x22) return false;
        const keyFrom = ++at;
        for (; at < end && bytes[at] !== 0x22; at++) {
          const k = bytes[at]!;
          if (k === 0x5c || k < 0x20 || k >= 0x80) return false;
        }
        if (at >= end) return false;
        const slots = fieldAt(keyFrom, at);
        at++;
        skipSpace();
        if (bytes[at] !== 0x3a) return false;
        at++;
        skipSpace();
        if (!readValue(slots)) return false;
        skipSpace();
        if (bytes[at] === 0x2c) {
          at++;
          skipSpace();
          continue;
        }
        if (bytes[at] !== 0x7d) return false;
        at++;
        break;
      }
    }
    skipSpace();
    return at === end;
  };

  const text = (slot: number): string => bytes.toString('utf8', starts[slot], ends[slot]);

  const scan: EventScanner = (record, start, stop) => {
    bytes = record;
    at = start;
    end = stop;
    kinds.fill(absent);
    if (!scanObject()) return false;
    if (kinds[0] !== numberValue || !(numbers[0]! >= -maxTime && numbers[0]! <= maxTime)) {
      return false;
    }
    event.time = Math.trunc(numbers[0]!);
    for (let i = 0; i < dimensionCount; i++) {
      const slot = 1 + i;
      switch (kinds[slot]) {
        case stringValue:
          event.dimensions[i] = text(slot);
          break;
        case absent:
        case nullValue:
          event.dimensions[i] = '';
          break;
        case numberValue:
          event.dimensions[i] = String(numbers[slot]);
          break;
        case trueValue:
          event.dimensions[i] = 'true';
          break;
        default:
          event.dimensions[i] = 'false';
      }
    }
    for (let j = 0; j < measureFields.length; j++) {
      if (measureFields[j] === null) {
        event.values[j] = 1;
        continue;
      }
      const slot = 1 + dimensionCount + j;
      if (kinds[slot] !== numberValue || !Number.isFinite(numbers[slot])) return false;
      if (scales[j]! >= 0) {
        // Units from the number's own digits: its mantissa when no digit is past the scale (the
        // product is exact within the safe range), else read again with rounding; past the safe
        // range eventTextParser rejects it.
        const shift = exponents[slot]! + scales[j]!;
        let units = shift >= 0 && shift <= 15 ? mantissas[slot]! * powersOfTen[shift]! + 0 : NaN;
        if (!(units >= -Number.MAX_SAFE_INTEGER && units <= Number.MAX_SAFE_INTEGER))
          units = unitsOfJsonNumber(bytes, starts[slot]!, ends[slot]!, scales[j]!);
        if (Number.isNaN(units)) return false;
        event.values[j] = units;
      } else event.values[j] = numbers[slot]!;
    }
    return true;
  };
  return { scan, event };
}
