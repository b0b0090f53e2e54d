// Decompression bombs: a small batch whose records decompress to far more than the bound is
// refused by every codec (DecompressedSizeError) without allocating what it declares; a record set
// skips such a batch (its offsets and record count reported, none of its records read) and ends
// before a batch that takes it past the bound together with the ones before, which the next fetch
// reads: what a reader is handed does not depend on how its fetches are cut.
import { jest } from '@jest/globals';
import { gzipSync, zstdCompressSync } from 'node:zlib';
import kafkajs from 'kafkajs';
import {
  DecompressedSizeError,
  type KafkajsCodec,
  decompressBatch,
  defaultMaxDecompressedBytes,
  maxDecompressedBytes,
  registerCodecs,
  setMaxDecompressedBytes,
} from '../../src/kafka/codecs.ts';
import { compressLz4 } from '../../src/kafka/lz4-frame.ts';
import { decodeRecordSet } from '../../src/kafka/record-batches.ts';
import { parseReceiverConfig } from '../../src/receiver/config.ts';

const KiB = 1024;
const MiB = 1024 * KiB;
const codec = { gzip: 1, snappy: 2, lz4: 3, zstd: 4 } as const;
const zeros = Buffer.alloc(8 * MiB);

registerCodecs();
const kafkajsCodec = (type: number): KafkajsCodec =>
  (kafkajs.CompressionCodecs as Record<number, () => KafkajsCodec>)[type]!();

/** An LZ4 frame of `blocks` one-byte-literal blocks, each declaring a 4 MiB maximum. */
function lz4Declaring(blocks: number): Buffer {
  const header = Buffer.from([0x04, 0x22, 0x4d, 0x18, 0x60, 0x70, 0]); // BD: 4 MiB blocks
  const block = Buffer.from([2, 0, 0, 0, 0x10, 0x61]); // 2 bytes: one literal, 'a'
  return Buffer.concat([header, ...Array.from({ length: blocks }, () => block), Buffer.alloc(4)]);
}

/** A snappy stream in xerial framing whose one block says it holds `length` bytes. */
function snappyDeclaring(length: number): Buffer {
  const varint: number[] = [];
  for (let n = length; ; n = Math.floor(n / 128)) {
    if (n < 128) {
      varint.push(n);
      break;
    }
    varint.push((n % 128) | 0x80);
  }
  const block = Buffer.from([...varint, 0x00]);
  const size = Buffer.alloc(4);
  size.writeUInt32BE(block.length);
  return Buffer.concat([
    Buffer.from([130, 83, 78, 65, 80, 80, 89, 0, 0, 0, 0, 1, 0, 0, 0, 1]),
    size,
    block,
  ]);
}

describe('one batch past the bound', () => {
  const bombs: [string, number, () => Buffer][] = [
    ['gzip', codec.gzip, () => gzipSync(zeros)],
    ['zstd', codec.zstd, () => zstdCompressSync(zeros)],
    ['lz4', codec.lz4, () => compressLz4(zeros)],
    ['snappy', codec.snappy, () => snappyDeclaring(8 * MiB)],
  ];

  test.each(bombs)('%s is refused, nothing near its size allocated', async (_name, id, bomb) => {
    const data = bomb();
    expect(data.length).toBeLessThan(4 * MiB);
    const allocUnsafe = jest.spyOn(Buffer, 'allocUnsafe');
    const alloc = jest.spyOn(Buffer, 'alloc');
    try {
      await expect(decompressBatch(id, data, MiB)).rejects.toBeInstanceOf(DecompressedSizeError);
      const sizes = [...allocUnsafe.mock.calls, ...alloc.mock.calls].map(([n]) => n);
      expect(sizes.filter((n) => n > 2 * MiB)).toEqual([]);
    } finally {
      allocUnsafe.mockRestore();
      alloc.mockRestore();
    }
  });

  // The snappy bomb is a preamble only; a real snappy stream is decoded below.
  test.each(bombs.filter(([name]) => name !== 'snappy'))(
    '%s within the bound decodes',
    async (_name, id, bomb) => {
      const out = await decompressBatch(id, bomb(), 8 * MiB);
      expect(out.length).toBe(8 * MiB);
    },
  );

  test('an lz4 frame declaring 4 MiB a block allocates what its blocks hold, not what they declare', async () => {
    const allocUnsafe = jest.spyOn(Buffer, 'allocUnsafe');
    try {
      // 1,000 blocks declaring 4 GiB in all: past a bound of 1 MiB only by what they declare.
      const out = await decompressBatch(codec.lz4, lz4Declaring(1000), MiB);
      expect(out.toString()).toBe('a'.repeat(1000));
      expect(Math.max(...allocUnsafe.mock.calls.map(([n]) => n))).toBeLessThanOrEqual(MiB);
    } finally {
      allocUnsafe.mockRestore();
    }
  });

  test('snappy as Java writes it (xerial framing, several blocks) decodes whole', async () => {
    const text = Buffer.from('{"ts":1,"country":"de"}\n'.repeat(20_000));
    const framed = await kafkajsCodec(kafkajs.CompressionTypes.Snappy).compress({ buffer: text });
    expect((await decompressBatch(codec.snappy, framed, MiB)).equals(text)).toBe(true);
    await expect(decompressBatch(codec.snappy, framed, text.length - 1)).rejects.toBeInstanceOf(
      DecompressedSizeError,
    );
  });

  test.each([
    ['gzip', kafkajs.CompressionTypes.GZIP, gzipSync],
    ['zstd', kafkajs.CompressionTypes.ZSTD, zstdCompressSync],
  ])('the codecs kafkajs looks up are bounded too (64 MiB): %s', async (_name, type, compress) => {
    const past = compress(Buffer.alloc(64 * MiB + 1));
    await expect(kafkajsCodec(type).decompress(past)).rejects.toBeInstanceOf(DecompressedSizeError);
  });
});

describe('a record set', () => {
  /** Kafka's zigzag varint. */
  const varint = (n: number): number[] => {
    const out: number[] = [];
    for (let z = n >= 0 ? n * 2 : -n * 2 - 1; ; z = Math.floor(z / 128)) {
      if (z < 128) return [...out, z];
      out.push((z % 128) | 0x80);
    }
  };
  /** One record (no key, no headers) at `delta` from its batch's base whose value is `size` spaces. */
  const record = (size: number, delta = 0): Buffer => {
    const body = Buffer.concat([
      Buffer.from([0, ...varint(0), ...varint(delta), ...varint(-1), ...varint(size)]),
      Buffer.alloc(size, 0x20),
      Buffer.from(varint(0)),
    ]);
    return Buffer.concat([Buffer.from(varint(body.length)), body]);
  };

  const compressors: Record<keyof typeof codec, (data: Buffer) => Promise<Buffer>> = {
    gzip: (data) => Promise.resolve(gzipSync(data)),
    snappy: (data) => kafkajsCodec(kafkajs.CompressionTypes.Snappy).compress({ buffer: data }),
    lz4: (data) => Promise.resolve(compressLz4(data)),
    zstd: (data) => Promise.resolve(zstdCompressSync(data)),
  };

  /** A RecordBatch v2 (CRC not checked here) of `count` records of `size` bytes from `base`. */
  async function batch(name: keyof typeof codec, base: number, count: number, size: number) {
    const records = Buffer.concat(Array.from({ length: count }, (_, i) => record(size, i)));
    const data = await compressors[name](records);
    const header = Buffer.alloc(61);
    header.writeBigInt64BE(BigInt(base), 0);
    header.writeInt32BE(61 - 12 + data.length, 8);
    header[16] = 2; // magic
    header.writeInt16BE(codec[name], 21);
    header.writeInt32BE(count - 1, 23); // last offset delta
    header.writeBigInt64BE(-1n, 43); // producer id: none
    header.writeInt32BE(count, 57);
    return Buffer.concat([header, data]);
  }

  const decompress = (attributes: number, data: Buffer, maxBytes: number) =>
    decompressBatch(attributes & 0x07, data, maxBytes);

  /**
   * What a reader of `batches` from offset 0 is handed, fetch by fetch, when a fetch returns the
   * batches from the one holding its offset on, cut after `cut` bytes (at least one batch whole,
   * as Kafka answers): the offsets of records read and the batches skipped as too large.
   */
  async function readAll(batches: Buffer[], cut: number) {
    const read: number[] = [];
    const skipped: { from: number; to: number; records: number }[] = [];
    let fetches = 0;
    for (let position = 0; ; fetches++) {
      const from = batches.findIndex(
        (b) => Number(b.readBigInt64BE(0)) + b.readInt32BE(23) >= position,
      );
      if (from < 0) return { read, skipped, fetches };
      const rest = Buffer.concat(batches.slice(from));
      const set = rest.subarray(0, Math.max(cut, batches[from]!.length));
      const decoded = await decodeRecordSet(set, position, [], decompress, MiB);
      read.push(...decoded.offsets);
      if (decoded.oversized) {
        const { baseOffset, lastOffset, records } = decoded.oversized;
        expect([decoded.firstOffset, decoded.lastOffset]).toEqual([baseOffset, lastOffset]);
        expect(decoded.offsets).toHaveLength(0);
        skipped.push({ from: baseOffset, to: lastOffset, records });
      }
      position = decoded.lastOffset! + 1;
    }
  }

  describe.each(Object.keys(codec) as (keyof typeof codec)[])('%s', (name) => {
    /** Offsets 0-9 in two batches, a bomb of 0.7 MiB × 3 at 10-12, and 13-22 in two batches. */
    const around = async (): Promise<Buffer[]> => [
      await batch(name, 0, 5, 100),
      await batch(name, 5, 5, 100),
      await batch(name, 10, 3, 700 * KiB),
      await batch(name, 13, 5, 100),
      await batch(name, 18, 5, 100),
    ];

    test('a batch past the bound is skipped with its record count; the batches around it are read', async () => {
      const batches = await around();
      expect(batches[2]!.length).toBeLessThan(MiB);
      // Read with the bomb among others: the set ends before it, and is it alone from it.
      const before = await decodeRecordSet(Buffer.concat(batches), 0, [], decompress, MiB);
      expect([...before.offsets]).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
      expect([before.lastOffset, before.oversized]).toEqual([9, undefined]);
      const bomb = await decodeRecordSet(Buffer.concat(batches.slice(2)), 10, [], decompress, MiB);
      expect(bomb.oversized).toEqual({ baseOffset: 10, lastOffset: 12, records: 3 });
      expect([bomb.firstOffset, bomb.lastOffset, bomb.offsets.length]).toEqual([10, 12, 0]);
      // Read from inside it (a stop offset there), the rest of it is skipped alike.
      const inside = await decodeRecordSet(
        Buffer.concat(batches.slice(2)),
        11,
        [],
        decompress,
        MiB,
      );
      expect([inside.firstOffset, inside.lastOffset, inside.oversized?.records]).toEqual([
        11, 12, 3,
      ]);
      const after = await decodeRecordSet(Buffer.concat(batches.slice(3)), 13, [], decompress, MiB);
      expect([...after.offsets]).toEqual(Array.from({ length: 10 }, (_, i) => 13 + i));
      // Fetched from past it, it is not even decompressed.
      const past = await decodeRecordSet(Buffer.concat(batches.slice(2)), 13, [], decompress, MiB);
      expect([past.oversized, past.firstOffset, past.lastOffsetBefore]).toEqual([
        undefined,
        13,
        12,
      ]);
    });

    test('fetches cut anywhere decide the same', async () => {
      const batches = await around();
      const expected = {
        read: [
          ...Array.from({ length: 10 }, (_, i) => i),
          ...Array.from({ length: 10 }, (_, i) => 13 + i),
        ],
        skipped: [{ from: 10, to: 12, records: 3 }],
      };
      for (const cut of [1, 150, 400, 1000, 10 * MiB]) {
        const { read, skipped } = await readAll(batches, cut);
        expect({ read, skipped }).toEqual(expected);
      }
    });

    test('batches each within the bound, past it together, are read over two fetches, none skipped', async () => {
      const batches = [await batch(name, 0, 1, 600 * KiB), await batch(name, 1, 1, 600 * KiB)];
      const first = await decodeRecordSet(Buffer.concat(batches), 0, [], decompress, MiB);
      expect([[...first.offsets], first.lastOffset]).toEqual([[0], 0]);
      expect(await readAll(batches, 10 * MiB)).toEqual({ read: [0, 1], skipped: [], fetches: 2 });
    });
  });

  test('a corrupt batch still stops the reader at it: it is no bomb', async () => {
    const good = await batch('zstd', 0, 2, 100);
    const corrupt = await batch('zstd', 2, 2, 100);
    corrupt.fill(0xff, 61, 70);
    const set = Buffer.concat([good, corrupt]);
    const before = await decodeRecordSet(set, 0, [], decompress, MiB);
    expect([...before.offsets]).toEqual([0, 1]);
    await expect(decodeRecordSet(corrupt, 2, [], decompress, MiB)).rejects.toThrow();
  });
});

describe("the receiver's bound", () => {
  const base = [
    '--replica-set=rs-a',
    '--data-dir=/d',
    '--admin-token-file=/t',
    '--deep-storage-dir=/s',
  ];
  test('64 MiB unless --max-decompressed-mib (or its variable) says otherwise', () => {
    expect(parseReceiverConfig(base, {}).maxDecompressedBytes).toBe(64 * MiB);
    expect(
      parseReceiverConfig([...base, '--max-decompressed-mib=2'], {}).maxDecompressedBytes,
    ).toBe(2 * MiB);
    const fromEnv = parseReceiverConfig(base, { STREAMCUBE_MAX_DECOMPRESSED_MIB: '8' });
    expect(fromEnv.maxDecompressedBytes).toBe(8 * MiB);
  });
  test.each(['0', '4097', '1.5', 'lots'])('--max-decompressed-mib=%s is refused', (value) => {
    expect(() => parseReceiverConfig([...base, `--max-decompressed-mib=${value}`], {})).toThrow(
      /--max-decompressed-mib must be 1\.\.4096/,
    );
  });
  test('the process bound is what the codecs kafkajs looks up decompress within', async () => {
    const gzip = kafkajsCodec(kafkajs.CompressionTypes.GZIP);
    const data = gzipSync(Buffer.alloc(2 * MiB));
    try {
      setMaxDecompressedBytes(MiB);
      await expect(gzip.decompress(data)).rejects.toBeInstanceOf(DecompressedSizeError);
    } finally {
      setMaxDecompressedBytes(defaultMaxDecompressedBytes);
    }
    expect(maxDecompressedBytes()).toBe(64 * MiB);
    expect((await gzip.decompress(data)).length).toBe(2 * MiB);
  });
});

test.each([
  ['gzip', codec.gzip, gzipSync(Buffer.from('ab'))],
  ['zstd', codec.zstd, zstdCompressSync(Buffer.from('ab'))],
  ['lz4', codec.lz4, compressLz4(Buffer.from('ab'))],
])('%s: a bound used up refuses any output; no bound at all refuses none', async (_n, id, data) => {
  await expect(decompressBatch(id, data, 0)).rejects.toBeInstanceOf(DecompressedSizeError);
  expect((await decompressBatch(id, data, Infinity)).toString()).toBe('ab');
});
