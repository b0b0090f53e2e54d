// Record values of one fetch packed into one buffer: what the record batch decoder writes and the
// batch parser reads (and transfers to its worker thread), with no object per record.

/**
 * Record values packed in one buffer: `count` Int32 starts, `count` Int32 lengths (−1 for null),
 * then the bytes; a value's bytes are at its start in them (bytes between values are left over).
 */
export interface PackedValues {
  count: number;
  buffer: ArrayBuffer;
}

/** The bytes of value `i`, or null; a view, not a copy. */
export function packedValue(packed: PackedValues, i: number): Buffer | null {
  const { count, buffer } = packed;
  const length = new Int32Array(buffer, count * 4, count)[i]!;
  if (length < 0) return null;
  const start = new Int32Array(buffer, 0, count)[i]!;
  return Buffer.from(buffer, count * 8 + start, length);
}

/** Bytes between two values of one buffer that may be copied along rather than start a new span. */
const maxSpanGap = 256;

/**
 * kafkajs hands out values as slices of a fetch response or of a decompressed record batch: the
 * values of a batch lie in order in a few buffers with a record header between them. They are
 * copied as spans of those buffers, one call a span, not one a value.
 */
export function packValues(values: readonly (Buffer | null)[]): PackedValues {
  const count = values.length;
  const spanOf = new Int32Array(count);
  const sources: ArrayBufferLike[] = [];
  const froms: number[] = [];
  const tos: number[] = [];
  let bytes = 0;
  for (let i = 0; i < count; i++) {
    const v = values[i]!;
    if (v === null) continue;
    const from = v.byteOffset;
    const to = from + v.length;
    const last = sources.length - 1;
    if (
      last >= 0 &&
      v.buffer === sources[last] &&
      from >= tos[last]! &&
      from - tos[last]! <= maxSpanGap
    ) {
      bytes += to - tos[last]!;
      tos[last] = to;
    } else {
      sources.push(v.buffer);
      froms.push(from);
      tos.push(to);
      bytes += to - from;
    }
    spanOf[i] = sources.length - 1;
  }
  const header = count * 8;
  const buffer = new ArrayBuffer(header + bytes);
  const starts = new Int32Array(buffer, 0, count);
  const lengths = new Int32Array(buffer, count * 4, count);
  const out = new Uint8Array(buffer, header);
  // Where span k begins in `out`, less where it begins in its source.
  const shifts = new Array<number>(sources.length);
  let at = 0;
  for (let k = 0; k < sources.length; k++) {
    const length = tos[k]! - froms[k]!;
    out.set(new Uint8Array(sources[k]!, froms[k], length), at);
    shifts[k] = at - froms[k]!;
    at += length;
  }
  for (let i = 0; i < count; i++) {
    const v = values[i]!;
    if (v === null) {
      lengths[i] = -1;
      continue;
    }
    starts[i] = v.byteOffset + shifts[spanOf[i]!]!;
    lengths[i] = v.length;
  }
  return { count, buffer };
}

/** Values `from` (inclusive) to `to` (exclusive) of `packed`, in a buffer of their own. */
export function slicePackedValues(packed: PackedValues, from: number, to: number): PackedValues {
  const { count, buffer } = packed;
  const starts = new Int32Array(buffer, 0, count);
  const lengths = new Int32Array(buffer, count * 4, count);
  const n = Math.max(0, to - from);
  let bytes = 0;
  for (let i = from; i < to; i++) bytes += Math.max(0, lengths[i]!);
  const out = new ArrayBuffer(n * 8 + bytes);
  const outStarts = new Int32Array(out, 0, n);
  const outLengths = new Int32Array(out, n * 4, n);
  const outBytes = new Uint8Array(out, n * 8);
  let at = 0;
  for (let i = 0; i < n; i++) {
    const length = lengths[from + i]!;
    outLengths[i] = length;
    if (length < 0) continue;
    outStarts[i] = at;
    outBytes.set(new Uint8Array(buffer, count * 8 + starts[from + i]!, length), at);
    at += length;
  }
  return { count: n, buffer: out };
}
