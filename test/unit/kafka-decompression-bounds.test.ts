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
  /** One record (offset delta 0, no key, no headers) whose value is `size` spaces. */
  const record = (size: number): Buffer => {
    const body = Buffer.concat([
      Buffer.from([0, ...varint(0), ...varint(0), ...varint(-1), ...varint(size)]),
      Buffer.alloc(size, 0x20),
      Buffer.from(varint(0)),
    ]);
    return Buffer.concat([Buffer.from(varint(body.length)), body]);
  };

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

  test('ends before the batch that takes it past the bound; read from that batch, it is refused', async () => {
    const each = zstdCompressSync(record(600 * KiB));
    const set = Buffer.concat([zstdBatch(0, each), zstdBatch(1, each)]);
    const bounds: number[] = [];
    const decompress = (attributes: number, data: Buffer, maxBytes: number) => {
      bounds.push(maxBytes);
      return decompressBatch(attributes & 0x07, data, maxBytes);
    };
    // Each batch is within the bound, the two are not: the first is handed over alone.
    const whole = await decodeRecordSet(set, 0, [], decompress, MiB);
    expect([...whole.offsets]).toEqual([0]);
    expect(whole.lastOffset).toBe(0);
    expect(bounds).toEqual([MiB, MiB - record(600 * KiB).length]);
    // The next fetch starts at the second, which then passes the bound of a set of its own.
    const big = zstdBatch(1, zstdCompressSync(record(2 * MiB)));
    await expect(decodeRecordSet(big, 1, [], decompress, MiB)).rejects.toBeInstanceOf(
      DecompressedSizeError,
    );
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
