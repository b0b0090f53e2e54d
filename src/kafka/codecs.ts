// The record batch codecs Kafka producers use, registered with kafkajs (which has only gzip):
// snappy through kafkajs-snappy (pure JS snappyjs, xerial framing as Java writes it), lz4 through
// lz4-frame.ts (lz4js's block decoder), zstd through Node's own zlib.
// Nothing here is native or downloaded at install time.
import { promisify } from 'node:util';
import { zstdCompress, zstdDecompress } from 'node:zlib';
import kafkajs, { type CompressionTypes } from 'kafkajs';
import SnappyCodec from 'kafkajs-snappy';
import { CodecError, compressLz4, decompressLz4 } from './lz4-frame.ts';

/** The codecs of Kafka record batches, by the names producers configure (`compression.type`). */
export const codecNames = ['none', 'gzip', 'snappy', 'lz4', 'zstd'] as const;
export type CodecName = (typeof codecNames)[number];

/** kafkajs's `compression` value for each codec, for producers that write them. */
export const kafkajsCompression: Record<CodecName, CompressionTypes> = {
  none: kafkajs.CompressionTypes.None,
  gzip: kafkajs.CompressionTypes.GZIP,
  snappy: kafkajs.CompressionTypes.Snappy,
  lz4: kafkajs.CompressionTypes.LZ4,
  zstd: kafkajs.CompressionTypes.ZSTD,
};

/** The codec shape kafkajs calls: `compress` gets its Encoder, of which only `buffer` is used. */
export interface KafkajsCodec {
  compress(encoder: { buffer: Buffer }): Promise<Buffer>;
  decompress(buffer: Buffer): Promise<Buffer>;
}

const lz4: KafkajsCodec = {
  compress: (encoder) => Promise.resolve(compressLz4(encoder.buffer)),
  decompress: (buffer) => {
    try {
      return Promise.resolve(decompressLz4(buffer));
    } catch (error) {
      return Promise.reject(error instanceof Error ? error : new CodecError(String(error)));
    }
  },
};

// Node's zstd runs on libuv's thread pool, off the event loop, like kafkajs's own gzip.
const zstdCompressAsync = promisify(zstdCompress);
const zstdDecompressAsync = promisify(zstdDecompress);
const zstd: KafkajsCodec = {
  compress: (encoder) => zstdCompressAsync(encoder.buffer),
  decompress: (buffer) => zstdDecompressAsync(buffer),
};

let registered = false;

/** Registers snappy, lz4 and zstd with kafkajs (once; gzip it has). */
export function registerCodecs(): void {
  if (registered) return;
  registered = true;
  // A CommonJS module whose lexer-visible exports miss these two: reached through its default.
  const { CompressionCodecs, CompressionTypes } = kafkajs;
  const codecs = CompressionCodecs as Record<number, () => KafkajsCodec>;
  codecs[CompressionTypes.Snappy] = SnappyCodec;
  codecs[CompressionTypes.LZ4] = () => lz4;
  codecs[CompressionTypes.ZSTD] = () => zstd;
}
