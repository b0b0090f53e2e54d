// The codecs registered with kafkajs: LZ4 frames as Kafka's Java client writes them (with and
// without block checksums, several blocks), the frame options other producers set, and a round
// trip through every codec kafkajs looks up.
import fc from 'fast-check';
import kafkajs from 'kafkajs';
import { type KafkajsCodec, registerCodecs } from '../../src/kafka/codecs.ts';
import { CodecError, compressLz4, decompressLz4 } from '../../src/kafka/lz4-frame.ts';

/** 3,000 lines of 23 bytes: 69,000 bytes, more than one 64 KiB block. */
const text = Buffer.from(
  Array.from({ length: 3000 }, (_, i) => `{"i":${i % 10},"country":"de"}\n`).join(''),
);

// Written by kafka-clients 3.9.2's Lz4BlockOutputStream (64 KiB blocks, level 9), as a producer
// with compression.type=lz4 does; the first with block checksums, which follow each block.
const javaFrames = {
  withBlockChecksums: Buffer.from(
    'BCJNGHBArVEBAADxCHsiaSI6MCwiY291bnRyeSI6ImRlIn0KFwAfMRcAAx8yFwADHzMXAAMfNBcAAx81FwADHzYXAAMfNxcAAx84FwADHzkXAAMP5gD' +
      '/'.repeat(340) +
      '8UDo5LCJjSy8XpV8AAAD/CG91bnRyeSI6ImRlIn0KeyJpIjowLCJjFwAAHzEXAAMfMhcAAx8zFwADHzQXAAMfNRcAAx82FwADHzcXAAMfOBcAAx85FwADD+YA////////////////g1BkZSJ9Coz0Tk4AAAAA',
    'base64',
  ),
  withoutBlockChecksums: Buffer.from(
    'BCJNGGBAglEBAADxCHsiaSI6MCwiY291bnRyeSI6ImRlIn0KFwAfMRcAAx8yFwADHzMXAAMfNBcAAx81FwADHzYXAAMfNxcAAx84FwADHzkXAAMP5gD' +
      '/'.repeat(340) +
      '8UDo5LCJjXwAAAP8Ib3VudHJ5IjoiZGUifQp7ImkiOjAsImMXAAAfMRcAAx8yFwADHzMXAAMfNBcAAx81FwADHzYXAAMfNxcAAx84FwADHzkXAAMP5gD///////////////+DUGRlIn0KAAAAAA==',
    'base64',
  ),
};

function pseudoRandom(length: number): Buffer {
  const out = Buffer.alloc(length);
  let x = 12345;
  for (let i = 0; i < length; i++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    out[i] = x >>> 24;
  }
  return out;
}

/** One frame of `src` with lz4js's header (FLG, BD, HC) rewritten to carry the given options. */
function frameWith(src: Buffer, options: { contentSize?: boolean; contentChecksum?: boolean }) {
  const plain = compressLz4(src);
  let flags = plain[4]!;
  if (options.contentSize) flags |= 0x08;
  if (options.contentChecksum) flags |= 0x04;
  const size = Buffer.alloc(8);
  size.writeBigUInt64LE(BigInt(src.length));
  return Buffer.concat([
    plain.subarray(0, 4),
    Buffer.from([flags, plain[5]!]),
    options.contentSize ? size : Buffer.alloc(0),
    Buffer.from([0xaa]), // header checksum: read past, not checked
    plain.subarray(7),
    options.contentChecksum ? Buffer.from([1, 2, 3, 4]) : Buffer.alloc(0),
  ]);
}

describe('LZ4 frames', () => {
  test.each(Object.entries(javaFrames))('Java client frame %s decodes', (_name, frame) => {
    expect(decompressLz4(frame).equals(text)).toBe(true);
  });

  test.each([
    ['empty', Buffer.alloc(0)],
    ['one byte', Buffer.from('x')],
    ['the test text', text],
    // 64 KiB blocks: 80 of them; the random ones stored uncompressed.
    ['5 MiB of one byte', Buffer.alloc(5 << 20, 7)],
    ['5 MiB of pseudo-random bytes', pseudoRandom(5 << 20)],
  ])('round trip: %s', (_name, src) => {
    expect(decompressLz4(compressLz4(src)).equals(src)).toBe(true);
  });

  test('what we write is one frame of independent 64 KiB blocks, as Java reads', () => {
    const frame = compressLz4(text);
    // FLG: version 01, block independence; BD: 64 KiB; HC: the header checksum Java writes for
    // them (the same 7 bytes open the Java client's frame without block checksums).
    expect([...frame.subarray(0, 7)]).toEqual([...javaFrames.withoutBlockChecksums.subarray(0, 7)]);
    expect(frame.readUInt32LE(7)).toBeLessThan(64 << 10);
  });

  test('any bytes round trip, repetitive or not', () => {
    // Random bytes, and patterns repeated up to 72 KiB: blocks of literals, of long matches, and
    // matches that reach a block's end.
    const chunk = fc.oneof(
      fc.uint8Array({ maxLength: 300 }),
      fc.tuple(fc.uint8Array({ minLength: 1, maxLength: 8 }), fc.integer({ min: 1, max: 9000 })),
    );
    fc.assert(
      fc.property(fc.array(chunk, { maxLength: 40 }), (chunks) => {
        const src = Buffer.concat(
          chunks.map((c) =>
            c instanceof Uint8Array
              ? Buffer.from(c)
              : Buffer.concat(Array.from({ length: c[1] }, () => Buffer.from(c[0]))),
          ),
        );
        expect(decompressLz4(compressLz4(src)).equals(src)).toBe(true);
      }),
      { numRuns: 200 },
    );
  });

  test.each([
    ['a content size', { contentSize: true }],
    ['a content checksum', { contentChecksum: true }],
    ['both', { contentSize: true, contentChecksum: true }],
  ])('a frame with %s decodes', (_name, options) => {
    expect(decompressLz4(frameWith(text, options)).equals(text)).toBe(true);
  });

  test('frames one after another, with a skippable frame between, decode as one stream', () => {
    const skippable = Buffer.from([0x50, 0x2a, 0x4d, 0x18, 3, 0, 0, 0, 9, 9, 9]);
    const stream = Buffer.concat([
      javaFrames.withBlockChecksums,
      skippable,
      frameWith(Buffer.from('tail'), { contentSize: true }),
    ]);
    expect(decompressLz4(stream).toString()).toBe(`${text.toString()}tail`);
  });

  test.each([
    ['no magic number', Buffer.from('not lz4 at all')],
    ['a cut-off frame', javaFrames.withoutBlockChecksums.subarray(0, 40)],
    [
      'a frame and stray bytes',
      Buffer.concat([javaFrames.withBlockChecksums, Buffer.from([4, 34])]),
    ],
    ['a frame of version 2', Buffer.from([0x04, 0x22, 0x4d, 0x18, 0x80, 0x40, 0, 0, 0, 0, 0])],
  ])('%s is refused with a CodecError', (_name, frame) => {
    expect(() => decompressLz4(frame)).toThrow(CodecError);
  });
});

describe('kafkajs codecs', () => {
  registerCodecs();
  const { CompressionCodecs, CompressionTypes } = kafkajs;
  const lookup = (type: number): KafkajsCodec =>
    (CompressionCodecs as Record<number, () => KafkajsCodec>)[type]!();

  test.each([
    ['gzip', CompressionTypes.GZIP],
    ['snappy', CompressionTypes.Snappy],
    ['lz4', CompressionTypes.LZ4],
    ['zstd', CompressionTypes.ZSTD],
  ])('%s compresses and decompresses', async (_name, type) => {
    const codec = lookup(type);
    const compressed = await codec.compress({ buffer: text });
    expect(compressed.length).toBeLessThan(text.length);
    expect((await codec.decompress(compressed)).equals(text)).toBe(true);
  });

  test('lz4 reads what the Java client writes through the registry too', async () => {
    const codec = lookup(CompressionTypes.LZ4);
    expect((await codec.decompress(javaFrames.withBlockChecksums)).equals(text)).toBe(true);
  });
});
