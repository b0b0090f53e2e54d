// Decompression bombs: a small batch whose records decompress to far more than the bound is
// refused by every codec (DecompressedSizeError) without allocating what it declares, and so is a
// record set whose batches together pass it; records within the bound decode as before.
import { jest } from '@jest/globals';
import { gzipSync, zstdCompressSync } from 'node:zlib';
import kafkajs from 'kafkajs';
import {
  DecompressedSizeError,
  type KafkajsCodec,
  decompressBatch,
  registerCodecs,
} from '../../src/kafka/codecs.ts';
import { compressLz4 } from '../../src/kafka/lz4-frame.ts';
import { decodeRecordSet } from '../../src/kafka/record-batches.ts';

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
  /** A RecordBatch v2 header with zstd records `data` (CRC not checked here), offsets from `base`. */
  function zstdBatch(base: number, data: Buffer): Buffer {
    const header = Buffer.alloc(61);
    header.writeBigInt64BE(BigInt(base), 0);
    header.writeInt32BE(61 - 12 + data.length, 8);
    header[16] = 2; // magic
    header.writeInt16BE(codec.zstd, 21);
    header.writeBigInt64BE(-1n, 43); // producer id: none
    header.writeInt32BE(1, 57); // one record
    return Buffer.concat([header, data]);
  }

  test('whose batches together decompress past the bound is refused, each batch within it', async () => {
    const each = zstdCompressSync(Buffer.alloc(600 * KiB));
    const set = Buffer.concat([zstdBatch(0, each), zstdBatch(1, each)]);
    const bounds: number[] = [];
    const decompress = (attributes: number, data: Buffer, maxBytes: number) => {
      bounds.push(maxBytes);
      return decompressBatch(attributes & 0x07, data, maxBytes);
    };
    await expect(decodeRecordSet(set, 0, [], decompress, MiB)).rejects.toBeInstanceOf(
      DecompressedSizeError,
    );
    expect(bounds).toEqual([MiB, MiB - 600 * KiB]);
  });
});
