// Types of the two codec packages, which ship none: only what src/kafka/codecs.ts uses.
declare module 'kafkajs-snappy' {
  interface SnappyCodec {
    compress(encoder: { buffer: Buffer }): Promise<Buffer>;
    decompress(buffer: Buffer): Promise<Buffer>;
  }
  const createSnappyCodec: () => SnappyCodec;
  export default createSnappyCodec;
}

declare module 'lz4js' {
  /** Decodes one LZ4 block of `src` into `dst` at `dIndex`; returns the end of what it wrote. */
  export function decompressBlock(
    src: Uint8Array,
    dst: Uint8Array,
    sIndex: number,
    sLength: number,
    dIndex: number,
  ): number;
  /**
   * Compresses src[sIndex, sIndex + sLength) as one LZ4 block into `dst` (from 0), matching
   * against positions in `hashTable` (zeroed: none); returns its size, 0 when nothing matched.
   */
  export function compressBlock(
    src: Uint8Array,
    dst: Uint8Array,
    sIndex: number,
    sLength: number,
    hashTable: Uint32Array,
  ): number;
}

declare module 'lz4js/xxh32.js' {
  /** xxHash32 of src[index, index + length). */
  export function hash(seed: number, src: Uint8Array, index: number, length: number): number;
}
